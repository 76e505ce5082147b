package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/bench/peers/internal/proc"
	"github.com/corput/corput/bench/peers/internal/proxies"
	"github.com/corput/corput/bench/peers/internal/results"
	"github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/progress"
	"github.com/corput/corput/internal/testbin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestJoinResultCountsClassRequestsOnly(t *testing.T) {
	st := origin.Stats{
		Requests: map[string]origin.Counts{"light": {OK: 70}, "heavy": {OK: 25, Canceled: 5}, origin.RawClass: {OK: 30}},
		Queued:   origin.Level{Max: 9}, // over its whole life: not the early peak
		Seconds: []origin.Second{
			{T: 0, Requests: 4, MaxConcurrency: 2, MaxInFlight: 2}, {T: 1, Requests: 9, MaxConcurrency: 6, MaxQueued: 3, MaxInFlight: 9},
			{T: 30, MaxConcurrency: 8, MaxQueued: 9, MaxInFlight: 17},
			{T: 60, Requests: 20}, {T: 74, Requests: 10}, {T: 75, Requests: 50},
		},
	}
	j := joinResult(st, joinSpans{window: 75, early: 30, late: 60, others: 900, othersEarly: 117, othersLate: 120})
	want := results.JoinResult{WindowS: 75, Requests: 100, Share: 0.1,
		EarlyS: 30, EarlyRequests: 13, EarlyShare: 0.1, MaxConcurrency: 6, MaxQueued: 3, MaxInFlight: 9, FirstSecond: 4,
		LateFromS: 60, LateShare: 0.2, LateVsFair: 1}
	if *j != want {
		t.Fatalf("joinResult = %+v, want %+v", *j, want)
	}
	if j := joinResult(st, joinSpans{window: 30, early: 30, late: 60, others: 100}); j.LateShare != 0 || j.LateVsFair != 0 {
		t.Fatalf("a 30 s window has no late span: %+v", *j)
	}
}

// TestSpreadOf: the per-endpoint figures are over every member (one that
// got nothing counts), and the per-loop ones come from two readings of
// corput's loops.
func TestSpreadOf(t *testing.T) {
	members := []string{"a", "b", "c", "d"}
	s := spreadOf(members, map[string]int64{"a": 10, "b": 30, "c": 20, "other": 99})
	want := results.Spread{Endpoints: 4, EndpointsReached: 3, OriginRequests: 60, PerEndpointMean: 15, PerEndpointMax: 30, PerEndpointMin: 0,
		PerEndpointMaxOverMean: 2, PerEndpointMinOverMean: 0, PerEndpointCV: results.Round3(math.Sqrt((25+225+25+225)/4.0) / 15)}
	if !sameJSON(s, want) {
		t.Fatalf("spreadOf = %+v\nwant       %+v", s, want)
	}
	setLoops(&s, []uint64{1, 1, 1, 1}, []uint64{11, 21, 31, 41})
	if !slices.Equal(s.LoopRequests, []uint64{10, 20, 30, 40}) || *s.PerLoopMaxOverMean != 1.6 || *s.PerLoopMinOverMean != 0.4 {
		t.Fatalf("loops %v max/mean %v min/mean %v; want 10..40, 1.6, 0.4", s.LoopRequests, *s.PerLoopMaxOverMean, *s.PerLoopMinOverMean)
	}
	var none results.Spread
	setLoops(&none, nil, []uint64{0, 0})
	if none.PerLoopMaxOverMean != nil {
		t.Error("loops without requests got ratios")
	}
}

func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// TestPlan: the standard origins start only for a scenario that shares
// them; the runs counted for the progress bar follow each scenario's
// proxies and rounds; the order rotates by round; versions are read from
// the peers' own words.
func TestPlan(t *testing.T) {
	if UsesStandardOrigins([]string{results.ScSpread, results.ScH2CPU}) || !UsesStandardOrigins([]string{results.ScSpread, results.ScRaw}) {
		t.Error("the four standard origins: started for spread and h2_cpu alone, or not for raw")
	}
	all := []proxies.Proxy{proxies.Corput{}, proxies.Nginx{}, proxies.HAProxy{}, proxies.Caddy{}}
	b := &bench{proxies: all, o: Options{Rounds: 2, RawRounds: 3,
		Scenarios: []string{results.ScRaw, results.ScSkewed, results.ScSpread, results.ScH2CPU, results.ScTracing, results.ScManyEndpoints}}}
	// raw: (4+direct)×3; skewed: 4×2; spread: 3 loads×4×2; h2_cpu: 3 (no nginx)×2; tracing: 5×2; many_endpoints: 4×2
	if got, want := b.totalRuns(), 15+8+24+6+10+8; got != want {
		t.Errorf("totalRuns = %d, want %d", got, want)
	}
	var names []string
	for _, p := range rotate(all, 5) {
		names = append(names, p.Name())
	}
	if !slices.Equal(names, []string{"nginx", "haproxy", "caddy", "corput"}) {
		t.Errorf("round 6's order %v", names)
	}
	if v := firstVersion("nginx version: nginx/1.22.1\n"); v != "1.22.1" {
		t.Errorf("nginx version %q", v)
	}
	if v := firstVersion("HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/\n"); v != "2.6.12-1+deb12u4" {
		t.Errorf("haproxy version %q", v)
	}
	if v := firstVersion("v2.6.2 h1:abc=\n"); v != "v2.6.2" {
		t.Errorf("caddy version %q", v)
	}
}

