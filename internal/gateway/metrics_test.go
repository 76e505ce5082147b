package gateway

// The metrics and admin contract (docs/contract.md) scraped over real HTTP
// from a gateway that served real traffic.

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/forward"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/upstream"
	"github.com/corput/corput/internal/waitfor"
)

// contractMetrics is docs/contract.md: every metric with its type and labels.
var contractMetrics = []struct {
	name   string
	typ    dto.MetricType
	labels []string
}{
	{"corput_upstream_connections_created_total", dto.MetricType_COUNTER, []string{"origin", "loop", "protocol"}},
	{"corput_upstream_connections_closed_total", dto.MetricType_COUNTER, []string{"origin", "reason"}},
	{"corput_upstream_connections_open", dto.MetricType_GAUGE, []string{"origin", "loop", "protocol"}},
	{"corput_pool_utilization", dto.MetricType_GAUGE, []string{"origin", "loop"}},
	{"corput_pool_acquire_wait_seconds", dto.MetricType_HISTOGRAM, []string{"origin"}},
	{"corput_upstream_requests_active", dto.MetricType_GAUGE, []string{"origin", "endpoint"}},
	{"corput_upstream_request_duration_seconds", dto.MetricType_HISTOGRAM, []string{"origin", "code_class"}},
	{"corput_outlier_ejections_total", dto.MetricType_COUNTER, []string{"origin", "reason"}},
	{"corput_outlier_ejected", dto.MetricType_GAUGE, []string{"origin"}},
	{"corput_panic_mode", dto.MetricType_GAUGE, []string{"origin"}},
	{"corput_zone_requests_total", dto.MetricType_COUNTER, []string{"origin", "locality"}},
	{"corput_requests_shed_total", dto.MetricType_COUNTER, []string{"origin", "reason"}},
	{"corput_subset_size", dto.MetricType_GAUGE, []string{"origin", "loop"}},
	{"corput_membership_changes_total", dto.MetricType_COUNTER, []string{"origin"}},
	{"corput_downstream_requests_total", dto.MetricType_COUNTER, []string{"code_class"}},
}

// adminHTTP keeps no idle connections, so tests leave no client goroutines.
var adminHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// families is one parsed /metrics page.
type families map[string]*dto.MetricFamily

func scrapeFamilies(t testing.TB, g *Gateway) families {
	t.Helper()
	return scrapeAdmin(t, g.AdminAddr())
}

