package results

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMedianAndGoals(t *testing.T) {
	rounds := []Result{{Proxy: Corput, RPS: 30}, {Proxy: Corput, RPS: 10}, {Proxy: Corput, RPS: 20}}
	m := Median(rounds, func(r Result) float64 { return -r.RPS })
	if m.RPS != 20 || len(m.Rounds) != 3 {
		t.Fatalf("median = %v with %d rounds; want 20 with 3", m.RPS, len(m.Rounds))
	}
	// Two rounds: the worse one, whichever way "worse" points.
	if m := Median(rounds[:2], func(r Result) float64 { return -r.RPS }); m.RPS != 10 {
		t.Errorf("median of two by throughput = %v, want the lower, 10", m.RPS)
	}
	two := []Result{{P99MS: 5}, {P99MS: 9}}
	if m := Median(two, func(r Result) float64 { return r.P99MS }); m.P99MS != 9 {
		t.Errorf("median of two by p99 = %v, want the higher, 9", m.P99MS)
	}
	r := &Results{}
	r.Scenario(ScRaw, "").Results = []Result{{Proxy: Corput, RPS: 21000}, {Proxy: Nginx, RPS: 20000}}
	r.Scenario(ScSkewed, "").Results = []Result{{Proxy: Corput, P99MS: 200}, {Proxy: Nginx, P99MS: 701}, {Proxy: Caddy, P99MS: 650}}
	r.Scenario(ScOverhead, "").Results = []Result{{Proxy: Corput, AddedP99MS: 1.7, P99MS: 2, RateRPS: 10000}}
	gs := r.Judge()
	if len(gs) != 6 {
		t.Fatalf("%d goals, want 6: %+v", len(gs), gs)
	}
	if !gs[0].Met || gs[0].Value != 1.05 {
		t.Errorf("raw goal = %+v; want met at 1.05", gs[0])
	}
	if gs[1].Met || gs[1].Value != Round3(200.0/650) {
		t.Errorf("skewed goal = %+v; want not met against the best peer (650 ms)", gs[1])
	}
	if gs[2].Met || gs[3].Met || gs[4].Met {
		t.Errorf("skewed p99, heavy-class p99 and success goals = %+v; want none met at p99 200 ms, no heavy figure, success 0", gs[2:5])
	}
	if gs[5].Met {
		t.Errorf("overhead goal = %+v; want not met at 1.7 ms", gs[5])
	}

	r.Scenario(ScSkewed, "").Results = []Result{{Proxy: Corput, P99MS: 149, HeavyP99MS: 170, SuccessRatio: 1}}
	r.Scenario(ScColdJoin, "").Results = []Result{{Proxy: Corput, P99MS: 170,
		Join: &JoinResult{WindowS: 75, LateFromS: 60, MaxInFlight: 10, LateShare: 0.17, LateVsFair: 0.85}}}
	met := map[string]bool{}
	for _, g := range r.Judge() {
		met[g.Name] = g.Met
	}
	for _, name := range []string{"skewed p99", "skewed heavy-class p99", "skewed success", "cold_join p99",
		"cold_join: the cold origin's peak in service + waiting, first 30 s", "cold_join: the cold origin's share from 60 s"} {
		if m, ok := met[name]; !ok || !m {
			t.Errorf("goal %q: met %v (present %v); want met", name, m, ok)
		}
	}
}

// The goals judge corput against nginx's connections, the best peer's
// TLS figures and 0 handshakes in the many_endpoints window.
func TestConnectionGoals(t *testing.T) {
	r := &Results{Scenarios: []Scenario{
		{Name: ScConnections, Results: []Result{
			{Proxy: Corput, Conns: map[string]int64{"total": 150}}, {Proxy: Nginx, Conns: map[string]int64{"total": 180}}}},
		{Name: ScTLSOrigins, Results: []Result{
			{Proxy: Corput, Upstream: &UpstreamTLS{HandshakesFull: 16, Connections: 16, P99MS: 100, CPUusPerRequest: 90}},
			{Proxy: Nginx, Upstream: &UpstreamTLS{HandshakesFull: 30, Connections: 90, P99MS: 200, CPUusPerRequest: 30}},
			{Proxy: Caddy, Upstream: &UpstreamTLS{HandshakesFull: 16, Connections: 16, P99MS: 900, CPUusPerRequest: 140}},
			{Proxy: HAProxy, Upstream: &UpstreamTLS{HandshakesFull: 30, Connections: 32, P99MS: 400, CPUusPerRequest: 50}}}},
		{Name: ScManyEndpoints, Results: []Result{{Proxy: Corput, Upstream: &UpstreamTLS{WindowHandshakes: 1, WindowS: 60, HandshakesPerS: 0.017}}}},
	}}
	met := map[string]bool{}
	for _, g := range r.connectionGoals() {
		met[g.Name] = g.Met
	}
	for name, want := range map[string]bool{
		"upstream connections, raw + skewed + cold join": true,
		"tls_origins: full handshakes":                   true,
		"tls_origins: upstream connections":              true,
		"tls_origins: skewed p99":                        true,
		// nginx's 30 µs does not count: it speaks HTTP/1.1 to the origins.
		"tls_origins: CPU µs per request on h2 origins": false,
		"many_endpoints: handshakes/s after warm-up":    false,
	} {
		if got, ok := met[name]; !ok || got != want {
			t.Errorf("goal %q: met %v (present %v), want %v", name, got, ok, want)
		}
	}
}

