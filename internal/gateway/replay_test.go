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
	"testing"

	"github.com/corput/corput/internal/cluster"
	testorigin "github.com/corput/corput/internal/origin"
)

// arrivals records what reached the origins, by the request's X-Req: each
// arrival's Idempotency-Key and its body's digest.
type arrivals struct {
	mu  sync.Mutex
	got map[string][]arrival
}

type arrival struct {
	key  string
	body [32]byte
	n    int
}

func (a *arrivals) add(r *http.Request) (nth int) {
	b, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.got == nil {
		a.got = map[string][]arrival{}
	}
	id := r.Header.Get("X-Req")
	a.got[id] = append(a.got[id], arrival{r.Header.Get("Idempotency-Key"), sha256.Sum256(b), len(b)})
	return len(a.got[id])
}

func (a *arrivals) of(id string) []arrival {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]arrival(nil), a.got[id]...)
}

// reset ends the exchange without a response: the origin read the
// request and its connection breaks (RST), as a pod killed mid-request.
func reset(w http.ResponseWriter) {
	c, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// replayConfig is an origin of the given endpoints (round robin, in order,
// never ejected) behind a route with extra retry keys.
func replayConfig(top, routeRetry, originRetry string, addrs ...string) string {
	return top + `listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
routes: [{path_prefix: /, origin: app` + routeRetry + `}]
origins:
  - name: app
    endpoints: ` + endpointList(addrs...) + "\n" + unsentKeys + originRetry
}

// post sends a POST of body with X-Req id (and key as Idempotency-Key
// unless empty), and returns the status and X-Corput-Error.
func post(t *testing.T, c *http.Client, addr, id, key string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+addr+"/pay", bytes.NewReader(body))
	req.Header.Set("X-Req", id)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Corput-Error")
}

func payload(n int) []byte { return bytes.Repeat([]byte("payments "), n/9+1)[:n] }

// TestPOSTWhoseDialIsRefusedIsServedElsewhere: a POST with a body whose
// first endpoint refuses the dial sent nothing: it goes to another
// endpoint and is answered 200, and the origins count exactly one arrival
// of it, with its body whole. Both serving paths.
func TestPOSTWhoseDialIsRefusedIsServedElsewhere(t *testing.T) {
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			var got arrivals
			live := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.add(r) }))
			dead := deadAddr(t)
			g := startGateway(t, replayConfig(p.top, "", "", dead, live.addr), nil, Options{Seed: 1})
			c := downstream(t, dsH1, nil)
			body := payload(10_000)
			for i := range 4 { // round robin: the dead endpoint comes first for half of them
				id := fmt.Sprint(i)
				if status, reason := post(t, c, g.Addr(), id, "", body); status != 200 {
					t.Fatalf("POST %s: %d %s; want 200 from the live endpoint", id, status, reason)
				}
				a := got.of(id)
				if len(a) != 1 || a[0].body != sha256.Sum256(body) {
					t.Fatalf("POST %s reached the origins %d times (%+v); want once, its body whole", id, len(a), a)
				}
			}
			if f := g.Origins().([]cluster.OriginView)[0].Loops[0].Pools[dead].Failures; f == 0 {
				t.Fatal("the dead endpoint was never dialled: the test proves nothing")
			}
			if v, _ := scrapeFamilies(t, g).value("corput_upstream_retries_total", "kind", "unsent"); v == 0 {
				t.Error("corput_upstream_retries_total{kind=unsent} did not count the retries")
			}
		})
	}
}

// TestSentPOSTIsReplayedOnlyWithAKey: every first arrival of a request is
// reset after the origin read it. A POST without the idempotency key gets
// 502 and reached the origins once; with the key, on a route that opts in,
// it gets 200 and reached them twice with the same key and body bytes. On
// a route that does not opt in, the key changes nothing. Both serving
// paths, both upstream protocols (an HTTP/2 origin resets the stream).
func TestSentPOSTIsReplayedOnlyWithAKey(t *testing.T) {
	for _, up := range []struct {
		name  string
		proto testorigin.Proto
		cfg   string
	}{{"h1", testorigin.H1, ""}, {"h2c", testorigin.H2C, "    protocol: h2c\n"}} {
		for _, p := range requestPaths {
			t.Run(up.name+"/"+p.name, func(t *testing.T) { sentPOSTReplayedOnlyWithAKey(t, p.name, p.top, up.proto, up.cfg) })
		}
	}
}