// testOptions are the defaults a test bench runs with: one round, one
// processor per origin, corput's default balancer.
func testOptions(scenarios ...string) Options {
	return Options{Scenarios: scenarios, Rounds: 1, OriginProcs: 1, Seed: 1, Balancer: proxies.DefaultBalancer, Forwarded: true}
}

// runTestBench runs options o against proxies through a bench of its own
// (a temporary directory, no output), within 2 minutes, and returns it
// for its results; the processes it started are stopped when the test ends.
func runTestBench(t *testing.T, o Options, bin string, list ...proxies.Proxy) *bench {
	t.Helper()
	dir := t.TempDir()
	ps := proc.New(dir)
	t.Cleanup(ps.StopAll)
	b := &bench{o: o, ps: ps, bin: bin, dir: dir, log: io.Discard, res: &results.Results{}, proxies: list}
	b.bar = progress.New(io.Discard, "peers", b.totalRuns())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.runAll(ctx); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSpreadSmoke runs a tiny spread scenario through corput (a real
// child; skipped under -short or without wrk and h2load): 2 origins × 3
// listeners, 2 loops, a second of each wrk load and 300 h2 requests. Each
// load reaches every endpoint through both loops, the h2 load speaks h2c,
// and nothing failed. No speed is asserted.
func TestSpreadSmoke(t *testing.T) {
	bin := testbin.Corput(t)
	for _, tool := range spreadNeeds {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	o := testOptions(results.ScSpread)
	o.Spread = SpreadOptions{Origins: 2, Listeners: 3, Loops: 2, Duration: time.Second, Conns: 8, FewConns: 2, Streams: 10, H2Requests: 300}
	b := runTestBench(t, o, bin, proxies.Corput{Binary: bin, Balancer: o.Balancer})
	if b.totalRuns() != 3 || len(b.res.Scenarios) != 1 || len(b.res.Scenarios[0].Results) != 3 {
		t.Fatalf("%d runs, results %+v; want 3 runs, one scenario with a result per load", b.totalRuns(), b.res.Scenarios)
	}
	for i, r := range b.res.Scenarios[0].Results {
		sp := r.Spread
		if sp == nil || sp.Load != []string{loadManyConns, loadH2, loadFewConns}[i] {
			t.Fatalf("result %d: %+v", i, r)
		}
		if sp.Endpoints != 6 || sp.EndpointsReached != 6 || r.Errors != 0 || len(sp.LoopRequests) != 2 || sp.LoopRequests[0] == 0 || sp.LoopRequests[1] == 0 ||
			sp.Balancer != proxies.DefaultBalancer || sp.PerLoopMinOverMean == nil {
			t.Errorf("%s: %+v errors %d; want 6 of 6 endpoints reached through both loops, no errors", sp.Load, *sp, r.Errors)
		}
		if sp.Load == loadH2 && (sp.OriginRequests < 300 || r.Requests != 300) {
			t.Errorf("h2: %d requests sent, %d at the origins; want 300", r.Requests, sp.OriginRequests)
		}
	}
}

// TestH2Smoke runs both h2 scenarios through corput at a small scale:
// every stream is held at once with no error, and CPU is counted; nginx
// is left out.
func TestH2Smoke(t *testing.T) {
	bin := testbin.Corput(t)
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk not installed")
	}
	o := testOptions(results.ScH2Streams, results.ScH2CPU)
	o.H2 = H2Options{Origins: 2, Streams: 300, PerConn: 50, Ramp: 300 * time.Millisecond, Hold: 1500 * time.Millisecond, CPUDuration: time.Second, CPUConns: 4}
	b := runTestBench(t, o, bin, proxies.Corput{Binary: bin, Balancer: o.Balancer}, proxies.Nginx{})
	if b.totalRuns() != 2 || len(b.res.Scenarios) != 2 {
		t.Fatalf("%d runs, %d scenarios; want 2 and 2 (nginx left out)", b.totalRuns(), len(b.res.Scenarios))
	}
	s, ok := b.res.Find(results.ScH2Streams, results.Corput)
	if !ok || s.H2 == nil || s.Errors != 0 || s.ActiveStreams != 300 || s.ClientActiveStreams != 300 || s.DownstreamConnections != 6 ||
		s.UpstreamConnections < 2 || s.RSSPerStreamKiB <= 0 || s.P50MS < 1500 {
		t.Errorf("h2_streams: %+v %+v; want 300 streams held at once over 6 connections, no error, RSS growth, latency ≥ the hold", s, s.H2)
	}
	c, ok := b.res.Find(results.ScH2CPU, results.Corput)
	if !ok || c.H2 == nil || c.Requests < 100 || c.CPUUSPerRequest <= 0 || c.Errors != 0 {
		t.Errorf("h2_cpu: %+v %+v; want requests counted by the origins and CPU per request", c, c.H2)
	}
	if gs := b.res.Judge(); len(gs) == 0 || !strings.HasPrefix(gs[0].Name, "h2_streams") || !gs[0].Met {
		t.Errorf("goals %+v; want the h2_streams hold goal, met", gs)
	}
}
