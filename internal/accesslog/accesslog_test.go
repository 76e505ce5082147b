package accesslog

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/waitfor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// record is a Record with a value in every field.
func record(i int) Record {
	return Record{
		Start:     time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC).Add(time.Duration(i) * time.Second),
		Duration:  1500 * time.Microsecond,
		Client:    "192.0.2.7:53124",
		Method:    "GET",
		Host:      "api.example.com",
		Target:    "/v1/items/" + strconv.Itoa(i) + "?q=a%20b&x=1",
		Proto:     "HTTP/1.1",
		Status:    200,
		Bytes:     1234,
		Referer:   "https://example.com/start",
		UserAgent: "curl/8.5.0",
		Origin:    "api",
		Endpoint:  "10.0.0.3:8080",
		Attempts:  2,
		Reason:    "",
		Loop:      1,
		RequestID: "0b9e5c6a-1f2d-4e3c-8a7b-6c5d4e3f2a1b",
	}
}

// wantLine is the Line a record reads back as from a JSON line.
func wantLine(r Record) Line {
	path, query, _ := strings.Cut(r.Target, "?")
	return Line{
		Time: r.Start.Truncate(time.Microsecond), Client: r.Client, Method: r.Method, Host: r.Host,
		Path: path, Query: query, Proto: r.Proto, Status: r.Status, Bytes: r.Bytes, Duration: r.Duration,
		Referer: r.Referer, UserAgent: r.UserAgent, Origin: r.Origin, Endpoint: r.Endpoint,
		Attempts: r.Attempts, Error: r.Reason, Loop: r.Loop, RequestID: r.RequestID,
	}
}

// parse parses one line, failing t if it does not.
func parse(t testing.TB, line string) Line {
	t.Helper()
	l, err := Parse(line)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// readLines returns the lines of file.
func readLines(t testing.TB, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("%s does not end with a newline: a line was cut", file)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func tempLog(t *testing.T, format Format) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "access.log")
	l, err := Open(path, Options{Format: format, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

// TestJSONLines: a record written as JSON parses back, field by field,
// escapes and all.
func TestJSONLines(t *testing.T) {
	l, path := tempLog(t, JSON)
	plain := record(0)
	odd := record(1)
	odd.Target = "/odd\"path\\\x01/é?q=\u2028"
	odd.UserAgent = "bad \xff utf-8\ttab"
	odd.Referer, odd.Endpoint, odd.Attempts, odd.Reason, odd.Status, odd.Bytes, odd.Loop = "", "", 0, "no_route", 404, 20, -1
	odd.Origin = ""
	l.Add(&plain)
	l.Add(&odd)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	want := []Line{wantLine(plain), wantLine(odd)}
	want[1].UserAgent = "bad \ufffd utf-8\ttab"
	if want[1].Path != "/odd\"path\\\x01/é" || want[1].Query != "q=\u2028" {
		t.Fatalf("wantLine split the target %q into %q and %q", odd.Target, want[1].Path, want[1].Query)
	}
	for i, line := range lines {
		if got := parse(t, line); got != want[i] {
			t.Errorf("line %d:\n got %+v\nwant %+v\n%s", i, got, want[i], line)
		}
	}
	if strings.ContainsRune(lines[1], '\u2028') {
		t.Errorf("U+2028 written raw: %s", lines[1])
	}
	if !strings.HasPrefix(lines[0], `{"time":"2026-03-04T05:06:07.123456Z","client":`) {
		t.Errorf("the time is not UTC with microseconds: %s", lines[0])
	}
}

// TestCombinedLines: a combined line is Apache's combined format, then
// corput's fields, with Apache's escapes and "-" for empty values.
func TestCombinedLines(t *testing.T) {
	l, path := tempLog(t, Combined)
	plain := record(0)
	plain.Start = plain.Start.In(time.FixedZone("", -7*3600))
	odd := record(1)
	odd.Client = "[2001:db8::1]:443"
	odd.UserAgent = "say \"hi\"\n\xe9\\"
	odd.Referer, odd.Endpoint, odd.Attempts, odd.Reason, odd.Status, odd.Bytes, odd.Loop, odd.Origin = "", "", 0, "no_route", 404, 0, -1, ""
	odd.RequestID = ""
	l.Add(&plain)
	l.Add(&odd)
	l.Close()
	lines := readLines(t, path)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2", len(lines))
	}
	want := []string{
		`192.0.2.7 - - [03/Mar/2026:22:06:07 -0700] "GET /v1/items/0?q=a%20b&x=1 HTTP/1.1" 200 1234 "https://example.com/start" "curl/8.5.0" ` +
			`host="api.example.com" origin=api endpoint=10.0.0.3:8080 attempts=2 error=- loop=1 duration=0.001500 limit=- request_id=0b9e5c6a-1f2d-4e3c-8a7b-6c5d4e3f2a1b`,
		`2001:db8::1 - - [04/Mar/2026:05:06:08 +0000] "GET /v1/items/1?q=a%20b&x=1 HTTP/1.1" 404 - "-" "say \"hi\"\n\xe9\\" ` +
			`host="api.example.com" origin=- endpoint=- attempts=0 error=no_route loop=- duration=0.001500 limit=- request_id=-`,
	}
	for i, line := range lines {
		if line != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, line, want[i])
		}
	}
	// A combined line has the client's host and the time's seconds only.
	wantLines := []Line{wantLine(plain), wantLine(odd)}
	for i, host := range []string{"192.0.2.7", "2001:db8::1"} {
		wantLines[i].Client, wantLines[i].Time = host, wantLines[i].Time.Truncate(time.Second)
	}
	for i, line := range lines {
		if got := parse(t, line); !got.Time.Equal(wantLines[i].Time) || got.withoutTime() != wantLines[i].withoutTime() {
			t.Errorf("line %d parsed:\n got %+v\nwant %+v", i, got, wantLines[i])
		}
	}
}