func sentPOSTReplayedOnlyWithAKey(t *testing.T, name, top string, proto testorigin.Proto, upCfg string) {
	id := name + "/" + string(proto)
	var got arrivals
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got.add(r) == 1 {
			if r.ProtoMajor == 2 {
				panic(http.ErrAbortHandler) // RST_STREAM after the request was read
			}
			reset(w)
		}
	})
	a, b := startBackend(t, proto, h), startBackend(t, proto, h)
	keyed := ", retry: {idempotency_header: Idempotency-Key}"
	for _, c := range []struct {
		name, route, key string
		status, arrivals int
	}{
		{"no key", keyed, "", 502, 1},
		{"key", keyed, "k-123", 200, 2},
		{"key, route does not opt in", "", "k-456", 502, 1},
	} {
		g := startGateway(t, replayConfig(top, c.route, upCfg, a.addr, b.addr), nil, Options{Seed: 1})
		body := payload(20_000)
		id := id + "/" + c.name
		status, reason := post(t, downstream(t, dsH1, nil), g.Addr(), id, c.key, body)
		arr := got.of(id)
		if status != c.status || len(arr) != c.arrivals {
			t.Fatalf("%s: %d %s after %d arrivals; want %d after %d", c.name, status, reason, len(arr), c.status, c.arrivals)
		}
		for i, x := range arr {
			if x.key != c.key || x.body != sha256.Sum256(body) {
				t.Errorf("%s: arrival %d carried key %q and %d body bytes (digest match %v); want %q and the same bytes",
					c.name, i+1, x.key, x.n, x.body == sha256.Sum256(body), c.key)
			}
		}
		g.Shutdown(t.Context())
	}
}

// TestBodyOverTheReplayBufferIsNotReplayed: a keyed POST whose body is
// over retry.replay_buffer is not replayed (502, one arrival), nor one
// whose body would take all replay buffers over
// limits.replay_buffers_bytes while another request holds its own; each is
// counted by its reason.
func TestBodyOverTheReplayBufferIsNotReplayed(t *testing.T) {
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			var got arrivals
			held, release := make(chan struct{}), make(chan struct{})
			var releaseOnce sync.Once
			free := func() { releaseOnce.Do(func() { close(release) }) }
			defer free() // a failed check must not leave the handler held
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := got.add(r)
				switch {
				case strings.HasPrefix(r.Header.Get("X-Req"), "hold"):
					close(held)
					<-release
				case n == 1:
					reset(w)
				}
			})
			a, b := startBackend(t, testorigin.H1, h), startBackend(t, testorigin.H1, h)
			cfg := replayConfig("limits: {replay_buffers_bytes: 20000}\n"+p.top, ", retry: {idempotency_header: Idempotency-Key, replay_buffer: 16384}", "    retry: {replay_buffer: 16384}\n", a.addr, b.addr)
			g := startGateway(t, cfg, nil, Options{Seed: 1})

			status, _ := post(t, downstream(t, dsH1, nil), g.Addr(), "big", "k-1", payload(20_000))
			if arr := got.of("big"); status != 502 || len(arr) != 1 {
				t.Fatalf("a body over replay_buffer: %d after %d arrivals; want 502 after 1", status, len(arr))
			}
			fams := scrapeFamilies(t, g)
			if v, _ := fams.value("corput_replay_buffer_overflows_total", "reason", "over_request"); v != 1 {
				t.Errorf("over_request counted %v; want 1", v)
			}

			done := make(chan int)
			go func() { // holds 16 KiB of the 20000 bytes until released
				s, _ := post(t, downstream(t, dsH1, nil), g.Addr(), "hold", "k-2", payload(16_000))
				done <- s
			}()
			<-held
			status, _ = post(t, downstream(t, dsH1, nil), g.Addr(), "second", "k-3", payload(16_000))
			if arr := got.of("second"); status != 502 || len(arr) != 1 {
				t.Fatalf("a body over the gateway-wide cap: %d after %d arrivals; want 502 after 1", status, len(arr))
			}
			if v, _ := scrapeFamilies(t, g).value("corput_replay_buffer_overflows_total", "reason", "over_gateway"); v != 1 {
				t.Errorf("over_gateway counted %v; want 1", v)
			}
			free()
			if s := <-done; s != 200 {
				t.Fatalf("the held request: %d", s)
			}
			if v, _ := scrapeFamilies(t, g).value("corput_replay_buffers_bytes"); v != 0 {
				t.Errorf("corput_replay_buffers_bytes %v after every request ended; want 0", v)
			}
		})
	}
}

// TestOrigins502And504AreRetried: under retry.on gateway-error, a GET
// whose first answer is an origin's 502 or 504 goes to the other endpoint
// and is answered 200 from there; the origins count two arrivals.
func TestOrigins502And504AreRetried(t *testing.T) {
	for _, status := range []int{502, 504} {
		for _, p := range requestPaths {
			t.Run(fmt.Sprint(status, "/", p.name), func(t *testing.T) {
				var got arrivals
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if got.add(r) == 1 {
						w.WriteHeader(status)
					}
				})
				a, b := startBackend(t, testorigin.H1, h), startBackend(t, testorigin.H1, h)
				g := startGateway(t, replayConfig(p.top, "", "    retry: {on: [connect-failure, gateway-error]}\n", a.addr, b.addr), nil, Options{Seed: 1})
				c := downstream(t, dsH1, nil)
				req, _ := http.NewRequest("GET", "http://"+g.Addr()+"/", nil)
				req.Header.Set("X-Req", "g")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 || len(got.of("g")) != 2 {
					t.Fatalf("%d after %d arrivals; want 200 after 2", resp.StatusCode, len(got.of("g")))
				}
				if v, _ := scrapeFamilies(t, g).value("corput_upstream_retries_total", "kind", "replay"); v != 1 {
					t.Errorf("corput_upstream_retries_total{kind=replay} = %v; want 1", v)
				}
			})
		}
	}
}
