package discovery

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/waitfor"
)

func TestParseEndpointsYAMLAndJSON(t *testing.T) {
	want := []Endpoint{
		{Address: "10.0.0.7:8080", Zone: "us-east-1a", Weight: 2},
		{Address: "10.0.0.8:8080", Zone: "", Weight: 1},
		{Address: "[::1]:9000", Zone: "us-east-1b", Weight: 1},
	}
	docs := map[string]string{
		"yaml": `
endpoints:
  - {address: "[::1]:9000", zone: us-east-1b}
  - address: 10.0.0.8:8080
  - {address: 10.0.0.7:8080, zone: us-east-1a, weight: 2}
`,
		"json": `{"endpoints": [
  {"address": "10.0.0.8:8080"},
  {"address": "[::1]:9000", "zone": "us-east-1b"},
  {"address": "10.0.0.7:8080", "zone": "us-east-1a", "weight": 2}
]}`,
	}
	for name, doc := range docs {
		got, err := ParseEndpoints(name, []byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: got %v, want %v (sorted by address, weight defaulted to 1)", name, got, want)
		}
	}
	got, err := ParseEndpoints("empty-list", []byte("endpoints: []\n"))
	if err != nil || len(got) != 0 {
		t.Fatalf("an explicit empty list is a valid, empty membership: %v, %v", got, err)
	}
}