// TestH2Goals: the hold goal needs every stream active and no error; CPU
// is judged against the better of HAProxy and Caddy.
func TestH2Goals(t *testing.T) {
	r := &Results{Scenarios: []Scenario{
		{Name: ScH2Streams, Results: []Result{
			{Proxy: Corput, Errors: 0, H2: &H2{OfferedStreams: 100, ActiveStreams: 100, RSSPerStreamKiB: 4}},
			{Proxy: Caddy, H2: &H2{RSSPerStreamKiB: 8}}}},
		{Name: ScH2CPU, Results: []Result{
			{Proxy: Corput, H2: &H2{CPUUSPerRequest: 60}},
			{Proxy: HAProxy, H2: &H2{CPUUSPerRequest: 50}},
			{Proxy: Caddy, H2: &H2{CPUUSPerRequest: 0}}}}, // no figure: not the best
	}}
	gs := r.h2Goals()
	if len(gs) != 3 || !gs[0].Met || !gs[1].Met || gs[1].Value != 0.5 || gs[2].Met || gs[2].Value != 1.2 || !strings.Contains(gs[2].Note, "haproxy 50.0") {
		t.Fatalf("h2 goals = %+v; want held and half Caddy's RSS met, CPU 1.2× HAProxy's not met", gs)
	}
}

// TestJSONShape: peers.json keeps its shape: rps and p99_ms, the proxy's
// CPU for a proxy's row only.
func TestJSONShape(t *testing.T) {
	r := &Results{}
	r.Scenario(ScRaw, "raw").Results = []Result{{Proxy: Corput, RPS: 1, P99MS: 2, ProxyCPUUS: 12.5}, {Proxy: Direct, RPS: 3, P99MS: 1}}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	v := readJSON(t, dir)
	res := v.Scenarios[0].Results[0]
	if v.Scenarios[0].Name != "raw" || res["proxy"] != "corput" || res["rps"] != 1.0 || res["p99_ms"] != 2.0 || res["proxy_cpu_us_per_request"] != 12.5 {
		t.Fatalf("peers.json = %+v", v)
	}
	if _, ok := v.Scenarios[0].Results[1]["proxy_cpu_us_per_request"]; ok {
		t.Errorf("the direct baseline has a proxy CPU figure: %+v", v)
	}
	mdHas(t, dir, "| corput | 1 |", "| 12.5 |", "proxy CPU µs/request")
}

// TestRawTLSShape: raw_tls has raw's fields under its own name, what each
// proxy negotiated, its note, and a table with raw's columns and the
// negotiated TLS (flagged when it is not the scenario's).
func TestRawTLSShape(t *testing.T) {
	r := &Results{}
	want := TLSInfo{Protocol: "TLSv1.3", Cipher: "TLS_AES_128_GCM_SHA256", Group: "X25519, 253 bits"}
	other := TLSInfo{Protocol: "TLSv1.3", Cipher: "TLS_AES_256_GCM_SHA384"}
	r.Scenario(ScRaw, "raw").Results = []Result{{Proxy: Corput, RPS: 30000, P99MS: 5}}
	s := r.Scenario(ScRawTLS, "raw over HTTPS")
	s.Note = "Go's crypto/tls picks the suite"
	s.Results = []Result{
		{Proxy: Corput, RPS: 9000, P50MS: 3, P99MS: 12, TLS: &want,
			Rounds: []Result{{Proxy: Corput, RPS: 9000, P99MS: 12, TLS: &want}, {Proxy: Corput, RPS: 8000, P99MS: 13, TLS: &want}}},
		{Proxy: Nginx, RPS: 18000, P50MS: 1.5, P99MS: 6, TLS: &other},
	}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	v := readJSON(t, dir)
	if len(v.Scenarios) != 2 || v.Scenarios[1].Name != "raw_tls" || v.Scenarios[1].Note != s.Note {
		t.Fatalf("peers.json = %+v", v)
	}
	c := v.Scenarios[1].Results[0]
	tlsField, _ := c["tls"].(map[string]any)
	rounds, _ := c["rounds"].([]any)
	if c["proxy"] != "corput" || c["rps"] != 9000.0 || c["p50_ms"] != 3.0 || c["p99_ms"] != 12.0 || len(rounds) != 2 ||
		tlsField["protocol"] != "TLSv1.3" || tlsField["cipher"] != "TLS_AES_128_GCM_SHA256" {
		t.Fatalf("raw_tls corput result = %v", c)
	}
	mdHas(t, dir,
		"raw_tls: raw over HTTPS",
		"| proxy | req/s | p50 ms | p99 ms | errors | corput/peer req/s | corput/peer p99 | TLS negotiated |",
		"| corput | 9000 | 3.00 | 12.0 | 0 | — | — | TLSv1.3 TLS_AES_128_GCM_SHA256 (X25519) |",
		"| nginx | 18000 | 1.50 | 6.00 | 0 | 0.50× | 2.00× | TLSv1.3 TLS_AES_256_GCM_SHA384 (not TLSv1.3 TLS_AES_128_GCM_SHA256) |",
		"Go's crypto/tls",
	)
	if !want.Expected() || other.Expected() || want.String() != "TLSv1.3 TLS_AES_128_GCM_SHA256 (X25519)" {
		t.Errorf("Expected: %v for %s, %v for %s", want.Expected(), want, other.Expected(), other)
	}
}

