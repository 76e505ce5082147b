package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/waitfor"
)

// stickyYAML is gateway instance of a fleet of 2, with 4 loops, over an
// origin of the given sticky policy and key.
func stickyYAML(instance int, fast bool, policy, hashOn string, addrs []string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 4
fleet: {instance: %d, size: 2}
downstream: {fast_path: %v, trusted_proxies: [127.0.0.0/8]}
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    protocol: h1
    balancer: {policy: %s, hash_on: %q}
    endpoints: %s
`, instance, fast, policy, hashOn, endpointList(addrs...))
}

// namedOrigins starts n origins on loopback that answer with their name
// (o0, o1, ...) and returns their addresses.
func namedOrigins(t *testing.T, n int) []string {
	var addrs []string
	for i := range n {
		id := fmt.Sprintf("o%d", i)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, id) }))
		t.Cleanup(srv.Close)
		addrs = append(addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	return addrs
}

// keyedRequest is a GET carrying key k the way hash_on reads it.
func keyedRequest(t *testing.T, url, hashOn, k string) *http.Request {
	req, err := http.NewRequest("GET", url+"/pay", nil)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case strings.HasPrefix(hashOn, "header "):
		req.Header.Set(strings.TrimPrefix(hashOn, "header "), k)
	case strings.HasPrefix(hashOn, "cookie "):
		req.Header.Set("Cookie", "theme=dark; "+strings.TrimPrefix(hashOn, "cookie ")+"="+k)
	default: // source_ip, from a trusted proxy (127.0.0.0/8)
		req.Header.Set("X-Forwarded-For", "198.51.100.1, "+k)
	}
	return req
}

// TestStickyAffinityAcrossGatewaysAndLoops (affinity: one key, one
// endpoint, from every loop and gateway; docs/balancing.md): 300
// keys, each sent 6 times through 2 real gateways of a fleet (one on the
// fast path, one on net/http's) of 4 loops each, over real origins on
// loopback: every request of a key reaches the same origin, the keys
// spread over every origin, every loop of both gateways served requests,
// and every loop holds the whole origin.
func TestStickyAffinityAcrossGatewaysAndLoops(t *testing.T) {
	const nOrigins, keys, repeats = 6, 300, 6
	var mu sync.Mutex
	seen := map[string]map[string]bool{} // key → origins that served it
	addrs := namedOrigins(t, nOrigins)
	for _, tc := range []struct{ policy, hashOn string }{
		{"maglev", "header X-Merchant"},
		{"ring_hash", "cookie session"},
		{"maglev", "source_ip"},
	} {
		t.Run(tc.policy+" "+tc.hashOn, func(t *testing.T) {
			clear(seen)
			var gws []*Gateway
			for i, fast := range []bool{true, false} {
				g := newGateway(t, stickyYAML(i, fast, tc.policy, tc.hashOn, addrs), Options{})
				if err := g.Start(); err != nil {
					t.Fatal(err)
				}
				waitReady(t, g)
				gws = append(gws, g)
			}
			c := &http.Client{Timeout: 10 * time.Second}
			defer c.CloseIdleConnections()
			r := rng.New(21)
			for i := range keys * repeats {
				k := fmt.Sprintf("203.0.113.%d", i%keys) // an address, for source_ip; any string otherwise
				g := gws[r.IntN(len(gws))]
				resp, err := c.Do(keyedRequest(t, "http://"+g.Addr(), tc.hashOn, k))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				mu.Lock()
				if seen[k] == nil {
					seen[k] = map[string]bool{}
				}
				seen[k][string(body)] = true
				mu.Unlock()
			}
			used := map[string]bool{}
			for k, at := range seen {
				if len(at) != 1 {
					t.Errorf("key %s reached %d origins: %v", k, len(at), at)
				}
				for o := range at {
					used[o] = true
				}
			}
			if len(seen) != keys || len(used) != nOrigins {
				t.Errorf("%d keys seen over %d origins, want %d over %d", len(seen), len(used), keys, nOrigins)
			}
			for gi, g := range gws {
				v := g.Origins().([]cluster.OriginView)[0]
				for _, l := range v.Loops {
					if l.Requests == 0 || len(l.Subset) != nOrigins {
						t.Errorf("gateway %d loop %d: %d requests, subset of %d; want some, and the whole origin (%d)", gi, l.Loop, l.Requests, len(l.Subset), nOrigins)
					}
				}
			}
		})
	}
}

// TestStickyBoundedLoadCountedByOrigins (bounded load, docs/balancing.md): half of
// the requests carry one hot key, the rest keys of their own; every
// request is held at its origin until the test releases it, up to 24 at a
// time. Each origin counts its requests in flight as one arrives, and the
// test checks, at every arrival, in flight at that origin (this one
// included) ≤ ⌈c·(m+1)/n⌉ with c = 1.25, n = 4 and m + 1 = the requests
// held at all origins, this one included.
//
// What makes the origins' count the gateway's: a request is sent only once
// the previous one has arrived, and after a release only once the
// gateway's own count (/admin/origins' active) has come down to the
// requests still held. At each pick, then, the gateway's in flight per
// endpoint and in total are exactly what the origins hold, and its rule —
// take the endpoint while its in flight < ⌈c·(m+1)/n⌉ — is the inequality
// above. Both serving paths; the hot key must overflow its endpoint, so a
// bound that is not applied fails the test.
func TestStickyBoundedLoadCountedByOrigins(t *testing.T) {
	const n, hold, requests = 4, 24, 160
	type arrival struct {
		origin          int
		atOrigin, total int
		release         chan struct{}
	}
	var mu sync.Mutex
	counts := make([]int, n)
	total := 0
	arrivals := make(chan arrival, requests)
	var addrs []string
	for i := range n {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			counts[i]++
			total++
			a := arrival{origin: i, atOrigin: counts[i], total: total, release: make(chan struct{})}
			mu.Unlock()
			arrivals <- a
			<-a.release
			mu.Lock()
			counts[i]--
			total--
			mu.Unlock()
			io.WriteString(w, "ok")
		}))
		t.Cleanup(srv.Close)
		addrs = append(addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast_path=%v", fast), func(t *testing.T) {
			g := newGateway(t, strings.Replace(stickyYAML(0, fast, "maglev", "header X-Merchant", addrs), "size: 2", "size: 1", 1), Options{})
			if err := g.Start(); err != nil {
				t.Fatal(err)
			}
			waitReady(t, g)
			url := "http://" + g.Addr()
			c := &http.Client{Timeout: 10 * time.Second}
			defer c.CloseIdleConnections()
			type held struct {
				release chan struct{}
				done    chan error
			}
			var inFlight []held
			t.Cleanup(func() { // a failed check leaves requests held: let them go
				for _, h := range inFlight {
					close(h.release)
					<-h.done
				}
			})
			inGateway := func() int64 {
				var s int64
				for _, e := range g.Origins().([]cluster.OriginView)[0].Endpoints {
					s += e.Active
				}
				return s
			}
			r := rng.New(7)
			hotAt := map[int]int{}
			bound := func(total int) int { return (5*total + 4*n - 1) / (4 * n) } // ⌈1.25·total/n⌉
			atBound := 0
			for i := range requests {
				k := "merchant-hot"
				if i%2 == 1 {
					k = fmt.Sprintf("merchant-%d", r.Uint64())
				}
				done := make(chan error, 1)
				go func() {
					resp, err := c.Do(keyedRequest(t, url, "header X-Merchant", k))
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							err = fmt.Errorf("status %d", resp.StatusCode)
						}
					}
					done <- err
				}()
				var a arrival
				select {
				case a = <-arrivals:
				case <-time.After(5 * time.Second):
					t.Fatalf("request %d never reached an origin", i)
				}
				inFlight = append(inFlight, held{a.release, done})
				if a.total != len(inFlight) {
					t.Fatalf("request %d: origins hold %d, the test sent %d", i, a.total, len(inFlight))
				}
				if b := bound(a.total); a.atOrigin > b {
					t.Fatalf("request %d (key %s): origin %d holds %d with %d in flight in all; bound ⌈1.25·%d/%d⌉ = %d",
						i, k, a.origin, a.atOrigin, a.total, a.total, n, b)
				} else if a.atOrigin == b {
					atBound++
				}
				if k == "merchant-hot" {
					hotAt[a.origin]++
				}
				if len(inFlight) == hold {
					j := r.IntN(len(inFlight))
					close(inFlight[j].release)
					if err := <-inFlight[j].done; err != nil {
						t.Fatal(err)
					}
					inFlight = append(inFlight[:j], inFlight[j+1:]...)
					waitfor.Until(t, "the gateway's count to match the origins'", func() bool { return inGateway() == int64(len(inFlight)) })
				}
			}
			for _, h := range inFlight {
				close(h.release)
				if err := <-h.done; err != nil {
					t.Error(err)
				}
			}
			inFlight = nil
			t.Logf("hot key's requests per origin: %v; arrivals at the bound: %d of %d", hotAt, atBound, requests)
			if len(hotAt) < 2 || atBound == 0 {
				t.Errorf("the hot key stayed on %d origin(s), %d arrivals at the bound: the bound was never exercised", len(hotAt), atBound)
			}
		})
	}
}

// TestStickySetsItsCookie: with hash_on "cookie NAME" and balancer.cookie,
// on both serving paths over real sockets, a request without the cookie
// is answered with Set-Cookie (the configured path and Max-Age) and is
// placed by the new value: it and every later request carrying the cookie
// reach one origin; a request with the cookie gets none.
func TestStickySetsItsCookie(t *testing.T) {
	addrs := namedOrigins(t, 5)
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast_path=%v", fast), func(t *testing.T) {
			yaml := strings.Replace(stickyYAML(0, fast, "maglev", "cookie sid", addrs), "size: 2", "size: 1", 1)
			yaml = strings.Replace(yaml, `hash_on: "cookie sid"}`, `hash_on: "cookie sid", cookie: {ttl: 1h, path: /pay}}`, 1)
			g := newGateway(t, yaml, Options{})
			if err := g.Start(); err != nil {
				t.Fatal(err)
			}
			waitReady(t, g)
			c := &http.Client{Timeout: 10 * time.Second}
			defer c.CloseIdleConnections()
			do := func(cookie string) (origin, set string) {
				req, _ := http.NewRequest("GET", "http://"+g.Addr()+"/pay", nil)
				if cookie != "" {
					req.Header.Set("Cookie", cookie)
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return string(body), resp.Header.Get("Set-Cookie")
			}
			origins := map[string]bool{}
			for range 30 {
				first, set := do("")
				value, attrs, ok := strings.Cut(set, "; ")
				if !ok || !strings.HasPrefix(value, "sid=") || len(value) != len("sid=")+16 || attrs != "Path=/pay; Max-Age=3600; HttpOnly" {
					t.Fatalf("Set-Cookie %q; want sid=<16 hex digits>; Path=/pay; Max-Age=3600; HttpOnly", set)
				}
				origins[first] = true
				for range 3 {
					got, again := do("a=b; " + value)
					if got != first || again != "" {
						t.Fatalf("cookie %s: first request at %s, a later one at %s (Set-Cookie %q, want none)", value, first, got, again)
					}
				}
			}
			if len(origins) < 3 {
				t.Errorf("30 new cookies reached %d origins; want them spread", len(origins))
			}
		})
	}
}