func (l Line) withoutTime() Line { l.Time = time.Time{}; return l }

// TestParseIsStrict: a line missing a field, with one unknown, or in
// neither format is refused.
func TestParseIsStrict(t *testing.T) {
	l, path := tempLog(t, JSON)
	r := record(0)
	l.Add(&r)
	l.Close()
	good := readLines(t, path)[0]
	for _, bad := range []string{
		strings.Replace(good, `"loop":1`, `"loops":1`, 1),
		strings.Replace(good, `,"loop":1`, ``, 1),
		good + good,
		`127.0.0.1 - - [x] "GET / HTTP/1.1" 200 3 "-" "-"`,
		strings.Replace(`192.0.2.7 - - [03/Mar/2026:22:06:07 -0700] "GET / HTTP/1.1" 200 1 "-" "\q" host="h" origin=a endpoint=b attempts=1 error=- loop=1 duration=0.000001`, `\q`, `\x4`, 1),
	} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse accepted %s", bad)
		}
	}
}

// TestLongFieldsAreCut: a field over its limit is cut at a rune boundary
// and marked, and the line stays one line.
func TestLongFieldsAreCut(t *testing.T) {
	l, path := tempLog(t, JSON)
	r := record(0)
	r.Target = "/" + strings.Repeat("a", Limits[fTarget]+100)
	r.UserAgent = strings.Repeat("é", Limits[fUserAgent]) // 2 bytes each: cut mid-string
	l.Add(&r)
	l.Close()
	got := parse(t, readLines(t, path)[0])
	if want := r.Target[:Limits[fTarget]] + ellipsis; got.Path != want || got.Query != "" {
		t.Errorf("path %d bytes, query %q; want the first %d bytes and %q", len(got.Path), got.Query, Limits[fTarget], ellipsis)
	}
	if want := strings.Repeat("é", Limits[fUserAgent]/2) + ellipsis; got.UserAgent != want {
		t.Errorf("user agent %q, want %d é and %q", got.UserAgent, Limits[fUserAgent]/2, ellipsis)
	}
}