// The file is decoded by the config's rules: aliases and merge keys are
// followed, and a key given an empty value keeps its default.
func TestParseEndpointsDecodesAsTheConfigDoes(t *testing.T) {
	got, err := ParseEndpoints("f", []byte(`
endpoints:
  - &east {address: 10.0.0.1:80, zone: us-east-1a, weight: 3}
  - {<<: *east, address: 10.0.0.2:80}
  - {address: 10.0.0.3:80, weight: ~}
`))
	want := []Endpoint{
		{Address: "10.0.0.1:80", Zone: "us-east-1a", Weight: 3},
		{Address: "10.0.0.2:80", Zone: "us-east-1a", Weight: 3},
		{Address: "10.0.0.3:80", Weight: 1},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
}

func TestParseEndpointsErrorsNameLineAndFix(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []string // substrings of the error
	}{
		{"empty", "  \n", []string{"eps.yaml is empty", "endpoints: [...]"}},
		{"syntax", "endpoints: [\n  {address: a:1\n", []string{"not valid YAML", "line"}},
		{"top-level list", "- address: a:1\n", []string{"line 1", "want a mapping with keys endpoints, got a list"}},
		{"unknown top key", "endpoints: []\nservers: []\n", []string{"line 2", `unknown key "servers"`}},
		{"no endpoints key", "{}\n", []string{"no endpoints key"}},
		{"null list", "endpoints:\n", []string{"line 1", "endpoints: []"}},
		{"missing address", "endpoints:\n  - zone: a\n", []string{"line 2", "endpoints[0]", "no address"}},
		{"bad port", "endpoints:\n  - address: 10.0.0.1:http\n", []string{"line 2", "port", "1..65535"}},
		{"no port", "endpoints:\n  - address: 10.0.0.1\n", []string{"line 2", "not host:port", "10.0.0.7:8080"}},
		{"zero weight", "endpoints:\n  - address: a:1\n    weight: 0\n", []string{"line 3", "weight", "leave weight out for 1"}},
		{"text weight", "endpoints:\n  - {address: a:1, weight: heavy}\n", []string{"line 2", `endpoints[0].weight: want a whole number, got "heavy"`}},
		{"fractional weight", "endpoints:\n  - {address: a:1, weight: 2.5}\n", []string{"line 2", `endpoints[0].weight: want a whole number, got "2.5"`}},
		{"unknown key", "endpoints:\n  - address: a:1\n    wieght: 2\n", []string{"line 3", `unknown key "wieght"`, `did you mean "weight"?`, "address, zone, weight, ring_index, ring_subsets"}},
		{"list zone", "endpoints:\n  - address: a:1\n    zone: [a, b]\n", []string{"line 3", "endpoints[0].zone: want a string, got a list"}},
		{"duplicate", "endpoints:\n  - address: a:1\n  - address: b:1\n  - address: a:1\n", []string{"line 4", "already listed at line 2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseEndpoints("/etc/corput/eps.yaml", []byte(c.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "/etc/corput/eps.yaml") {
				t.Errorf("error does not name the file: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseEndpointsReportsEveryBadEntry(t *testing.T) {
	_, err := ParseEndpoints("f", []byte("endpoints:\n  - address: x\n  - address: a:1\n  - address: y\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("want both bad entries (lines 2 and 4) reported, got %v", err)
	}
}

// fileHarness runs a File source on a fake clock and collects its updates.
type fileHarness struct {
	t       *testing.T
	path    string
	clk     *clock.Fake
	src     *File
	updates chan Update
	cancel  context.CancelFunc
	done    chan error
	stopped sync.Once
	log     *testlog.Buffer
}

func startFile(t *testing.T, initial string) *fileHarness {
	t.Helper()
	h := &fileHarness{t: t, path: filepath.Join(t.TempDir(), "endpoints.yaml"), clk: clock.NewFake(epoch),
		updates: make(chan Update, 16), done: make(chan error, 1)}
	if initial != "" {
		h.write(initial)
	}
	logger, buf := testlog.New(slog.LevelInfo)
	h.log = buf
	src, err := NewFile(FileConfig{Origin: "payments", Path: h.path, Clock: h.clk, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	h.src = src
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	started := make(chan struct{})
	go func() {
		close(started)
		h.done <- src.Run(ctx, func(u Update) { h.updates <- u })
	}()
	<-started
	t.Cleanup(h.stop)
	return h
}

func (h *fileHarness) write(s string) {
	h.t.Helper()
	if err := os.WriteFile(h.path, []byte(s), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// next waits for the update that a poll has emitted.
func (h *fileHarness) next() Update {
	h.t.Helper()
	return receive(h.t, h.updates, "from the file source")
}

// none asserts that nothing was emitted: polls run synchronously inside
// clk.Advance, so anything emitted is already in the channel.
func (h *fileHarness) none() {
	h.t.Helper()
	select {
	case u := <-h.updates:
		h.t.Fatalf("unexpected update %v", u)
	default:
	}
}

func (h *fileHarness) stop() {
	h.stopped.Do(func() {
		h.cancel()
		if err := <-h.done; err != nil {
			h.t.Errorf("Run returned %v", err)
		}
	})
}

func TestFileFollowsEditsAndKeepsLastGoodOnGarbage(t *testing.T) {
	h := startFile(t, "endpoints:\n  - {address: 10.0.0.1:80, zone: a}\n")
	if u := h.next(); u.Origin != "payments" || !slices.Equal(u.Endpoints, []Endpoint{{Address: "10.0.0.1:80", Zone: "a", Weight: 1}}) {
		t.Fatalf("initial update %v", u)
	}

	// An edit is followed at the next poll.
	h.write("endpoints:\n  - {address: 10.0.0.1:80, zone: a}\n  - {address: 10.0.0.2:80, zone: b, weight: 3}\n")
	h.clk.Advance(time.Second)
	if u := h.next(); !slices.Equal(u.Endpoints, []Endpoint{{Address: "10.0.0.1:80", Zone: "a", Weight: 1}, {Address: "10.0.0.2:80", Zone: "b", Weight: 3}}) {
		t.Fatalf("after edit: %v", u.Endpoints)
	}
	h.none()

	// Nothing changed: nothing emitted.
	h.clk.Advance(time.Second)
	h.none()

	// Garbage: the last good set stays (nothing emitted), and Err and the
	// log say which file, which line and what to do.
	h.write("endpoints:\n  - {address: 10.0.0.1:80}\n  - {address: 10.0.0.3}\n")
	h.clk.Advance(time.Second)
	h.none()
	err := h.src.Err()
	if err == nil || !strings.Contains(err.Error(), h.path) || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "host:port") {
		t.Fatalf("Err() = %v; want the file, line 3 and the fix", err)
	}
	if !strings.Contains(h.log.String(), "line 3") || !strings.Contains(h.log.String(), "keeping the last good membership") {
		t.Fatalf("log does not explain the rejection:\n%s", h.log)
	}
	h.clk.Advance(5 * time.Second)
	if n := strings.Count(h.log.String(), "line 3"); n != 1 {
		t.Fatalf("the same error was logged %d times; want once", n)
	}

	// A missing file is the same: last good kept, reason reported.
	if err := os.Remove(h.path); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(time.Second)
	h.none()
	if err := h.src.Err(); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("Err() = %v; want the missing file", err)
	}

	// Fixed: followed, error cleared, recovery logged.
	h.write("endpoints:\n  - {address: 10.0.0.3:80, zone: c}\n")
	h.clk.Advance(time.Second)
	if u := h.next(); !slices.Equal(u.Endpoints, []Endpoint{{Address: "10.0.0.3:80", Zone: "c", Weight: 1}}) {
		t.Fatalf("after fix: %v", u.Endpoints)
	}
	if err := h.src.Err(); err != nil {
		t.Fatalf("Err() = %v after a valid file", err)
	}
	if !strings.Contains(h.log.String(), "recovered") {
		t.Fatalf("recovery not logged:\n%s", h.log)
	}
}

func TestFileRevertToLastGoodEmitsNothing(t *testing.T) {
	good := "endpoints:\n  - {address: 10.0.0.1:80}\n"
	h := startFile(t, good)
	h.next()
	h.write("endpoints: {")
	h.clk.Advance(time.Second)
	h.write(good)
	h.clk.Advance(time.Second)
	h.none()
	if err := h.src.Err(); err != nil {
		t.Fatalf("Err() = %v after reverting to the good file", err)
	}
}

func TestFileMissingAtStartThenCreated(t *testing.T) {
	h := startFile(t, "")
	waitfor.Until(t, "the missing file to be reported", func() bool { return h.src.Err() != nil })
	h.none()
	h.write("endpoints: []\n")
	h.clk.Advance(time.Second)
	if u := h.next(); len(u.Endpoints) != 0 {
		t.Fatalf("want the empty membership, got %v", u.Endpoints)
	}
}

func TestFileStopsPollingWhenRunReturns(t *testing.T) {
	h := startFile(t, "endpoints: []\n")
	h.next()
	h.stop()
	if h.clk.Pending() != 0 {
		t.Fatalf("%d timers still armed after Run returned", h.clk.Pending())
	}
	h.write("endpoints:\n  - {address: 10.0.0.1:80}\n")
	h.clk.Advance(time.Minute)
	h.none()
}

func TestNewFileRejectsMissingPath(t *testing.T) {
	if _, err := NewFile(FileConfig{Origin: "payments"}); err == nil || !strings.Contains(err.Error(), "discovery.path") {
		t.Fatalf("err = %v; want it to name discovery.path", err)
	}
}

func TestParseEndpointsNullZoneIsEmpty(t *testing.T) {
	got, err := ParseEndpoints("f", []byte("endpoints:\n  - {address: a:1, zone: ~}\n  - {address: b:1, zone: 7}\n"))
	if err != nil || !slices.Equal(got, []Endpoint{{Address: "a:1", Zone: "", Weight: 1}, {Address: "b:1", Zone: "7", Weight: 1}}) {
		t.Fatalf("got %v, %v; a null zone is \"\", a number is its text", got, err)
	}
}

func TestFileEveryRunStartsWithTheMembership(t *testing.T) {
	h := startFile(t, "endpoints:\n  - {address: 10.0.0.1:80}\n")
	h.next()
	h.stop()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var got []Update
	if err := h.src.Run(ctx, func(u Update) { got = append(got, u) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Endpoints) != 1 {
		t.Fatalf("second Run emitted %v; want the membership once", got)
	}
}