// TestSpreadShape: a spread result's figures sit in its own object in
// peers.json (endpoints_reached, per_endpoint_max_over_mean, …; per_loop_*
// for corput only), and peers.md has a row per load and proxy.
func TestSpreadShape(t *testing.T) {
	const balancer = "{policy: least_work, choices: 2}"
	mx, mn := 1.02, 0.98
	r := &Results{}
	s := r.Scenario(ScSpread, "800 endpoints")
	s.Results = []Result{
		{Proxy: Corput, RPS: 9000, P99MS: 40, Spread: &Spread{Load: "h1_many_conns", Balancer: balancer, Endpoints: 800, EndpointsReached: 800,
			OriginRequests: 90000, PerEndpointMean: 112.5, PerEndpointMaxOverMean: 1.9, PerEndpointMinOverMean: 0.3, PerEndpointCV: 0.25,
			LoopRequests: []uint64{45000, 45000}, PerLoopMaxOverMean: &mx, PerLoopMinOverMean: &mn}},
		{Proxy: Nginx, RPS: 5600, MeanMS: 17.1, Spread: &Spread{Load: "h2_one_conn", Endpoints: 800, EndpointsReached: 799, PerEndpointMaxOverMean: 1.1}},
	}
	dir := t.TempDir()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	v := readJSON(t, dir)
	c, n := v.Scenarios[0].Results[0], v.Scenarios[0].Results[1]
	if v.Scenarios[0].Name != "spread" || c["proxy"] != "corput" || c["load"] != "h1_many_conns" || c["endpoints_reached"] != 800.0 ||
		c["per_endpoint_max_over_mean"] != 1.9 || c["per_endpoint_min_over_mean"] != 0.3 || c["per_loop_max_over_mean"] != 1.02 ||
		c["per_loop_min_over_mean"] != 0.98 || c["balancer"] != balancer || c["rps"] != 9000.0 {
		t.Fatalf("corput spread result = %v", c)
	}
	if _, ok := n["per_loop_max_over_mean"]; ok || n["per_endpoint_min_over_mean"] != 0.0 || n["mean_ms"] != 17.1 || n["endpoints_reached"] != 799.0 {
		t.Fatalf("nginx spread result = %v (want no per-loop figures, min/mean 0 written out)", n)
	}
	mdHas(t, dir,
		"| load | proxy | req/s | p99 ms | mean ms | errors | endpoints reached | per endpoint max/mean | min/mean | cv | per loop max/mean | per loop min/mean |",
		"| h1_many_conns | corput | 9000 | 40.0 | — | 0 | 800 of 800 | 1.90 | 0.30 | 0.25 | 1.02 | 0.98 | 0 | {policy: least_work, choices: 2} |",
		"| h2_one_conn | nginx | 5600 | — | 17.1 | 0 | 799 of 800 | 1.10 | 0.00 | 0.00 | — | — | 0 | — |",
	)
}

func TestAddMedians(t *testing.T) {
	var s Scenario
	rounds := map[string][]Result{"b": {{Proxy: "b", P99MS: 3}, {Proxy: "b", P99MS: 1}, {Proxy: "b", P99MS: 2}}, "a": {{Proxy: "a", P99MS: 7}}}
	s.AddMedians([]string{"a", "none", "b"}, rounds, func(r Result) float64 { return r.P99MS })
	got := []float64{}
	for _, r := range s.Results {
		got = append(got, r.P99MS)
	}
	if !slices.Equal(got, []float64{7, 2}) || s.Results[0].Proxy != "a" || len(s.Results[1].Rounds) != 3 {
		t.Fatalf("AddMedians = %+v; want a's one round, then b's median of three", s.Results)
	}
}

// peersJSON is peers.json read back, results as maps.
type peersJSON struct {
	Scenarios []struct {
		Name    string           `json:"name"`
		Note    string           `json:"note"`
		Results []map[string]any `json:"results"`
	} `json:"scenarios"`
}

func readJSON(t *testing.T, dir string) peersJSON {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "peers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v peersJSON
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// mdHas checks that dir's peers.md holds every line of want.
func mdHas(t *testing.T, dir string, want ...string) {
	t.Helper()
	md, _ := os.ReadFile(filepath.Join(dir, "peers.md"))
	for _, w := range want {
		if !strings.Contains(string(md), w) {
			t.Errorf("peers.md lacks %q:\n%s", w, md)
		}
	}
}
