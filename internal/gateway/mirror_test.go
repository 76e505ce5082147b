package gateway

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/waitfor"
)

// mirrorConfig is route pay to origin app (at primary), mirrored to origin
// shadow (at shadow) with the mirror keys given, the shadow origin with
// the extra keys given.
func mirrorConfig(top, primary, shadow, mirrorKeys, shadowKeys string) string {
	return top + `listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
routes: [{name: pay, path_prefix: /, origin: app, mirror: {origin: shadow` + mirrorKeys + `}}]
origins:
  - name: app
    endpoints: ` + endpointList(primary) + `
  - name: shadow
    endpoints: ` + endpointList(shadow) + "\n" + shadowKeys
}

// mirrorCount reads the route's mirror counters from the gateway's
// registry: mirrored, and dropped by reason.
func mirrorCount(g *Gateway, reason string) float64 {
	if reason == "" {
		return testutil.ToFloat64(g.metrics.RouteMirrored.WithLabelValues("pay", "shadow"))
	}
	return testutil.ToFloat64(g.metrics.RouteMirrorDropped.WithLabelValues("pay", "shadow", reason))
}

// sampled is every sampled request counted so far: mirrored or dropped.
func sampled(g *Gateway) float64 {
	return mirrorCount(g, "") + mirrorCount(g, "max_in_flight") + mirrorCount(g, "body") + mirrorCount(g, "failed")
}

// send sends a request of method with X-Req id and body (nil: none) and
// checks the primary's 200 and its own body.
func send(t *testing.T, c *http.Client, addr, method, id string, body []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, "http://"+addr+"/pay?x="+id, rd)
	req.Header.Set("X-Req", id)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != "primary" {
		t.Fatalf("%s %s: %d %q; want the primary's 200", method, id, resp.StatusCode, got)
	}
}

func primaryHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "primary")
	})
}

// TestMirrorReachesTheShadow: with mirror at 100 %, every request, GET or
// POST with a body, reaches the shadow once with its head and body whole;
// the client gets the primary's answer; each is counted mirrored. A body
// above max_body_bytes is not mirrored and is counted (reason body). Both
// serving paths.
func TestMirrorReachesTheShadow(t *testing.T) {
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			var got arrivals
			var targets sync.Map
			primary := startBackend(t, testorigin.H1, primaryHandler())
			shadow := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				targets.Store(r.Header.Get("X-Req"), r.Method+" "+r.URL.RequestURI()+" "+r.Host)
				got.add(r)
				io.WriteString(w, strings.Repeat("shadow ", 5000)) // read and dropped
			}))
			g := startGateway(t, mirrorConfig(p.top, primary.addr, shadow.addr, ", max_body_bytes: 4096", ""), nil, Options{Seed: 1})
			c := downstream(t, dsH1, nil)
			small, large := payload(3000), payload(5000)
			const n = 30
			for i := range n {
				id := fmt.Sprint(i)
				switch i % 3 {
				case 0:
					send(t, c, g.Addr(), "GET", id, nil)
				case 1:
					send(t, c, g.Addr(), "POST", id, small)
				case 2:
					send(t, c, g.Addr(), "POST", id, large) // above max_body_bytes
				}
			}
			waitfor.Until(t, "every sampled request counted", func() bool { return sampled(g) == n })
			if m, b := mirrorCount(g, ""), mirrorCount(g, "body"); m != 2*n/3 || b != n/3 {
				t.Fatalf("mirrored %v, dropped (body) %v; want %d and %d", m, b, 2*n/3, n/3)
			}
			for i := range n {
				id := fmt.Sprint(i)
				a := got.of(id)
				switch i % 3 {
				case 0, 1:
					want := sha256.Sum256(nil)
					if i%3 == 1 {
						want = sha256.Sum256(small)
					}
					if len(a) != 1 || a[0].body != want {
						t.Fatalf("request %s reached the shadow %d times (%+v); want once, body whole", id, len(a), a)
					}
					m := "GET"
					if i%3 == 1 {
						m = "POST"
					}
					if v, _ := targets.Load(id); v != m+" /pay?x="+id+" "+g.Addr() {
						t.Fatalf("the shadow got %q for request %s", v, id)
					}
				case 2:
					if len(a) != 0 {
						t.Fatalf("request %s, its body above max_body_bytes, reached the shadow", id)
					}
				}
			}
		})
	}
}

