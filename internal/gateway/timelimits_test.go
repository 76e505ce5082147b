package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/corput/corput/internal/cluster"
	testorigin "github.com/corput/corput/internal/origin"
)

// upstreams are both upstream protocols a stream is relayed from.
var upstreams = []struct {
	name  string
	proto testorigin.Proto
}{{"h1", testorigin.H1}, {"h2c", testorigin.H2C}}

// sse is an origin handler that sends n events, one every gap, then
// (silent) holds the stream open until the client leaves when hold.
func sse(n int, gap time.Duration, hold bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for i := 1; i <= n; i++ {
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
		if hold {
			<-r.Context().Done()
		}
	}
}

// sseAndHang is an HTTP/1.1 origin with a stream of n events, one every
// 100 ms, at /sse, and a request that is never answered at /hang.
func sseAndHang(t *testing.T, n int) *backend {
	mux := http.NewServeMux()
	mux.Handle("/sse", sse(n, 100*time.Millisecond, false))
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	return startBackend(t, testorigin.H1, mux)
}

// readEvents reads a stream's events until it ends: their count and the
// error that ended it (nil at a clean end).
func readEvents(t *testing.T, c *http.Client, url string) (int, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			n++
		}
	}
	return n, sc.Err()
}

// TestStreamIdleKeepsALiveStreamAndEndsASilentOne: with stream_idle
// 300ms, a stream with an event every 100 ms for 3 s gets every event, and
// one that falls silent after 3 events is ended, counted as
// upstream_idle_timeout; on both serving paths and both upstream
// protocols.
func TestStreamIdleKeepsALiveStreamAndEndsASilentOne(t *testing.T) {
	for _, p := range requestPaths {
		for _, up := range upstreams {
			t.Run(p.name+"/"+up.name, func(t *testing.T) {
				mux := http.NewServeMux()
				mux.Handle("/live", sse(30, 100*time.Millisecond, false))
				mux.Handle("/silent", sse(3, 50*time.Millisecond, true))
				b := startBackend(t, up.proto, mux)
				g := gatewayTo(t, 1, p.top, upstreamKeys(string(up.name), b)+"    timeouts: {stream_idle: 300ms}\n", b.addr)
				c := downstream(t, dsH1, nil)
				if n, err := readEvents(t, c, "http://"+g.Addr()+"/live"); n != 30 || err != nil {
					t.Fatalf("live stream: %d of 30 events, ended by %v", n, err)
				}
				idle := g.metrics.IdleTimeouts.WithLabelValues("app")
				if v := testutil.ToFloat64(idle); v != 0 {
					t.Fatalf("corput_upstream_idle_timeouts_total = %v after a live stream, want 0", v)
				}
				start := time.Now()
				n, err := readEvents(t, c, "http://"+g.Addr()+"/silent")
				if n != 3 || err == nil {
					t.Fatalf("silent stream: %d events, ended by %v; want 3 and an aborted body", n, err)
				}
				if took := time.Since(start); took > 5*time.Second {
					t.Fatalf("the silent stream was ended after %v", took)
				}
				if v := testutil.ToFloat64(idle); v != 1 {
					t.Fatalf("corput_upstream_idle_timeouts_total = %v, want 1", v)
				}
			})
		}
	}
}

// TestHungOriginTimesOutAtResponseHeaderWhileAStreamLives: an origin that
// accepts a request and never answers gets the client 504
// upstream_timeout at response_header, while a stream from the same origin
// that lasts longer than response_header goes on to its end.
func TestHungOriginTimesOutAtResponseHeaderWhileAStreamLives(t *testing.T) {
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			b := sseAndHang(t, 15)
			g := gatewayTo(t, 1, p.top, "    timeouts: {response_header: 500ms, connect: 250ms}\n", b.addr)
			c := downstream(t, dsH1, nil)
			done := make(chan error, 1)
			var events int
			go func() {
				var err error
				events, err = readEvents(t, c, "http://"+g.Addr()+"/sse")
				done <- err
			}()
			start := time.Now()
			resp, _ := get(t, c, "http://"+g.Addr()+"/hang")
			took := time.Since(start)
			if resp.StatusCode != 504 || resp.Header.Get("X-Corput-Error") != "upstream_timeout" {
				t.Fatalf("hung origin: %d %q, want 504 upstream_timeout", resp.StatusCode, resp.Header.Get("X-Corput-Error"))
			}
			if took < 500*time.Millisecond {
				t.Fatalf("answered after %v, before response_header", took)
			}
			if err := <-done; err != nil || events != 15 {
				t.Fatalf("the stream beside it: %d of 15 events (1.5 s, over response_header), ended by %v", events, err)
			}
		})
	}
}