// TestSampleShare: with a fixed seed the share kept is the sample's
// within 1 percentage point over 100 000 requests (10 standard deviations
// at 0.1), and the same seed keeps the same requests.
func TestSampleShare(t *testing.T) {
	const n = 100_000
	for _, share := range []float64{0.1, 0.5} {
		draw := func() []bool {
			l := New(io.Discard, Options{Sample: share, Seed: 7, Logger: quiet})
			defer l.Close()
			out := make([]bool, n)
			for i := range out {
				out[i] = l.Sample()
			}
			return out
		}
		a, b := draw(), draw()
		kept := 0
		for i := range a {
			if a[i] {
				kept++
			}
			if a[i] != b[i] {
				t.Fatalf("sample %v: draw %d differs between two logs with one seed", share, i)
			}
		}
		if got := float64(kept) / n; got < share-0.01 || got > share+0.01 {
			t.Errorf("sample %v kept %.4f of %d requests, want within 0.01", share, got, n)
		}
	}
	l := New(io.Discard, Options{Sample: 1, Logger: quiet})
	defer l.Close()
	for range 1000 {
		if !l.Sample() {
			t.Fatal("sample 1 left a request out")
		}
	}
	var none *Log
	if none.Sample() {
		t.Error("a nil log sampled a request")
	}
	none.Add(&Record{}) // does nothing
}

// lineCounter counts the lines written to it.
type lineCounter struct{ n atomic.Int64 }

func (w *lineCounter) Write(p []byte) (int, error) {
	w.n.Add(int64(bytes.Count(p, []byte("\n"))))
	return len(p), nil
}

func (w *lineCounter) lines() int { return int(w.n.Load()) }

// blockingWriter blocks every Write until released.
type blockingWriter struct {
	entered chan struct{} // one value per Write that started
	release chan struct{}
	lineCounter
}

func newBlockingWriter() *blockingWriter {
	return &blockingWriter{entered: make(chan struct{}, 1024), release: make(chan struct{})}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.entered <- struct{}{}
	<-w.release
	return w.lineCounter.Write(p)
}

// counter is a prometheus.Counter's Add.
type counter struct{ n atomic.Int64 }

func (c *counter) Add(v float64) { c.n.Add(int64(v)) }

