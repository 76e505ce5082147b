package gateway

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/route"
	"github.com/corput/corput/internal/workload"
)

// The split tests run a real gateway over two real versions of a service,
// v1 and v2, each a few origin servers on loopback that count what they
// receive: a route's split is checked by what the origins counted.

// quick is one fast class: the split tests measure shares, not latency.
var quick = []workload.Class{{Name: "x", Percent: 100, Latency: time.Millisecond}}

// startVersion starts n origin servers of version name, each answering with
// its ID (name-i) in testorigin.IDHeader.
func startVersion(t *testing.T, name string, n int, classes []workload.Class) []*testorigin.Server {
	t.Helper()
	var out []*testorigin.Server
	for i := range n {
		srv, err := testorigin.Start(testorigin.Options{ID: fmt.Sprintf("%s-%d", name, i), Classes: classes, HeaderTimeout: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		out = append(out, srv)
	}
	return out
}

// served is the requests srvs finished.
func served(srvs []*testorigin.Server) int64 {
	var n int64
	for _, s := range srvs {
		n += s.Stats().Total().Total()
	}
	return n
}

// splitText is a gateway of one route split w1/w2 between origins v1 and
// v2 (routeExtra: more keys of the route; originExtra: more lines of both
// origins), their pools pre-warmed to their cap so that load alone opens
// no connection.
func splitText(fast bool, w1, w2 int, routeExtra, originExtra string, v1, v2 []*testorigin.Server) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 2
downstream: {fast_path: %v}
routes:
  - {name: pay, path_prefix: /, split: [{origin: v1, weight: %d}, {origin: v2, weight: %d}]%s}
origins:
  - name: v1
    endpoints: %s
    pool: {max_connections: 8, prewarm: 8, acquire_timeout: 5s}
%s  - name: v2
    endpoints: %s
    pool: {max_connections: 8, prewarm: 8, acquire_timeout: 5s}
%s`, fast, w1, w2, routeExtra, endpointList(serverAddrs(v1)...), originExtra, endpointList(serverAddrs(v2)...), originExtra)
}

// fire sends n GETs of path(i) from workers keep-alive clients, and
// returns how many were not answered 200.
func fire(t *testing.T, addr string, n, workers int, path func(i int) string) int64 {
	t.Helper()
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		c, closeIdle := client()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer closeIdle()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				resp, err := c.Get("http://" + addr + path(int(i)))
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return failed.Load()
}

// TestSplitSharesAtTheOrigins: a route split 95/5, 20,000 requests on
// the fast path and 10,000 on net/http's, from 16 keep-alive clients: the
// origins of each version counted within ±0.5 percentage points of its
// weight on the fast path (±0.75 on net/http's, for its smaller count),
// and corput_route_requests_total{route="pay"} counted what they did.
// With CORPUT_LONG=1, 100,000 requests on each path, ±0.5 on both.
func TestSplitSharesAtTheOrigins(t *testing.T) {
	for _, path := range []struct {
		name string
		fast bool
		n    int
		tol  float64 // percentage points: 3.2 and 3.4 standard deviations
	}{{"fast path", true, 20_000, 0.5}, {"net/http", false, 10_000, 0.75}} {
		fast, n := path.fast, path.n
		if os.Getenv("CORPUT_LONG") != "" {
			n, path.tol = 100_000, 0.5 // the count, on both paths
		}
		t.Run(path.name, func(t *testing.T) {
			v1, v2 := startVersion(t, "v1", 2, quick), startVersion(t, "v2", 2, quick)
			g := startGateway(t, splitText(fast, 95, 5, "", "", v1, v2), nil, Options{Seed: 42})
			if failed := fire(t, g.Addr(), n, 16, func(int) string { return "/x" }); failed != 0 {
				t.Fatalf("%d requests failed", failed)
			}
			fams := scrapeFamilies(t, g)
			for _, v := range []struct {
				name   string
				srvs   []*testorigin.Server
				weight float64
			}{{"v1", v1, 95}, {"v2", v2, 5}} {
				got := served(v.srvs)
				share := 100 * float64(got) / float64(n)
				t.Logf("%s: the origins served %d of %d = %.3f%% (weight %.0f%%)", v.name, got, n, share, v.weight)
				if math.Abs(share-v.weight) > path.tol {
					t.Errorf("%s: %.3f%% of the requests, want %.0f%% ± %.2f", v.name, share, v.weight, path.tol)
				}
				if m := fams.sum("corput_route_requests_total", "route", "pay", "origin", v.name); int64(m) != got {
					t.Errorf("corput_route_requests_total{route=pay,origin=%s} = %v, the origins served %d", v.name, m, got)
				}
			}
		})
	}
}

// TestSplitStickyByHeader: with split_hash_on "header X-User", on both
// serving paths, every request of a user reaches one version (the origin
// named in the answer), and the users spread over both.
func TestSplitStickyByHeader(t *testing.T) {
	v1, v2 := startVersion(t, "v1", 2, quick), startVersion(t, "v2", 2, quick)
	var gws []*Gateway
	for _, fast := range []bool{true, false} {
		gws = append(gws, startGateway(t, splitText(fast, 75, 25, `, split_hash_on: "header X-User"`, "", v1, v2), nil, Options{}))
	}
	c, closeIdle := client()
	defer closeIdle()
	const users, repeats = 300, 6
	at := map[string]map[string]bool{} // user → versions reached
	for i := range users * repeats {
		u := fmt.Sprintf("user-%d", i%users)
		req, _ := http.NewRequest("GET", "http://"+gws[i%2].Addr()+"/x", nil)
		req.Header.Set("X-User", u)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		id := resp.Header.Get(testorigin.IDHeader)
		if resp.StatusCode != 200 || id == "" {
			t.Fatalf("status %d from %q", resp.StatusCode, id)
		}
		if at[u] == nil {
			at[u] = map[string]bool{}
		}
		at[u][strings.SplitN(id, "-", 2)[0]] = true
	}
	on := map[string]int{}
	for u, vs := range at {
		if len(vs) != 1 {
			t.Errorf("%s reached %v; want one version", u, vs)
		}
		for v := range vs {
			on[v]++
		}
	}
	t.Logf("%d users × %d requests over both serving paths: %d users on v1, %d on v2, none on two", users, repeats, on["v1"], on["v2"])
	if on["v1"] == 0 || on["v2"] == 0 {
		t.Errorf("users by version %v; want both", on)
	}
}

// TestSplitReloadUnderLoad: from 95/5 to 75/25 by a reload under a
// keep-alive load: no request fails, v1's endpoints accept no new
// connection (the reload touched no pool), and after it v2 serves about a
// quarter.
func TestSplitReloadUnderLoad(t *testing.T) {
	v1, v2 := startVersion(t, "v1", 3, quick), startVersion(t, "v2", 2, quick)
	g := startGateway(t, splitText(true, 95, 5, "", "", v1, v2), nil, Options{})
	l := startKeepAliveLoad(t, 12, 0, nil, func(w, i int) string { return "http://" + g.Addr() + "/x" })
	time.Sleep(500 * time.Millisecond)
	acc1, acc2 := accepted(v1), accepted(v2)
	reloadText(t, g, splitText(true, 75, 25, "", "", v1, v2))
	s1, s2 := served(v1), served(v2)
	time.Sleep(time.Second)
	d1, d2 := served(v1)-s1, served(v2)-s2
	l.halt()
	share := float64(d2) / float64(d1+d2)
	t.Logf("reload 95/5 → 75/25 under load: %d ok, %d failed; v1 accepted %d new connections, v2 %d; after it v2 served %d of %d (%.3f)",
		l.ok.Load(), l.failed.Load(), accepted(v1)-acc1, accepted(v2)-acc2, d2, d1+d2, share)
	if f := l.failed.Load(); f != 0 {
		t.Errorf("%d requests failed: %v", f, l.errs)
	}
	if d := accepted(v1) - acc1; d != 0 {
		t.Errorf("v1's endpoints accepted %d new connections across the reload; want 0", d)
	}
	if share < 0.2 || share > 0.3 {
		t.Errorf("after the reload v2 served %.3f of the requests; want about 0.25", share)
	}
}

// TestSplitRetryStaysInTarget: v2's first endpoint refuses connections,
// so a request sent to v2 that tries it is retried; the retry goes to
// v2's other endpoint, never to v1: v1's origins served exactly what the
// split sent to v1, and every request is answered 200.
func TestSplitRetryStaysInTarget(t *testing.T) {
	v1, v2 := startVersion(t, "v1", 1, quick), startVersion(t, "v2", 1, quick)
	dead := deadAddr(t)
	text := strings.Replace(splitText(true, 50, 50, ", retry: {attempts: 2, on: [connect-failure]}",
		"    balancer: {policy: round_robin}\n    slow_start: {window: 0s}\n", v1, v2),
		endpointList(serverAddrs(v2)...), endpointList(dead, v2[0].Addr()), 1)
	g := startGateway(t, strings.ReplaceAll(text, "prewarm: 8", "prewarm: 0"), nil, Options{})
	const n = 400
	if failed := fire(t, g.Addr(), n, 4, func(int) string { return "/x" }); failed != 0 {
		t.Fatalf("%d requests failed", failed)
	}
	fams := scrapeFamilies(t, g)
	routed1 := int64(fams.sum("corput_route_requests_total", "route", "pay", "origin", "v1"))
	routed2 := int64(fams.sum("corput_route_requests_total", "route", "pay", "origin", "v2"))
	retries := fams.sum("corput_upstream_retries_total", "origin", "v2")
	t.Logf("routed v1 %d, v2 %d; served by v1 %d, v2 %d; v2's retries %v", routed1, routed2, served(v1), served(v2), retries)
	if served(v1) != routed1 || served(v2) != routed2 {
		t.Errorf("v1 served %d of the %d routed to it, v2 %d of %d: a retry left its target", served(v1), routed1, served(v2), routed2)
	}
	if retries == 0 {
		t.Errorf("no retry on v2: the test did not exercise one")
	}
}

// TestSplitRampUnderSkewedLoad: v2 joins a split at weight 0, then a
// reload raises it to 25 (75/25) while the skewed 70/30 workload runs
// (its latencies scaled down 10×: 70 % at 1.5 ms, 30 % at 14 ms). The
// gateway's clock is injected: after the reload it steps 5 s at a time
// over v2's slow_start.window (60 s), and at each step the origins count
// v2's share of 2,000 requests: it follows 25 % × elapsed/window within
// 4 standard deviations of the draw plus half a point, and v2's endpoints' peak in flight (service + waiting, the
// cold_join scenario's measure) stays within 10 during the first 30 s.
func TestSplitRampUnderSkewedLoad(t *testing.T) {
	mix := workload.Default()
	for i := range mix.Classes {
		mix.Classes[i].Latency /= 10
	}
	v1, v2 := startVersion(t, "v1", 3, mix.Classes), startVersion(t, "v2", 2, mix.Classes)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	slow := "    slow_start: {window: 60s}\n"
	g := startGateway(t, splitText(true, 100, 0, "", slow, v1, v2), nil, Options{Clock: clk, Seed: 7})
	reloadText(t, g, splitText(true, 75, 25, "", slow, v1, v2))
	src := rng.New(3)
	var mu sync.Mutex
	path := func(int) string {
		mu.Lock()
		defer mu.Unlock()
		return "/" + mix.Pick(src.Float64()).Name
	}
	const per, workers = 2000, 16
	peak := int64(0)
	t.Logf("%-5s %-9s %-9s %s", "t", "v2 share", "expected", "v2 peak in flight per endpoint")
	for step := 1; step <= 12; step++ {
		clk.Advance(5 * time.Second)
		since := make([]int64, len(v2))
		for i, s := range v2 {
			since[i] = int64(s.Stats().UptimeSeconds)
		}
		s1, s2 := served(v1), served(v2)
		if failed := fire(t, g.Addr(), per, workers, path); failed != 0 {
			t.Fatalf("at %ds: %d requests failed", 5*step, failed)
		}
		d1, d2 := served(v1)-s1, served(v2)-s2
		share := float64(d2) / float64(d1+d2)
		want := 0.25 * min(float64(step*5)/60, 1)
		var peaks []int64
		for i, s := range v2 {
			p := int64(0)
			for _, sec := range s.Stats().Seconds {
				if sec.T >= since[i] {
					p = max(p, sec.MaxInFlight)
				}
			}
			peaks = append(peaks, p)
			if step <= 6 {
				peak = max(peak, p)
			}
		}
		t.Logf("%-5s %-9.4f %-9.4f %v", fmt.Sprintf("%ds", 5*step), share, want, peaks)
		// 4 standard deviations of a draw of per requests, plus half a
		// point: a ramp that is not followed is off by far more.
		tol := 4*math.Sqrt(want*(1-want)/per) + 0.005
		if math.Abs(share-want) > tol {
			t.Errorf("at %ds after the reload v2 served %.4f of the requests; want %.4f ± %.4f", 5*step, share, want, tol)
		}
	}
	if peak > 10 {
		t.Errorf("v2's endpoints had up to %d requests in flight in the first 30 s; want ≤ 10", peak)
	}
}

// TestSplitRampAcrossReloads: which reloads start a ramp, on an injected
// clock: a weight rising from 0 ramps from the reload's instant; a reload
// that keeps it lets the ramp go on from where it was; a weight rising
// from above 0 does not ramp, nor does a route that was not in force.
func TestSplitRampAcrossReloads(t *testing.T) {
	v1, v2 := startVersion(t, "v1", 1, quick), startVersion(t, "v2", 1, quick)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	slow := "    slow_start: {window: 60s}\n"
	g := startGateway(t, splitText(true, 100, 0, "", slow, v1, v2), nil, Options{Clock: clk})
	reload := func(w1, w2 int, routeExtra string) {
		t.Helper()
		text := splitText(true, w1, w2, routeExtra, slow, v1, v2)
		if routeExtra == "renamed" {
			text = strings.Replace(splitText(true, w1, w2, "", slow, v1, v2), "name: pay,", "name: pay2,", 1)
		}
		reloadText(t, g, text)
	}
	ramp := func(route string) (time.Time, time.Duration) {
		tg := g.st().splits[route].Targets()[1]
		return tg.RampFrom, tg.RampWindow
	}
	if _, w := ramp("pay"); w != 0 {
		t.Fatalf("at start v2 ramps over %v; want no ramp", w)
	}
	clk.Advance(time.Second)
	reload(75, 25, "")
	if from, w := ramp("pay"); !from.Equal(t0.Add(time.Second)) || w != time.Minute {
		t.Fatalf("0 → 25: ramp from %v over %v; want from the reload (t0+1s) over 60s", from, w)
	}
	clk.Advance(10 * time.Second)
	reload(75, 25, ", split_hash_on: source_ip")
	if from, w := ramp("pay"); !from.Equal(t0.Add(time.Second)) || w != time.Minute {
		t.Fatalf("a reload keeping 25 mid-ramp: ramp from %v over %v; want the first one's (t0+1s)", from, w)
	}
	if got := g.st().splits["pay"].Share(1, t0.Add(31*time.Second)); math.Abs(got-0.125) > 1e-9 {
		t.Fatalf("v2's share half-way = %v; want 0.125", got)
	}
	clk.Advance(time.Minute)
	reload(50, 50, "")
	if _, w := ramp("pay"); w != 0 {
		t.Fatalf("25 → 50 after the ramp: ramps over %v; want no ramp", w)
	}
	reload(50, 50, "renamed")
	if _, w := ramp("pay2"); w != 0 {
		t.Fatalf("a route not in force before ramps over %v; want no ramp", w)
	}
}

// TestSplitPerTryTimeout: a split route's own retry block gives its
// per-try timeout to every target when it writes one; when it leaves it to
// the targets' origins and theirs differ, each target's origin's applies
// (the route overrides nothing).
func TestSplitPerTryTimeout(t *testing.T) {
	for _, c := range []struct {
		retry string
		want  time.Duration
	}{{"{attempts: 2}", 0}, {"{attempts: 2, per_try_timeout: 500ms}", 500 * time.Millisecond}} {
		text := `
routes:
  - {path_prefix: /, split: [{origin: v1, weight: 1}, {origin: v2, weight: 1}], retry: ` + c.retry + `}
origins:
  - {name: v1, endpoints: [{address: "127.0.0.1:1"}], retry: {per_try_timeout: 1s}}
  - {name: v2, endpoints: [{address: "127.0.0.1:2"}], retry: {per_try_timeout: 2s}}
`
		cfg, err := config.Parse([]byte(text), "test.yaml")
		if err != nil {
			t.Fatal(err)
		}
		st := newState(cfg, nil, nil, nil, routing{clk: clock.Real()})
		rt := st.table.Router.Lookup(&route.Request{Method: "GET", Host: "x", Path: "/"})
		if rt == nil || rt.Split == nil || rt.Timeouts.PerTry != c.want {
			t.Errorf("retry %s: route %+v; want a split with per-try %v", c.retry, rt, c.want)
		}
	}
}