// TestPerTryTimeoutGoesToTheOtherEndpoint: one of two endpoints accepts
// and never answers; with per_try_timeout 200ms every GET is answered 200
// by the other, within per_try_timeout of its first try.
func TestPerTryTimeoutGoesToTheOtherEndpoint(t *testing.T) {
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			var hungCount, liveCount atomic.Int64
			hung := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hungCount.Add(1)
				<-r.Context().Done()
			}))
			live := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				liveCount.Add(1)
				io.WriteString(w, "ok")
			}))
			keys := unsentKeys + "    retry: {attempts: 1, budget_percent: 100, per_try_timeout: 200ms}\n"
			g := gatewayTo(t, 1, p.top, keys, hung.addr, live.addr)
			c := downstream(t, dsH1, nil)
			const n = 10
			var slowest time.Duration
			for range n {
				start := time.Now()
				resp, _ := get(t, c, "http://"+g.Addr()+"/")
				if d := time.Since(start); d > slowest {
					slowest = d
				}
				if resp.StatusCode != 200 {
					t.Fatalf("status %d (%s), want 200 from the live endpoint", resp.StatusCode, resp.Header.Get("X-Corput-Error"))
				}
			}
			t.Logf("%d GETs: the hung endpoint got %d, the live one %d; slowest %v", n, hungCount.Load(), liveCount.Load(), slowest)
			if hungCount.Load() == 0 || liveCount.Load() != n {
				t.Fatalf("hung %d, live %d: want the hung endpoint met and every GET served by the live one", hungCount.Load(), liveCount.Load())
			}
		})
	}
}