// TestFullRingDrops: with the writer stuck in a write, Add still returns
// at once; what the ring cannot hold is dropped and counted, and every
// record is either written or counted once the writer is free.
func TestFullRingDrops(t *testing.T) {
	w := newBlockingWriter()
	var c counter
	l := New(w, Options{Capacity: 8, Dropped: &c, Logger: quiet})
	r := record(0)
	l.Add(&r)
	<-w.entered // the writer took the first record and is stuck writing it
	const n = 100
	for range n {
		l.Add(&r)
	}
	if got := l.Dropped(); got != n-8 {
		t.Errorf("dropped %d of %d with the writer stuck and 8 slots, want %d", got, n, n-8)
	}
	if c.n.Load() != int64(l.Dropped()) {
		t.Errorf("the counter has %d, Dropped %d", c.n.Load(), l.Dropped())
	}
	close(w.release)
	l.Close()
	if got := w.lines() + int(l.Dropped()); got != n+1 {
		t.Errorf("%d written + %d dropped = %d, want %d", w.lines(), l.Dropped(), got, n+1)
	}
	if w.lines() != 9 {
		t.Errorf("%d lines written, want the first and the 8 the ring held", w.lines())
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write(p []byte) (int, error) { return 0, io.ErrClosedPipe }

// TestFailedWritesAreDropped: a batch that cannot be written counts its
// lines as dropped.
func TestFailedWritesAreDropped(t *testing.T) {
	var c counter
	l := New(failingWriter{}, Options{Dropped: &c, Logger: quiet})
	r := record(0)
	for range 5 {
		l.Add(&r)
	}
	l.Close()
	if l.Dropped() != 5 || c.n.Load() != 5 {
		t.Errorf("dropped %d (counter %d), want 5", l.Dropped(), c.n.Load())
	}
}

// TestAddAfterClose is dropped and counted.
func TestAddAfterClose(t *testing.T) {
	l, path := tempLog(t, JSON)
	r := record(0)
	l.Add(&r)
	l.Close()
	l.Add(&r)
	l.Close() // again: nothing
	if got := len(readLines(t, path)); got != 1 || l.Dropped() != 1 {
		t.Errorf("%d lines, %d dropped; want 1 and 1", got, l.Dropped())
	}
}

// TestReopen: after the file is renamed, Reopen sends the next lines to a
// new file at the path, and the lines before it stay in the renamed one.
func TestReopen(t *testing.T) {
	l, path := tempLog(t, JSON)
	for i := range 3 {
		r := record(i)
		l.Add(&r)
	}
	rotated := path + ".1"
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 5; i++ {
		r := record(i)
		l.Add(&r)
	}
	l.Close()
	paths := func(lines []string) (out []string) {
		for _, line := range lines {
			out = append(out, parse(t, line).Path)
		}
		return out
	}
	if got := fmt.Sprint(paths(readLines(t, rotated))); got != "[/v1/items/0 /v1/items/1 /v1/items/2]" {
		t.Errorf("the rotated file has %s", got)
	}
	if got := fmt.Sprint(paths(readLines(t, path))); got != "[/v1/items/3 /v1/items/4]" {
		t.Errorf("the new file has %s", got)
	}
}

// TestReopenFailureKeepsTheFile: when the path cannot be opened again the
// log goes on writing to the file it has.
func TestReopenFailureKeepsTheFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "access.log")
	l, err := Open(path, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	moved := dir + ".old"
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err == nil {
		t.Fatal("Reopen in a directory that is gone succeeded")
	}
	r := record(0)
	l.Add(&r)
	l.Close()
	if got := readLines(t, filepath.Join(moved, "access.log")); len(got) != 1 {
		t.Errorf("the old file has %d lines, want 1", len(got))
	}
	if err := l.Reopen(); err == nil {
		t.Error("Reopen after Close succeeded")
	}
}

// TestStdoutAndWritersDoNotReopen: Reopen is a no-op without a path.
func TestStdoutAndWritersDoNotReopen(t *testing.T) {
	l := New(io.Discard, Options{Logger: quiet})
	defer l.Close()
	if err := l.Reopen(); err != nil {
		t.Error(err)
	}
	if l.Path() != "" {
		t.Errorf("a writer's log has the path %q", l.Path())
	}
	var none *Log
	if none.Reopen() != nil || none.Close() != nil || none.Path() != "" {
		t.Error("a nil log's Reopen, Close or Path did something")
	}
}

// TestIdleWriterWakes: a record added while the writer sleeps is written
// without a Flush.
func TestIdleWriterWakes(t *testing.T) {
	var w lineCounter
	l := New(&w, Options{Logger: quiet})
	defer l.Close()
	for i := range 3 {
		r := record(i)
		l.Add(&r)
		waitfor.Until(t, fmt.Sprintf("line %d written", i+1), func() bool { return w.lines() == i+1 })
		waitfor.Until(t, "the writer to go idle", l.idle.Load) // a flushEvery without records
	}
}

// TestConcurrentAdds: records added from many goroutines at once are
// each written whole, once, with each goroutine's in its order, or
// counted as dropped.
func TestConcurrentAdds(t *testing.T) {
	l, path := tempLog(t, JSON)
	const producers, each = 8, 2000
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r := record(i)
				r.Target = fmt.Sprintf("/p%d/%d", p, i)
				l.Add(&r)
			}
		}()
	}
	wg.Wait()
	l.Close()
	next := make([]int, producers)
	lines := readLines(t, path)
	for _, line := range lines {
		var p, i int
		if _, err := fmt.Sscanf(parse(t, line).Path, "/p%d/%d", &p, &i); err != nil {
			t.Fatalf("path of %s: %v", line, err)
		}
		if i < next[p] {
			t.Fatalf("producer %d: record %d after %d", p, i, next[p]-1)
		}
		next[p] = i + 1
	}
	if got := len(lines) + int(l.Dropped()); got != producers*each {
		t.Errorf("%d written + %d dropped = %d, want %d", len(lines), l.Dropped(), got, producers*each)
	}
}

