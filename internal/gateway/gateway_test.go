package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/testbin"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/waitfor"
	"github.com/corput/corput/internal/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testbin.M(m)) }

// startOrigins starts n real origins on loopback.
func startOrigins(t testing.TB, n int, opt testorigin.Options) []*testorigin.Server {
	t.Helper()
	var out []*testorigin.Server
	for i := 0; i < n; i++ {
		o := opt
		o.ID = fmt.Sprintf("o%d", i)
		if o.Classes == nil {
			o.Classes = []workload.Class{{Name: "slow", Percent: 100, Latency: 50 * time.Millisecond}}
		}
		srv, err := testorigin.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		out = append(out, srv)
	}
	return out
}

// startGateway builds a gateway from yaml, with ENDPOINTS replaced by the
// addresses of origins, starts it on loopback ports and waits until it is
// ready.
func startGateway(t testing.TB, yaml string, origins []*testorigin.Server, opts Options) *Gateway {
	t.Helper()
	g := newGateway(t, withEndpoints(yaml, serverAddrs(origins)...), opts)
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, g)
	return g
}

// reloadText parses text (as test.yaml) and reloads g with it; either
// failing fails the test.
func reloadText(t testing.TB, g *Gateway, text string) {
	t.Helper()
	cfg, err := config.Parse([]byte(text), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
}

// newGateway builds, without starting, a gateway from config text, with a
// silent logger unless opts has one; it is closed when the test ends.
func newGateway(t testing.TB, text string, opts Options) *Gateway {
	t.Helper()
	cfg, err := config.Parse([]byte(text), "test.yaml")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, text)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// withEndpoints puts endpointList(addrs) where text says ENDPOINTS.
func withEndpoints(text string, addrs ...string) string {
	return strings.ReplaceAll(text, "ENDPOINTS", endpointList(addrs...))
}

// endpointList is addrs as a YAML flow list of endpoints.
func endpointList(addrs ...string) string {
	eps := make([]string, len(addrs))
	for i, a := range addrs {
		eps[i] = fmt.Sprintf("{address: %q}", a)
	}
	return "[" + strings.Join(eps, ", ") + "]"
}

// serverAddrs is the addresses of srvs, in their order.
func serverAddrs(srvs []*testorigin.Server) []string {
	out := make([]string, len(srvs))
	for i, s := range srvs {
		out[i] = s.Addr()
	}
	return out
}

// waitReady waits until g reports ready (config applied, pools
// pre-warmed).
func waitReady(t testing.TB, g *Gateway) {
	t.Helper()
	waitfor.Until(t, "the gateway to be ready", g.Ready)
}

// client is one downstream connection (so one loop) to the gateway.
func client() (*http.Client, func()) {
	tr := &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, tr.CloseIdleConnections
}

func get(t testing.TB, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

const base = `
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: LOOPS
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    endpoints: ENDPOINTS
`

func cfgText(loops int, extra string) string {
	return strings.ReplaceAll(base, "LOOPS", fmt.Sprint(loops)) + extra
}

func TestReuseOneConnectionForSequentialRequests(t *testing.T) {
	os := startOrigins(t, 1, testorigin.Options{})
	g := startGateway(t, cfgText(1, "    pool: {prewarm: 1}\n"), os, Options{})
	c, closeIdle := client()
	defer closeIdle()
	for i := 0; i < 2; i++ {
		resp, _ := get(t, c, "http://"+g.Addr()+"/light")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if got := os[0].Stats().Connections.Accepted; got != 1 {
		t.Fatalf("origin accepted %d connections for two sequential requests, want 1", got)
	}
}

func TestBoundedRejectSheds503AndCapsConnections(t *testing.T) {
	os := startOrigins(t, 1, testorigin.Options{})
	g := startGateway(t, cfgText(1, "    pool: {max_connections: 2, over_cap: reject, prewarm: 0}\n"), os, Options{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	retryAfter := 0
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	defer c.Transport.(*http.Transport).CloseIdleConnections()
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get("http://" + g.Addr() + "/slow")
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			codes[resp.StatusCode]++
			if resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "1" && resp.Header.Get("X-Corput-Error") != "" {
				retryAfter++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[503] == 0 || codes[200] == 0 || codes[200]+codes[503] != 20 {
		t.Fatalf("codes %v: want both 200s and 503s", codes)
	}
	if retryAfter != codes[503] {
		t.Fatalf("%d of %d 503s carried Retry-After: 1 and X-Corput-Error", retryAfter, codes[503])
	}
	// One loop, max_connections 2: the origin never saw more than 2.
	if got := os[0].Stats().Connections.Accepted; got > 2 {
		t.Fatalf("origin accepted %d connections, cap is 2", got)
	}
}

func TestOutlierEjectedAfterThird500UntilEjectionTimePasses(t *testing.T) {
	good := startOrigins(t, 4, testorigin.Options{Classes: []workload.Class{{Name: "x", Percent: 100, Latency: time.Millisecond}}})
	bad := startOrigins(t, 1, testorigin.Options{ErrorRate: 1, Classes: []workload.Class{{Name: "x", Percent: 100, Latency: time.Millisecond}}})
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := startGateway(t, cfgText(1, "    balancer: {policy: round_robin}\n    slow_start: {window: 0s}\n"), append(good, bad...), Options{Clock: clk})
	c, closeIdle := client()
	defer closeIdle()
	fails := 0
	for i := 0; i < 60; i++ {
		resp, _ := get(t, c, "http://"+g.Addr()+"/x")
		if resp.StatusCode == 500 {
			fails++
		}
	}
	if got := bad[0].Stats().Total().Total(); got != 3 {
		t.Fatalf("failing endpoint got %d requests, want exactly 3 (ejected at the third 500)", got)
	}
	if fails != 3 {
		t.Fatalf("clients saw %d 500s, want 3", fails)
	}
	clk.Advance(29 * time.Second)
	for i := 0; i < 20; i++ {
		get(t, c, "http://"+g.Addr()+"/x")
	}
	if got := bad[0].Stats().Total().Total(); got != 3 {
		t.Fatalf("ejected endpoint got requests before its 30s ejection ended: %d", got)
	}
	clk.Advance(2 * time.Second)
	for i := 0; i < 20; i++ {
		get(t, c, "http://"+g.Addr()+"/x")
	}
	if got := bad[0].Stats().Total().Total(); got <= 3 {
		t.Fatalf("endpoint not back in rotation after its ejection time: %d requests", got)
	}
}

// A request is placed on a loop of its own and goes only to that loop's
// subset, through that loop's pools: with four disjoint subsets and
// requests from one connection, what each loop's subset received is exactly
// what was placed on that loop (corput_loop_requests_total), the loops take
// equal shares, and the gateway as a whole reaches every endpoint.
func TestRequestsStayOnTheirLoopAndSpreadOverAll(t *testing.T) {
	os := startOrigins(t, 64, testorigin.Options{Classes: []workload.Class{{Name: "x", Percent: 100, Latency: time.Millisecond}}})
	g := startGateway(t, cfgText(4, "    subset: {size: 16}\n    balancer: {policy: round_robin}\n    pool: {prewarm: 0}\n"), os, Options{})
	view := g.Origins().([]cluster.OriginView)[0]
	if len(view.Loops) != 4 {
		t.Fatalf("%d loops", len(view.Loops))
	}
	byID := map[string]*testorigin.Server{}
	for _, o := range os {
		byID[o.Options().ID] = o
	}
	loopOf := map[string]int{}
	for _, lv := range view.Loops {
		if len(lv.Subset) != 16 {
			t.Fatalf("loop %d subset has %d endpoints, want 16", lv.Loop, len(lv.Subset))
		}
		for _, a := range lv.Subset {
			if l, dup := loopOf[a]; dup {
				t.Fatalf("%s in the subsets of loops %d and %d: want them disjoint", a, l, lv.Loop)
			}
			loopOf[a] = lv.Loop
		}
	}
	c, closeIdle := client() // one downstream connection
	defer closeIdle()
	const n = 192
	reached := map[string]bool{}
	for range n {
		resp, _ := get(t, c, "http://"+g.Addr()+"/x")
		reached[byID[resp.Header.Get(testorigin.IDHeader)].Addr()] = true
	}
	var perLoop [4]int64
	for _, o := range os {
		perLoop[loopOf[o.Addr()]] += o.Stats().Total().Total()
	}
	fams := scrapeFamilies(t, g)
	for l := range 4 {
		placed, _ := fams.value("corput_loop_requests_total", "origin", "app", "loop", fmt.Sprint(l))
		if float64(perLoop[l]) != placed {
			t.Errorf("loop %d: its subset served %d requests, %v were placed on it", l, perLoop[l], placed)
		}
		if placed != n/4 {
			t.Errorf("loop %d took %v of %d requests from one connection, want an even %d", l, placed, n, n/4)
		}
	}
	if len(reached) != 64 {
		t.Fatalf("one connection reached %d endpoints, want all 64", len(reached))
	}
}

// TestABusyLoopTakesNoMoreRequestsUntilTheOtherCatchesUp: while one
// request is in flight on a loop, every new one goes to the other loop
// (the round robin alone would send it every second one): Place takes the
// less busy of two loops, so no loop's pools grow to the whole gateway's
// concurrency.
func TestABusyLoopTakesNoMoreRequestsUntilTheOtherCatchesUp(t *testing.T) {
	os := startOrigins(t, 1, testorigin.Options{Classes: []workload.Class{{Name: "slow", Percent: 100, Latency: 2 * time.Second}}})
	g := startGateway(t, cfgText(2, "    pool: {prewarm: 0}\n"), os, Options{})
	slow := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + g.Addr() + "/slow")
		if err == nil {
			resp.Body.Close()
		}
		slow <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); os[0].Stats().Concurrency.Current < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow request never reached the origin")
		}
	}
	c, closeIdle := client()
	defer closeIdle()
	const n = 20
	for range n {
		if resp, _ := get(t, c, "http://"+g.Addr()+"/"); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	fams := scrapeFamilies(t, g)
	var placed [2]float64
	for l := range 2 {
		placed[l], _ = fams.value("corput_loop_requests_total", "origin", "app", "loop", fmt.Sprint(l))
	}
	if !(placed[0] == 1 && placed[1] == n || placed[0] == n && placed[1] == 1) {
		t.Errorf("loops took %v requests: want 1 (the slow one) and all %d others on the other loop", placed, n)
	}
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}

func TestMalformedRequestGets400AndGatewayKeepsServing(t *testing.T) {
	os := startOrigins(t, 1, testorigin.Options{})
	g := startGateway(t, cfgText(1, ""), os, Options{})
	for _, raw := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
		"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nNo colon in this header line\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", g.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(conn, raw)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("%q: status %d, want 400", raw, resp.StatusCode)
		}
	}
	if got := os[0].Stats().Total().Total(); got != 0 {
		t.Fatalf("origin saw %d requests from malformed input", got)
	}
	c, closeIdle := client()
	defer closeIdle()
	if resp, _ := get(t, c, "http://"+g.Addr()+"/light"); resp.StatusCode != 200 {
		t.Fatalf("after malformed input: %d", resp.StatusCode)
	}
}

func TestDeadOriginAnswers502WithReason(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	cfg := withEndpoints(cfgText(1, "    pool: {prewarm: 0}\n"), dead)
	g := startGateway(t, cfg, nil, Options{})
	c, closeIdle := client()
	defer closeIdle()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+g.Addr()+"/", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 && resp.StatusCode != 503 {
		t.Fatalf("status %d, want 502/503", resp.StatusCode)
	}
	if resp.Header.Get("X-Corput-Error") == "" {
		t.Fatal("no X-Corput-Error reason")
	}
}

func TestNoUserAgentIsForwardedAsNone(t *testing.T) {
	seen := make(chan []string, 2)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Values("User-Agent")
	}))
	defer up.Close()
	cfg := withEndpoints(cfgText(1, ""), up.Listener.Addr().String())
	g := startGateway(t, cfg, nil, Options{})
	for _, ua := range []string{"", "curl/8"} {
		conn, err := net.Dial("tcp", g.Addr())
		if err != nil {
			t.Fatal(err)
		}
		req := "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
		if ua != "" {
			req += "User-Agent: " + ua + "\r\n"
		}
		io.WriteString(conn, req+"\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		conn.Close()
		got := <-seen
		if ua == "" && len(got) != 0 {
			t.Fatalf("a request without User-Agent reached the origin with %q", got)
		}
		if ua != "" && (len(got) != 1 || got[0] != ua) {
			t.Fatalf("User-Agent %q arrived as %q", ua, got)
		}
	}
}