// TestMirrorOverTheCapIsDropped: with the shadow holding its requests and
// max_in_flight 2, the primaries are all answered, 2 mirrors are in
// flight and the rest are dropped and counted (max_in_flight), never
// queued: once the shadow answers, it has seen 2. Both serving paths.
func TestMirrorOverTheCapIsDropped(t *testing.T) {
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			release := make(chan struct{})
			var reached atomic.Int64
			primary := startBackend(t, testorigin.H1, primaryHandler())
			shadow := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached.Add(1)
				<-release
			}))
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			t.Cleanup(free) // before the shadow closes, should the test fail
			g := startGateway(t, mirrorConfig(p.top, primary.addr, shadow.addr, ", max_in_flight: 2", ""), nil, Options{Seed: 1})
			c := downstream(t, dsH1, nil)
			const n = 10
			for i := range n {
				send(t, c, g.Addr(), "GET", fmt.Sprint(i), nil)
			}
			waitfor.Until(t, "the mirrors over the cap dropped", func() bool { return mirrorCount(g, "max_in_flight") == n-2 })
			waitfor.Until(t, "2 mirrors at the shadow", func() bool { return reached.Load() == 2 })
			free()
			waitfor.Until(t, "2 mirrored", func() bool { return mirrorCount(g, "") == 2 })
			if s := sampled(g); s != n {
				t.Fatalf("%v sampled requests counted; want %d", s, n)
			}
			send(t, c, g.Addr(), "GET", "after", nil) // a slot is free again
			waitfor.Until(t, "the next one mirrored", func() bool { return mirrorCount(g, "") == 3 })
		})
	}
}

// silentListener accepts connections and reads them, never answering: a
// shadow that swallows requests. It closes when the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	var mu sync.Mutex
	var conns []net.Conn
	closed := false
	ln := acceptEach(t, func(c net.Conn) {
		mu.Lock()
		if closed {
			mu.Unlock()
			return
		}
		conns = append(conns, c)
		mu.Unlock()
		io.Copy(io.Discard, c)
	})
	// Before acceptEach's cleanup (cleanups run last first): end every
	// read so that it can wait for them.
	t.Cleanup(func() {
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// TestMirrorToASilentShadowNeverFailsThePrimary: a shadow that never
// answers: every primary is answered 200, and each mirror ends at the
// shadow's own time limit (timeouts.response_header), counted failed.
// Both serving paths.
func TestMirrorToASilentShadowNeverFailsThePrimary(t *testing.T) {
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			primary := startBackend(t, testorigin.H1, primaryHandler())
			g := startGateway(t, mirrorConfig(p.top, primary.addr, silentListener(t), "",
				"    timeouts: {connect: 200ms, response_header: 300ms}\n    retry: {attempts: 0}\n"), nil, Options{Seed: 1})
			c := downstream(t, dsH1, nil)
			const n = 20
			for i := range n {
				if i%2 == 0 {
					send(t, c, g.Addr(), "GET", fmt.Sprint(i), nil)
				} else {
					send(t, c, g.Addr(), "POST", fmt.Sprint(i), payload(1000))
				}
			}
			waitfor.Until(t, "every mirror failed", func() bool { return mirrorCount(g, "failed") == n })
			if m := mirrorCount(g, ""); m != 0 {
				t.Fatalf("%v mirrored by a shadow that never answers", m)
			}
		})
	}
}