// TestAddAllocatesNothing: sampling and adding a record made of views of
// a reused buffer allocates nothing, whether it is kept or dropped.
func TestAddAllocatesNothing(t *testing.T) {
	l := New(io.Discard, Options{Sample: 0.5, Capacity: 4, Logger: quiet})
	defer l.Close()
	head := []byte("GET /a?b HTTP/1.1 api.example.com")
	allocs := testing.AllocsPerRun(1000, func() {
		if !l.Sample() {
			return
		}
		r := Record{Start: time.Now(), Client: "192.0.2.1:1", Method: bstr(head[:3]), Target: bstr(head[4:8]),
			Proto: bstr(head[9:17]), Host: bstr(head[18:]), Status: 200, Origin: "api", Loop: 0}
		r.Duration = time.Since(r.Start)
		l.Add(&r)
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per request", allocs)
	}
}

// bstr views b as a string, as the fast path passes its head's fields.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// TestWriterAllocatesNothingPerLine: formatting a line reuses the batch.
func TestWriterAllocatesNothingPerLine(t *testing.T) {
	var e entry
	r := record(0)
	e.set(&r)
	buf := make([]byte, 0, 4096)
	for _, f := range []Format{JSON, Combined} {
		allocs := testing.AllocsPerRun(1000, func() { buf = e.appendLine(buf[:0], f) })
		if allocs != 0 {
			t.Errorf("format %d: %.1f allocations per line", f, allocs)
		}
	}
}

// TestLinesAreReadableLineByLine: a batch larger than one write is still
// whole lines.
func TestLinesAreReadableLineByLine(t *testing.T) {
	l, path := tempLog(t, Combined)
	r := record(0)
	r.Target = "/" + strings.Repeat("x", 900)
	const n = 500 // about 500 KiB: several batches
	for range n {
		l.Add(&r)
	}
	l.Close()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	lines := 0
	for sc.Scan() {
		if _, err := Parse(sc.Text()); err != nil {
			t.Fatalf("line %d: %.300v", lines, err)
		}
		lines++
	}
	if lines+int(l.Dropped()) != n {
		t.Errorf("%d lines + %d dropped, want %d", lines, l.Dropped(), n)
	}
}

// BenchmarkAdd is a sampled request's cost on the request path: the draw
// and the copy into the ring. The writer (to io.Discard) is let drain the
// ring, off the clock, every half ring, so that nothing is dropped.
func BenchmarkAdd(b *testing.B) {
	l := New(io.Discard, Options{Logger: quiet})
	r := record(0)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if l.Sample() {
			r.Start = time.Now()
			r.Duration = time.Since(r.Start)
			l.Add(&r)
		}
		if n++; n%(DefaultCapacity/2) == 0 {
			b.StopTimer()
			l.Flush()
			b.StartTimer()
		}
	}
	l.Close()
	if l.Dropped() > 0 {
		b.Fatalf("%d dropped", l.Dropped())
	}
}

// BenchmarkFormat is the writer's cost per line.
func BenchmarkFormat(b *testing.B) {
	var e entry
	r := record(0)
	e.set(&r)
	buf := make([]byte, 0, 4096)
	for _, f := range []struct {
		name   string
		format Format
	}{{"json", JSON}, {"combined", Combined}} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf = e.appendLine(buf[:0], f.format)
			}
		})
	}
}