// TestBodyLimits: a Content-Length over max_request_body_bytes gets 413
// and reaches no origin; a chunked body that grows over it is cut, the
// origin sees the request aborted and the client gets 413.
func TestBodyLimits(t *testing.T) {
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			var arrived atomic.Int64
			aborted := make(chan error, 4)
			b := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived.Add(1)
				_, err := io.Copy(io.Discard, r.Body)
				aborted <- err
				if err == nil {
					io.WriteString(w, "ok")
				}
			}))
			text := strings.Replace(withEndpoints(cfgText(1, ""), b.addr), "routes: [{path_prefix: /, origin: app}]",
				"routes: [{path_prefix: /, origin: app, max_request_body_bytes: 1000}]", 1)
			g := startGateway(t, p.top+text, nil, Options{})
			c := downstream(t, dsH1, nil)
			url := "http://" + g.Addr() + "/"
			resp, err := c.Post(url, "text/plain", strings.NewReader(strings.Repeat("x", 2000)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 413 || resp.Header.Get("X-Corput-Error") != "request_body_too_large" || arrived.Load() != 0 {
				t.Fatalf("Content-Length 2000: %d %q, the origin counted %d; want 413 request_body_too_large and 0",
					resp.StatusCode, resp.Header.Get("X-Corput-Error"), arrived.Load())
			}
			// Under the limit: forwarded.
			resp, err = c.Post(url, "text/plain", strings.NewReader(strings.Repeat("x", 1000)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("Content-Length 1000: %d, want 200", resp.StatusCode)
			}
			<-aborted
			// Chunked (no length), growing over the limit in pieces.
			pr, pw := io.Pipe()
			go func() {
				for range 10 {
					if _, err := pw.Write([]byte(strings.Repeat("y", 300))); err != nil {
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
				pw.Close()
			}()
			req, _ := http.NewRequest("POST", url, pr)
			resp, err = c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			pr.Close()
			if resp.StatusCode != 413 || resp.Header.Get("X-Corput-Error") != "request_body_too_large" {
				t.Fatalf("chunked over the limit: %d %q, want 413 request_body_too_large", resp.StatusCode, resp.Header.Get("X-Corput-Error"))
			}
			select {
			case err := <-aborted:
				if err == nil {
					t.Fatal("the origin read the cut body to a clean end")
				}
				t.Logf("the origin saw: %v", err)
			case <-time.After(5 * time.Second):
				t.Fatal("the origin's read of the cut body never ended")
			}
		})
	}
}

// TestTricklingClientIsCut408AndItsConnectionFreed: a client that sends
// part of its body and then nothing is answered 408 at
// downstream.body_read_timeout (scaled down to 300ms), the origin sees the
// request aborted, and the pool's connection is no longer busy.
func TestTricklingClientIsCut408AndItsConnectionFreed(t *testing.T) {
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			aborted := make(chan error, 1)
			b := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, err := io.Copy(io.Discard, r.Body)
				aborted <- err
			}))
			top := strings.TrimSuffix(p.top, "}\n")
			if top == "" {
				top = "downstream: {body_read_timeout: 300ms}\n"
			} else {
				top += ", body_read_timeout: 300ms}\n"
			}
			g := gatewayTo(t, 1, top, "    pool: {prewarm: 0}\n", b.addr)
			busy := func() int {
				n := 0
				for _, pv := range g.Origins().([]cluster.OriginView)[0].Loops[0].Pools {
					n += pv.Busy
				}
				return n
			}
			nc, err := net.Dial("tcp", g.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			// 20000 of 60000 bytes, then nothing: more than the exchange's
			// buffer, so the origin has begun reading the request.
			fmt.Fprintf(nc, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n%s", strings.Repeat("a", 20000))
			br := bufio.NewReader(nc)
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to the trickling client: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != 408 || resp.Header.Get("X-Corput-Error") != "request_body_timeout" {
				select {
				case err := <-aborted:
					t.Logf("the origin's read: %v", err)
				default:
				}
				t.Fatalf("%d %q, want 408 request_body_timeout", resp.StatusCode, resp.Header.Get("X-Corput-Error"))
			}
			select {
			case err := <-aborted:
				if err == nil {
					t.Fatal("the origin read the cut body to a clean end")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the origin never saw the request end")
			}
			if n := busy(); n != 0 {
				t.Fatalf("%d pool connections still busy after the cut, want 0", n)
			}
		})
	}
}

// TestRequestTimeoutStillCutsTheWholeExchange: a config that sets
// timeouts.request behaves as before (scaled: 500ms): a stream longer than
// it is cut, and a hung origin is answered 504 upstream_timeout at it.
func TestRequestTimeoutStillCutsTheWholeExchange(t *testing.T) {
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			b := sseAndHang(t, 20)
			g := gatewayTo(t, 1, p.top, "    timeouts: {connect: 250ms, request: 500ms}\n", b.addr)
			c := downstream(t, dsH1, nil)
			n, err := readEvents(t, c, "http://"+g.Addr()+"/sse")
			if n >= 20 || err == nil {
				t.Fatalf("a 2 s stream under request: 500ms got %d of 20 events, ended by %v; want it cut", n, err)
			}
			start := time.Now()
			resp, _ := get(t, c, "http://"+g.Addr()+"/hang")
			if resp.StatusCode != 504 || resp.Header.Get("X-Corput-Error") != "upstream_timeout" || time.Since(start) < 500*time.Millisecond {
				t.Fatalf("hung origin: %d %q after %v, want 504 upstream_timeout at 500ms", resp.StatusCode, resp.Header.Get("X-Corput-Error"), time.Since(start))
			}
		})
	}
}