// A response body that breaks after its headers aborts the client's
// response; the upstream stream must still go back to the pool, or a pool of
// one connection would refuse everything after the first broken body.
func TestBrokenResponseBodyReleasesItsStream(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !broken.Load() {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(200)
		io.WriteString(w, "only ten b")
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer up.Close()
	cfg := strings.ReplaceAll(cfgText(1, "    pool: {max_connections: 1, over_cap: reject, prewarm: 0}\n"), "ENDPOINTS",
		fmt.Sprintf("[{address: %q}]", up.Listener.Addr().String()))
	g := startGateway(t, cfg, nil, Options{})
	for i := 0; i < 3; i++ {
		c, closeIdle := client()
		resp, err := c.Get("http://" + g.Addr() + "/")
		status, reason := 0, ""
		if err == nil {
			status, reason = resp.StatusCode, resp.Header.Get("X-Corput-Error")
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		closeIdle()
		if err == nil {
			t.Fatalf("request %d: a complete response (%d %s), want the origin's cut-short body; a 503 over_cap means the only stream leaked", i, status, reason)
		}
	}
	broken.Store(false)
	c, closeIdle := client()
	defer closeIdle()
	resp, body := get(t, c, "http://"+g.Addr()+"/")
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("after broken bodies: %d %q (%s): the pool's only stream leaked", resp.StatusCode, body, resp.Header.Get("X-Corput-Error"))
	}
}