// TestShutdownCutsMirrorsInFlight: mirrors held by a silent shadow with a
// long time limit end when the gateway shuts down: Close returns at once,
// no mirror is left in flight, each counted failed (and goleak, in
// TestMain, finds no goroutine left).
func TestShutdownCutsMirrorsInFlight(t *testing.T) {
	primary := startBackend(t, testorigin.H1, primaryHandler())
	g := startGateway(t, mirrorConfig("", primary.addr, silentListener(t), "",
		"    timeouts: {response_header: 1h}\n"), nil, Options{Seed: 1})
	c := downstream(t, dsH1, nil)
	const n = 5
	for i := range n {
		send(t, c, g.Addr(), "GET", fmt.Sprint(i), nil)
	}
	waitfor.Until(t, "the mirrors in flight", func() bool { return g.shadows.InFlight() == n })
	start := time.Now()
	g.Close()
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("Close took %v: it waited for the shadow's time limit", d)
	}
	if in := g.shadows.InFlight(); in != 0 {
		t.Fatalf("%d mirrors in flight after Close", in)
	}
	if f := mirrorCount(g, "failed"); f != n {
		t.Fatalf("%v mirrors counted failed; want %d", f, n)
	}
}

// TestADeadShadowKeepsTheGatewayReady: a shadow origin nothing listens on
// (no route's origin) does not hold readiness back, while the primary
// origin still does; every primary is answered 200, every mirror counted
// failed.
func TestADeadShadowKeepsTheGatewayReady(t *testing.T) {
	primary := startBackend(t, testorigin.H1, primaryHandler())
	g := startGateway(t, mirrorConfig("", primary.addr, deadAddr(t), "", ""), nil, Options{Seed: 1})
	c := downstream(t, dsH1, nil)
	for i := range 5 {
		send(t, c, g.Addr(), "GET", fmt.Sprint(i), nil)
	}
	waitfor.Until(t, "every mirror failed", func() bool { return mirrorCount(g, "failed") == 5 })
	if !g.Ready() {
		t.Fatal("not ready")
	}
	dead := newGateway(t, mirrorConfig("", deadAddr(t), primary.addr, "", ""), Options{Seed: 1})
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the pools' first dials
	if dead.Ready() {
		t.Fatal("ready with its route's own origin dead: readiness skips more than shadows")
	}
}

// TestReloadKeepsTheMirrorCapAndShutdownEndsEveryMirror: mirrors held by
// a silent shadow stay counted against max_in_flight across a reload that
// keeps the route (the next sampled request is dropped, not mirrored); a
// reload that removes the mirror starts none; Close ends all of them,
// counted failed, and goleak (TestMain) finds no goroutine left.
func TestReloadKeepsTheMirrorCapAndShutdownEndsEveryMirror(t *testing.T) {
	primary := startBackend(t, testorigin.H1, primaryHandler())
	silent := silentListener(t)
	capped := mirrorConfig("", primary.addr, silent, ", max_in_flight: 3", "    timeouts: {response_header: 1h}\n")
	g := startGateway(t, capped, nil, Options{Seed: 1})
	c := downstream(t, dsH1, nil)
	for i := range 3 {
		send(t, c, g.Addr(), "GET", fmt.Sprint(i), nil)
	}
	waitfor.Until(t, "3 mirrors in flight", func() bool { return g.shadows.InFlight() == 3 })
	reload := func(text string) {
		reloadText(t, g, text)
	}
	reload(strings.Replace(capped, "path_prefix: /,", "path_prefix: /, priority: normal,", 1)) // the route kept, changed
	send(t, c, g.Addr(), "GET", "after-reload", nil)
	waitfor.Until(t, "the mirror over the cap dropped", func() bool { return mirrorCount(g, "max_in_flight") == 1 })
	reload(strings.Replace(capped, ", mirror: {origin: shadow, max_in_flight: 3}", "", 1))
	send(t, c, g.Addr(), "GET", "unmirrored", nil)
	if in := g.shadows.InFlight(); in != 3 {
		t.Fatalf("%d mirrors in flight after the mirror was removed; want the 3 of before", in)
	}
	g.Close()
	if in, f := g.shadows.InFlight(), mirrorCount(g, "failed"); in != 0 || f != 3 {
		t.Fatalf("after Close: %d in flight, %v failed; want 0 and 3", in, f)
	}
}