// scrapeAdmin parses the /metrics page of the admin listener at addr.
func scrapeAdmin(t testing.TB, addr string) families {
	t.Helper()
	resp, err := adminHTTP.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// value returns the sample of family name whose labels include want
// (counter, gauge, or a histogram's count); ok is false without one.
func (s families) value(name string, want ...string) (float64, bool) {
	f := s[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if hasLabels(m, want) {
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// sum adds the samples of name whose labels include want.
func (s families) sum(name string, want ...string) float64 {
	total := 0.0
	for _, m := range s[name].GetMetric() {
		if hasLabels(m, want) {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

// hasLabels reports whether m has every name=value pair of kv.
func hasLabels(m *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// monotonic lists every counter and histogram series of the corput_
// families, keyed by name and labels, with its value(s).
func (s families) monotonic() map[string]float64 {
	out := map[string]float64{}
	for name, f := range s {
		if !strings.HasPrefix(name, "corput_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			key := name + "{" + strings.Join(ls, ",") + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out[key+"_count"] = float64(h.GetSampleCount())
				out[key+"_sum"] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					out[fmt.Sprintf("%s_bucket{le=%g}", key, b.GetUpperBound())] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

// checkContract fails unless every metric of docs/contract.md is present with
// its type and exactly its labels.
func checkContract(t testing.TB, s families) {
	t.Helper()
	for _, c := range contractMetrics {
		f := s[c.name]
		if f == nil || len(f.GetMetric()) == 0 {
			t.Errorf("%s missing from /metrics", c.name)
			continue
		}
		if f.GetType() != c.typ {
			t.Errorf("%s is a %v, want %v", c.name, f.GetType(), c.typ)
		}
		want := slices.Sorted(slices.Values(c.labels))
		for _, m := range f.GetMetric() {
			var got []string
			for _, l := range m.GetLabel() {
				got = append(got, l.GetName())
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s has labels %v, want %v", c.name, got, want)
				break
			}
		}
	}
	var bounds []float64
	for _, b := range s["corput_upstream_request_duration_seconds"].GetMetric()[0].GetHistogram().GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	want := []float64{0.002, 0.005, 0.010, 0.015, 0.020, 0.030, 0.050, 0.100, 0.250, 0.500, math.Inf(1)}
	if !slices.Equal(bounds, want) {
		t.Errorf("request duration buckets %v, want %v", bounds, want)
	}
}

// TestMetricsContractAfterTraffic drives served, failed, ejected and shed
// requests and a membership change through a gateway, then checks a real
// scrape against docs/contract.md and that no counter ever went down.
func TestMetricsContractAfterTraffic(t *testing.T) {
	good := startOrigins(t, 4, testorigin.Options{Classes: fastClass})
	bad := startOrigins(t, 1, testorigin.Options{ErrorRate: 1, Classes: fastClass})
	app := append(slices.Clone(good), bad...)
	arrived, release := make(chan struct{}, 8), make(chan struct{})
	var once sync.Once
	tight := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	text := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 2
routes: [{path_prefix: /, origin: app}, {path_prefix: /tight/, origin: tight}]
origins:
  - name: app
    endpoints: %s
    balancer: {policy: round_robin}
    slow_start: {window: 0s}
  - name: tight
    endpoints: [{address: %q}]
    pool: {max_connections: 1, max_pending: 1, acquire_timeout: 100ms, prewarm: 1}
`, endpointList(serverAddrs(app)...), tight.addr)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := startGateway(t, text, nil, Options{Clock: clk})

	// Served and failed: the failing endpoint is ejected at its third 500.
	for l := 0; l < 2; l++ {
		c := downstream(t, dsH1, nil)
		for i := 0; i < 20; i++ {
			get(t, c, "http://"+g.Addr()+"/x")
		}
	}
	// Shed: two requests hold tight's only connection of each loop (a loop
	// per request, round robin), one waits for one of them (max_pending 1),
	// three more are refused pending_full, then the waiter's
	// acquire_timeout passes on the fake clock.
	h2 := downstream(t, dsH2C, nil)
	answers := make(chan *http.Response, 5)
	send := func() {
		go func() {
			resp, err := h2.Get("http://" + g.Addr() + "/tight/hold")
			if err != nil {
				t.Error(err)
				answers <- &http.Response{}
				return
			}
			resp.Body.Close()
			answers <- resp
		}()
	}
	send()
	<-arrived
	send()
	<-arrived
	send()
	waitfor.Until(t, "a request waiting in tight's pool", func() bool { return poolPending(g, "tight") == 1 })
	for i := 0; i < 3; i++ {
		send()
		resp := <-answers
		if resp.StatusCode != 503 || resp.Header.Get("X-Corput-Error") != forward.PendingFull.String() || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("over max_pending: %d %v, want 503 pending_full with Retry-After: 1", resp.StatusCode, resp.Header)
		}
	}
	clk.Advance(100 * time.Millisecond)
	if resp := <-answers; resp.StatusCode != 503 || resp.Header.Get("X-Corput-Error") != forward.AcquireTimeout.String() {
		t.Fatalf("waiter after acquire_timeout: %d %q", resp.StatusCode, resp.Header.Get("X-Corput-Error"))
	}

	first := scrapeFamilies(t, g) // while tight's holders are in flight
	checkContract(t, first)
	for _, lv := range g.Origins().([]cluster.OriginView)[1].Loops {
		if lv.Pools[tight.addr].Busy != 1 {
			t.Errorf("tight's pool of loop %d: %d busy, want its one connection held", lv.Loop, lv.Pools[tight.addr].Busy)
		}
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"corput_outlier_ejections_total", []string{"origin", "app", "reason", "consecutive_5xx"}, 1},
		{"corput_outlier_ejected", []string{"origin", "app"}, 1},
		{"corput_panic_mode", []string{"origin", "app"}, 0},
		{"corput_requests_shed_total", []string{"origin", "tight", "reason", "pending_full"}, 3},
		{"corput_requests_shed_total", []string{"origin", "tight", "reason", "acquire_timeout"}, 1},
		{"corput_requests_shed_total", []string{"origin", "app", "reason", "no_healthy"}, 0},
		{"corput_upstream_requests_active", []string{"origin", "tight", "endpoint", tight.addr}, 2},
		{"corput_upstream_requests_active", []string{"origin", "app", "endpoint", bad[0].Addr()}, 0},
		{"corput_subset_size", []string{"origin", "app", "loop", "1"}, 5},
		{"corput_subset_placement", []string{"origin", "app", "mode", "local"}, 1},
		{"corput_subset_placement", []string{"origin", "app", "mode", "shared"}, 0},
		{"corput_pool_utilization", []string{"origin", "tight", "loop", "0"}, 1},
		{"corput_pool_utilization", []string{"origin", "tight", "loop", "1"}, 1},
		{"corput_upstream_connections_open", []string{"origin", "tight", "loop", "0", "protocol", "h1"}, 1},
		{"corput_upstream_connections_open", []string{"origin", "tight", "loop", "1", "protocol", "h1"}, 1},
		{"corput_loop_requests_total", []string{"origin", "app", "loop", "0"}, 20},
		{"corput_loop_requests_total", []string{"origin", "app", "loop", "1"}, 20},
		{"corput_downstream_requests_total", []string{"code_class", "2xx"}, 37},
		{"corput_downstream_requests_total", []string{"code_class", "5xx"}, 3 + 4},
		{"corput_upstream_request_duration_seconds", []string{"origin", "app", "code_class", "5xx"}, 3},
		{"corput_upstream_request_duration_seconds", []string{"origin", "app", "code_class", "2xx"}, 37},
		{"corput_membership_changes_total", []string{"origin", "app"}, 0},
	} {
		if got, ok := first.value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// Pre-warm opened one connection per (endpoint, loop) and traffic reused them.
	if got := first.sum("corput_upstream_connections_created_total", "origin", "app"); got != 10 {
		t.Errorf("app connections created %v, want 10 (5 endpoints × 2 loops, pre-warmed and reused)", got)
	}

	// More traffic and a membership change (the failing endpoint leaves):
	// nothing counted may go down.
	once.Do(func() { close(release) })
	for range 2 {
		if resp := <-answers; resp.StatusCode != 200 {
			t.Fatalf("holder: %d", resp.StatusCode)
		}
	}
	if err := g.Apply("app", serverMembers(good)); err != nil {
		t.Fatal(err)
	}
	c := downstream(t, dsH1, nil)
	for i := 0; i < 10; i++ {
		get(t, c, "http://"+g.Addr()+"/x")
	}
	second := scrapeFamilies(t, g)
	checkContract(t, second)
	before, after := first.monotonic(), second.monotonic()
	for key, v := range before {
		w, ok := after[key]
		if !ok {
			t.Errorf("series %s disappeared", key)
		} else if w < v {
			t.Errorf("counter %s went down: %v → %v", key, v, w)
		}
	}
	if got, _ := second.value("corput_membership_changes_total", "origin", "app"); got != 1 {
		t.Errorf("membership changes %v, want 1", got)
	}
	if got, _ := second.value("corput_subset_size", "origin", "app", "loop", "0"); got != 4 {
		t.Errorf("subset size after the change %v, want 4", got)
	}
	if got := second.sum("corput_upstream_connections_closed_total", "origin", "app"); got < 2 {
		t.Errorf("app connections closed %v after its endpoint left, want ≥ 2 (one per loop)", got)
	}
	if _, ok := second.value("corput_upstream_requests_active", "origin", "app", "endpoint", bad[0].Addr()); ok {
		t.Errorf("active-requests series of a departed endpoint still exported")
	}
}

func serverMembers(os []*testorigin.Server) []balance.Member {
	out := make([]balance.Member, len(os))
	for i, o := range os {
		out[i] = balance.Member{Address: o.Addr(), Weight: 1}
	}
	return out
}

// poolPending is the number of requests waiting in the named origin's pools.
func poolPending(g *Gateway, name string) int {
	n := 0
	for _, ov := range g.Origins().([]cluster.OriginView) {
		if ov.Name != name {
			continue
		}
		for _, lv := range ov.Loops {
			for _, pv := range lv.Pools {
				n += pv.Pending
			}
		}
	}
	return n
}

// TestAdminJSONShapes reads /admin/origins and /admin/subsets as a script
// would, by their JSON keys (docs/contract.md).
func TestAdminJSONShapes(t *testing.T) {
	os := startOrigins(t, 4, testorigin.Options{Classes: fastClass})
	g := startGateway(t, cfgText(2, "    subset: {size: 2}\n"), os, Options{})
	get(t, downstream(t, dsH1, nil), "http://"+g.Addr()+"/x")

	var origins []map[string]any
	adminJSON(t, g, "/admin/origins", 200, &origins)
	if len(origins) != 1 {
		t.Fatalf("%d origins", len(origins))
	}
	o := origins[0]
	requireKeys(t, "origin", o, "name", "policy", "subset_algorithm", "subsets", "placement", "panic", "ejected", "membership_changes", "endpoints", "loops")
	if o["name"] != "app" || o["subsets"] != 2.0 || o["placement"] != "local" {
		t.Errorf("origin name %v, subsets %v, placement %v (a static origin is placed locally)", o["name"], o["subsets"], o["placement"])
	}
	eps := o["endpoints"].([]any)
	if len(eps) != 4 {
		t.Fatalf("%d endpoints", len(eps))
	}
	for _, e := range eps {
		requireKeys(t, "endpoint", e.(map[string]any), "address", "zone", "weight", "effective_weight", "active", "pending", "ewma_latency_ns", "ejected", "times_ejected")
	}
	loops := o["loops"].([]any)
	if len(loops) != 2 {
		t.Fatalf("%d loops", len(loops))
	}
	for _, l := range loops {
		lv := l.(map[string]any)
		requireKeys(t, "loop", lv, "loop", "subset", "candidates", "pools")
		subset := lv["subset"].([]any)
		pools := lv["pools"].(map[string]any)
		if len(subset) != 2 || len(pools) != 2 {
			t.Fatalf("loop %v: subset %v, pools for %d endpoints", lv["loop"], subset, len(pools))
		}
		for _, a := range subset {
			p, ok := pools[a.(string)].(map[string]any)
			if !ok {
				t.Fatalf("loop %v: no pool for subset member %v", lv["loop"], a)
			}
			requireKeys(t, "pool", p, "protocol", "open", "idle", "busy", "capacity", "pending", "utilization")
			if p["open"].(float64) < 1 {
				t.Errorf("pool %v on loop %v: %v open after pre-warm", a, lv["loop"], p["open"])
			}
		}
	}

	var ring map[string]any
	adminJSON(t, g, "/admin/subsets?origin=app", 200, &ring)
	requireKeys(t, "subsets", ring, "origin", "algorithm", "subsets", "placement", "fleet", "gateway", "endpoints")
	users := map[string]int{}
	for _, e := range ring["endpoints"].([]any) {
		ev := e.(map[string]any)
		requireKeys(t, "ring endpoint", ev, "address", "index", "position", "subset", "users")
		if p := ev["position"].(float64); p < 0 || p >= 1 {
			t.Errorf("ring position %v outside [0, 1)", p)
		}
		for _, u := range ev["users"].([]any) {
			requireKeys(t, "user", u.(map[string]any), "gateway", "loop")
			users[ev["address"].(string)]++
		}
	}
	if len(users) != 4 {
		t.Errorf("ring users cover %d endpoints, want 4", len(users))
	}
	var e map[string]string
	adminJSON(t, g, "/admin/subsets?origin=nope", 404, &e)
	adminJSON(t, g, "/admin/subsets", 400, &e)
	if e["error"] == "" {
		t.Error("400 without an error message")
	}
}

func adminJSON(t testing.TB, g *Gateway, path string, code int, v any) {
	t.Helper()
	resp, err := adminHTTP.Get("http://" + g.AdminAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != code || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s: %d %s, want %d JSON", path, resp.StatusCode, resp.Header.Get("Content-Type"), code)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func requireKeys(t testing.TB, what string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s JSON lacks %q: %v", what, k, m)
		}
	}
}

// gateDialer holds every dial until its gate opens.
type gateDialer struct {
	inner pool.Dialer
	gate  chan struct{}
}

func (d gateDialer) Dial(addr string, done func(pool.Conn, error)) {
	go func() {
		<-d.gate
		d.inner.Dial(addr, done)
	}()
}

// TestReadyzOnlyAfterPrewarm holds the pre-warm dials: /healthz answers at
// once, /readyz only once every (endpoint, loop) pool has its connections.
func TestReadyzOnlyAfterPrewarm(t *testing.T) {
	os := startOrigins(t, 2, testorigin.Options{Classes: fastClass})
	inner, err := upstream.NewDialer(upstream.Options{Protocol: upstream.H1})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	text := withEndpoints(cfgText(2, "    pool: {prewarm: 2}\n"), serverAddrs(os)...)
	g := newGateway(t, text, Options{Dialers: map[string]pool.Dialer{"app": gateDialer{inner, gate}}})
	if err := g.Start(); err != nil {
		close(gate)
		t.Fatal(err)
	}
	opened := false
	defer func() {
		if !opened {
			close(gate)
		}
	}()
	admin := "http://" + g.AdminAddr()
	if code := statusOf(t, admin+"/healthz"); code != 200 {
		t.Fatalf("/healthz %d before pre-warm, want 200 (the process is up)", code)
	}
	if code := statusOf(t, admin+"/readyz"); code != 503 {
		t.Fatalf("/readyz %d with pre-warm dials held, want 503", code)
	}
	close(gate)
	opened = true
	waitfor.Until(t, "/readyz to turn 200", func() bool { return statusOf(t, admin+"/readyz") == 200 })
	// Ready means every pool holds its pre-warmed connections: the
	// gateway's own count, read once ready, says so. The origins' count
	// lags it (an accept loop runs after the handshake the dial saw).
	if got := scrapeFamilies(t, g).sum("corput_upstream_connections_created_total"); got != 8 {
		t.Errorf("%v connections created when /readyz turned 200, want 8 (2 origins × 2 loops × prewarm 2)", got)
	}
	for _, o := range os {
		waitfor.Until(t, "the origin to accept the pre-warmed connections", func() bool { return o.Stats().Connections.Accepted >= 4 })
		if got := o.Stats().Connections.Accepted; got != 4 {
			t.Errorf("origin %s accepted %d connections, want 4 (2 loops × prewarm 2)", o.Addr(), got)
		}
	}
}

func statusOf(t testing.TB, url string) int {
	t.Helper()
	resp, err := adminHTTP.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
