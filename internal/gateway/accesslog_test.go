package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corput/corput/internal/accesslog"
	"github.com/corput/corput/internal/telemetry"
	"github.com/corput/corput/internal/waitfor"
)

// logOrigin answers /app/fixed with "ok\n" (Content-Length) and
// /app/chunked with "hello world" in two chunks.
func logOrigin(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/app/chunked" {
			io.WriteString(w, "hello ")
			w.(http.Flusher).Flush()
			io.WriteString(w, "world")
			return
		}
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// accessLogGateway starts a gateway with the access_log block given,
// routing /app to app and /dead to an endpoint that refuses connections,
// on the fast path or net/http's.
func accessLogGateway(t testing.TB, fast bool, accessLog, app string, opts Options) *Gateway {
	t.Helper()
	g := newGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 2
downstream: {fast_path: %v}
access_log: %s
routes:
  - {path_prefix: /app, origin: app}
  - {path_prefix: /dead, origin: dead}
origins:
  - name: app
    protocol: h1
    endpoints: [{address: %q}]
  - name: dead
    protocol: h1
    endpoints: [{address: %q}]
    pool: {prewarm: 0}
`, fast, accessLog, app, deadAddr(t)), opts)
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, g)
	return g
}

// rawConn is one keep-alive client connection, so its address is known.
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{c: c, br: bufio.NewReader(c)}
}

// do sends one request head and returns the status and the body's length.
func (rc *rawConn) do(t testing.TB, method, target string, fields ...string) (int, int) {
	t.Helper()
	head := method + " " + target + " HTTP/1.1\r\nHost: gw.test\r\n" + strings.Join(fields, "") + "\r\n"
	rc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(rc.c, head); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(rc.br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, target, err)
	}
	return resp.StatusCode, len(body)
}

// TestAccessLogLines: on both serving paths and in both formats, every
// request through a real gateway gets its line, and each line parses back
// to the request's fields: an origin's answer (fixed length, chunked,
// HEAD), no route, and a dead endpoint.
func TestAccessLogLines(t *testing.T) {
	app := logOrigin(t)
	for _, path := range []string{"fast", "nethttp"} {
		for _, format := range []string{"json", "combined"} {
			t.Run(path+"/"+format, func(t *testing.T) {
				file := filepath.Join(t.TempDir(), "access.log")
				g := accessLogGateway(t, path == "fast", fmt.Sprintf("{path: %s, format: %s}", file, format), app, Options{})
				if got := g.FastPath("app"); got != (path == "fast") {
					t.Fatalf("FastPath(app) = %v", got)
				}
				rc := dialRaw(t, g.Addr())
				type sent struct {
					method, target                    string
					status, bytes                     int
					origin, endpoint, reason, referer string
					attempts                          int
				}
				reqs := []sent{
					{"GET", "/app/fixed?y=1&z=%20", 200, 3, "app", app, "", "https://ref.test/a", 1},
					{"GET", "/app/chunked", 200, 11, "app", app, "", "", 1},
					{"HEAD", "/app/fixed", 200, 0, "app", app, "", "", 1},
					{"GET", "/nowhere", 404, len("Not Found: no_route\n"), "", "", "no_route", "", 0},
					{"GET", "/dead/x", 502, len("Bad Gateway: connect_failed\n"), "dead", g.st().origins["dead"].Config().Endpoints[0].Address, "connect_failed", "", 1},
				}
				before := time.Now()
				for _, r := range reqs {
					fields := []string{"User-Agent: log-test/1 (\"quoted\")\r\n"}
					if r.referer != "" {
						fields = append(fields, "Referer: "+r.referer+"\r\n")
					}
					status, n := rc.do(t, r.method, r.target, fields...)
					if status != r.status || n != r.bytes {
						t.Fatalf("%s %s: %d with %d bytes, want %d with %d", r.method, r.target, status, n, r.status, r.bytes)
					}
				}
				after := time.Now()
				drain(t, g) // writes the last lines
				lines := readLog(t, file)
				if len(lines) != len(reqs) {
					t.Fatalf("%d lines for %d requests:\n%s", len(lines), len(reqs), strings.Join(lines, "\n"))
				}
				client := rc.c.LocalAddr().String()
				resolution := time.Microsecond
				if format == "combined" {
					client, _, _ = net.SplitHostPort(client)
					resolution = time.Second
				}
				for i, r := range reqs {
					l, err := accesslog.Parse(lines[i])
					if err != nil {
						t.Fatal(err)
					}
					p, q, _ := strings.Cut(r.target, "?")
					want := accesslog.Line{
						Client: client, Method: r.method, Host: "gw.test", Path: p, Query: q, Proto: "HTTP/1.1",
						Status: r.status, Bytes: int64(r.bytes), Referer: r.referer, UserAgent: `log-test/1 ("quoted")`,
						Origin: r.origin, Endpoint: r.endpoint, Attempts: r.attempts, Error: r.reason, Loop: l.Loop,
					}
					got := l
					got.Time, got.Duration = time.Time{}, 0
					if got != want {
						t.Errorf("line %d:\n got %+v\nwant %+v\n%s", i, got, want, lines[i])
					}
					if l.Time.Before(before.Truncate(resolution)) || l.Time.After(after) {
						t.Errorf("line %d: time %v outside the requests' %v … %v", i, l.Time, before, after)
					}
					if l.Duration <= 0 && format == "json" || l.Duration > after.Sub(before) {
						t.Errorf("line %d: duration %v, want within the requests' %v", i, l.Duration, after.Sub(before))
					}
					if routed := r.origin != ""; routed && (l.Loop < 0 || l.Loop >= 2) || !routed && l.Loop != -1 {
						t.Errorf("line %d: loop %d (routed: %v)", i, l.Loop, routed)
					}
				}
			})
		}
	}
}

// TestAccessLogHTTP2: an h2c request (served through net/http) is logged
// with its protocol and the stream's fields.
func TestAccessLogHTTP2(t *testing.T) {
	file := filepath.Join(t.TempDir(), "access.log")
	g := accessLogGateway(t, true, fmt.Sprintf("{path: %s}", file), logOrigin(t), Options{})
	c := downstream(t, dsH2C, nil)
	resp, body := get(t, c, "http://"+g.Addr()+"/app/fixed?h2")
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
		t.Fatalf("%s %d", resp.Proto, resp.StatusCode)
	}
	drain(t, g)
	lines := readLog(t, file)
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1", len(lines))
	}
	l, err := accesslog.Parse(lines[0])
	if err != nil {
		t.Fatal(err)
	}
	if l.Proto != "HTTP/2.0" || l.Method != "GET" || l.Host != g.Addr() || l.Path != "/app/fixed" || l.Query != "h2" ||
		l.Status != 200 || l.Bytes != int64(len(body)) || l.Origin != "app" || l.Attempts != 1 || l.Loop < 0 {
		t.Errorf("an h2c request's line: %+v", l)
	}
}

// drain shuts g down gracefully, so that every request's line is written:
// the fast path adds a request's line once its response is out, so a
// client may have its answer a moment before the line is added, and Close
// (which does not wait for requests) could close the log first.
func drain(t testing.TB, g *Gateway) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// readLog returns the lines of an access log file.
func readLog(t testing.TB, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		return nil
	}
	if data[len(data)-1] != '\n' {
		t.Fatalf("%s ends inside a line", file)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// TestAccessLogSample: with sample 0.25 and a fixed seed, the share of
// requests logged is a quarter within 0.05 (3.7 standard deviations at
// 1000 requests), on both paths.
func TestAccessLogSample(t *testing.T) {
	app := logOrigin(t)
	const n, share = 1000, 0.25
	for _, path := range []string{"fast", "nethttp"} {
		t.Run(path, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "access.log")
			g := accessLogGateway(t, path == "fast", fmt.Sprintf("{path: %s, sample: %v}", file, share), app, Options{Seed: 3})
			rc := dialRaw(t, g.Addr())
			for range n {
				if status, _ := rc.do(t, "GET", "/app/fixed"); status != 200 {
					t.Fatalf("status %d", status)
				}
			}
			drain(t, g)
			got := float64(len(readLog(t, file))) / n
			if got < share-0.05 || got > share+0.05 {
				t.Errorf("logged %.3f of %d requests with sample %v, want within 0.05", got, n, share)
			}
		})
	}
}

// stuckWriter blocks every Write until released.
type stuckWriter struct {
	entered chan struct{}
	release chan struct{}
	lines   chan int // newlines written, once released
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	w.entered <- struct{}{}
	<-w.release
	w.lines <- strings.Count(string(p), "\n")
	return len(p), nil
}

// TestAccessLogFullBufferDrops: with the log's writer stuck, requests are
// still answered at once (none waits for the log); the lines its ring
// cannot hold are dropped and counted in corput_access_log_dropped_total.
func TestAccessLogFullBufferDrops(t *testing.T) {
	app := logOrigin(t)
	for _, path := range []string{"fast", "nethttp"} {
		t.Run(path, func(t *testing.T) {
			w := &stuckWriter{entered: make(chan struct{}, 16), release: make(chan struct{}), lines: make(chan int, 16)}
			metrics := telemetry.New()
			const ring = 8
			alog := accesslog.New(w, accesslog.Options{Capacity: ring, Dropped: metrics.AccessLogDropped})
			released := false
			release := func() {
				if !released {
					close(w.release)
					released = true
				}
			}
			defer release() // before the gateway's cleanup closes the log
			g := accessLogGateway(t, path == "fast", "{path: stdout}", app, Options{Metrics: metrics, AccessLog: alog})
			rc := dialRaw(t, g.Addr())
			rc.do(t, "GET", "/app/fixed")
			<-w.entered // the writer holds the first line and is stuck writing it
			const n = 50
			for i := range n {
				// Each request's deadline is do's 10s; none may hang on the log.
				if status, _ := rc.do(t, "GET", "/app/fixed"); status != 200 {
					t.Fatalf("request %d with the log stuck: %d", i, status)
				}
			}
			// The fast path logs a request once its response is out: the
			// last lines may come a moment after the last answer.
			waitfor.Until(t, "every request's line added or dropped", func() bool { return alog.Dropped() >= n-ring })
			dropped, _ := scrapeFamilies(t, g).value("corput_access_log_dropped_total")
			if dropped != n-ring {
				t.Errorf("corput_access_log_dropped_total %v; want %d: %d requests, %d slots, the writer stuck", dropped, n-ring, n, ring)
			}
			release()
			drain(t, g)
			if alog.Dropped() != n-ring {
				t.Errorf("the log dropped %d lines in all, want %d", alog.Dropped(), n-ring)
			}
			written := 0
			for len(w.lines) > 0 {
				written += <-w.lines
			}
			if written != 1+ring {
				t.Errorf("%d lines written once the writer was free, want %d", written, 1+ring)
			}
		})
	}
}

// TestAccessLogReopen: after the file is renamed, ReopenAccessLog (what
// SIGUSR1 does) sends the next lines to a new file at the path.
func TestAccessLogReopen(t *testing.T) {
	file := filepath.Join(t.TempDir(), "access.log")
	g := accessLogGateway(t, true, fmt.Sprintf("{path: %s, format: combined}", file), logOrigin(t), Options{})
	rc := dialRaw(t, g.Addr())
	rc.do(t, "GET", "/app/fixed?before")
	// The line is added once the response is out: it is the old file's
	// once written there.
	waitfor.Until(t, "the first line", func() bool { return len(readLog(t, file)) == 1 })
	if err := os.Rename(file, file+".1"); err != nil {
		t.Fatal(err)
	}
	if path, err := g.ReopenAccessLog(); err != nil || path != file {
		t.Fatalf("ReopenAccessLog = %q, %v; want %s reopened", path, err, file)
	}
	rc.do(t, "GET", "/app/fixed?after")
	drain(t, g)
	checkRotated(t, file)
}

// checkRotated checks a rotation's files: the request ?before in file.1,
// the one renamed, and ?after in a new file.
func checkRotated(t testing.TB, file string) {
	t.Helper()
	for name, want := range map[string]string{file + ".1": "before", file: "after"} {
		lines := readLog(t, name)
		if len(lines) != 1 {
			t.Fatalf("%s: %d lines, want 1: %q", name, len(lines), lines)
		}
		if l, err := accesslog.Parse(lines[0]); err != nil || l.Query != want {
			t.Errorf("%s: %+v, %v; want the request ?%s", name, l, err, want)
		}
	}
}

// TestNoAccessLogByDefault: without access_log nothing is sampled and
// reopening does nothing.
func TestNoAccessLogByDefault(t *testing.T) {
	g := newGateway(t, withEndpoints(cfgText(1, ""), "127.0.0.1:1"), Options{})
	if path, err := g.ReopenAccessLog(); g.alog != nil || g.alog.Sample() || path != "" || err != nil {
		t.Errorf("a gateway without access_log has a log: %v (reopen: %q, %v)", g.alog, path, err)
	}
}

// TestServeReopensAccessLogOnSIGUSR1: `corput serve` reopens its access
// log on SIGUSR1, so a rotation (rename, then signal) loses no line and
// the next lines go to a new file; SIGTERM still drains and exits 0.
func TestServeReopensAccessLogOnSIGUSR1(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/corput")
	}
	file := filepath.Join(t.TempDir(), "access.log")
	p := startServe(t, fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
access_log: {path: %s}
routes: [{path_prefix: /app, origin: app}]
origins:
  - name: app
    endpoints: [{address: %q}]
`, file, logOrigin(t)))
	waitfor.Until(t, "/readyz", func() bool { return statusOf(t, "http://"+p.admin+"/readyz") == 200 })
	rc := dialRaw(t, p.listen)
	rc.do(t, "GET", "/app/fixed?before")
	waitfor.Until(t, "the first line", func() bool { return len(readLog(t, file)) == 1 })
	if err := os.Rename(file, file+".1"); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "a new file at the path", func() bool { _, err := os.Stat(file); return err == nil })
	rc.do(t, "GET", "/app/fixed?after")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if exited, err := p.wait(30 * time.Second); !exited || err != nil {
		t.Fatalf("corput serve after SIGTERM: exited %v, %v; want exit 0\n%s", exited, err, p.stop())
	}
	checkRotated(t, file)
	if logs := p.stop(); !strings.Contains(logs, "access log reopened") {
		t.Errorf("no reopen logged:\n%s", logs)
	}
}
