package live

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/loadgen"
)

func defaults(t *testing.T) Options {
	t.Helper()
	o, err := Options{InProcess: true}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// Every step's generated config passes the same parser and validation as
// `corput serve`, and says what the step means.
func TestStepConfigsParse(t *testing.T) {
	o := defaults(t)
	eps := make([]string, o.Endpoints)
	for i := range eps {
		eps[i] = fmt.Sprintf("127.0.0.1:%d", 20000+i)
	}
	steps := o.steps()
	if len(steps) != len(StepIDs()) {
		t.Fatalf("%d steps, %d ids", len(steps), len(StepIDs()))
	}
	for i, st := range steps {
		if st.ID != StepIDs()[i] {
			t.Errorf("step %d is %q, want %q", i, st.ID, StepIDs()[i])
		}
		cfg, err := config.Parse(st.gatewayConfig(3, o.Gateways, eps), "step.yaml")
		if err != nil {
			t.Fatalf("step %s: %v", st.ID, err)
		}
		oc := cfg.Origins[0]
		if cfg.Loops != st.Loops || cfg.Fleet != (config.Fleet{Instance: 3, Size: o.Gateways}) || len(oc.Endpoints) != o.Endpoints ||
			string(oc.Protocol) != st.Protocol || string(oc.Subset.Algorithm) != st.Subset ||
			oc.Pool.Prewarm != st.Prewarm || oc.Pool.IdleTimeout != st.IdleTimeout || oc.Pool.MaxLifetime != st.MaxLifetime {
			t.Errorf("step %s: config %+v / %+v does not match the step %+v", st.ID, cfg, oc, st)
		}
		if st.Subset == "ringsteady" && oc.Subset.Size != o.SubsetSize {
			t.Errorf("step %s: subset size %d, want %d", st.ID, oc.Subset.Size, o.SubsetSize)
		}
	}
}

func TestStepShapes(t *testing.T) {
	o := defaults(t)
	st := map[string]Step{}
	for _, s := range o.steps() {
		st[s.ID] = s
	}
	n := o.Endpoints
	for id, want := range map[string]int{
		StepPerRequest: o.Loops * n, StepShared: n, StepPerLoop: o.Loops * n, StepH2: o.Loops * n,
		StepSubset: o.Loops * o.SubsetSize, StepIdleEager: o.Loops * o.SubsetSize, StepIdleTuned: o.Loops * o.SubsetSize,
	} {
		if got := st[id].poolsPerGateway(n); got != want {
			t.Errorf("step %s: %d pools per gateway, want %d", id, got, want)
		}
	}
	// 4×4×8 = 128 pools share 320 req/s: a request every 400 ms per pool;
	// ten gaps, rounded up to a second, is 4 s.
	if got := o.meanGap(128); got != 400*time.Millisecond {
		t.Errorf("mean gap %v, want 400ms", got)
	}
	if st[StepIdleTuned].IdleTimeout != 4*time.Second || st[StepIdleEager].IdleTimeout != AggressiveIdle {
		t.Errorf("idle timeouts: tuned %v, aggressive %v", st[StepIdleTuned].IdleTimeout, st[StepIdleEager].IdleTimeout)
	}
	if st[StepIdleTuned].Prewarm != 0 || st[StepIdleEager].Prewarm != 0 {
		t.Error("step 5 must not pre-warm: the prewarm floor would hide idle eviction")
	}
}

func TestOptionsRejected(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Gateways: -1}, "gateways -1"},
		{Options{Endpoints: 4, SubsetSize: 5}, "subset size 5"},
		{Options{Rate: -3}, "rate -3"},
		{Options{StepDuration: time.Second}, "step duration 1s"},
		{Options{Steps: []string{"6"}}, `step "6"`},
	} {
		c.o.InProcess = true
		_, err := c.o.withDefaults()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %q", c.o, err, c.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	o := Options{Gateways: 2, Loops: 2, Endpoints: 8, SubsetSize: 2, Rate: 40, StepDuration: 4 * time.Second}
	st := Step{Loops: 2, Subset: "ringsteady", SubsetSize: 2, Prewarm: 1}
	samples := []Sample{
		{T: 0, OriginOpen: 8, OriginAccepted: 8, MetricsOpen: 8, MetricsCreated: 8},
		{T: 1, OriginOpen: 9, OriginAccepted: 18, MetricsOpen: 9, MetricsCreated: 17},
		{T: 2, OriginOpen: 10, OriginAccepted: 20, MetricsOpen: 10, MetricsCreated: 20},
		{T: 3, OriginOpen: 12, OriginAccepted: 24, MetricsOpen: 11, MetricsCreated: 24},
		{T: 4, OriginOpen: 8, OriginAccepted: 26, MetricsOpen: 8, MetricsCreated: 26},
	}
	rest := Sample{T: 5, OriginOpen: 8, OriginAccepted: 27, MetricsOpen: 8, MetricsCreated: 27}
	s := summarize(st, o, samples, rest, map[string]float64{"idle": 3}, 0)
	want := Summary{
		Pools: 8, Floor: 8, MeanGapMS: 200,
		OriginOpen: 10, MetricsOpen: 29.0 / 3, OriginOpenMax: 12, MetricsOpenMax: 11,
		OriginStart: 8, MetricsStart: 8, OriginTotal: 27, MetricsTotal: 27,
		OriginSteady: 3, MetricsSteady: 3, OriginPeak: 10, MetricsPeak: 9,
		Closed: map[string]float64{"idle": 3},
	}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Errorf("summary\n got %+v\nwant %+v", s, want)
	}
}

func TestSumLoad(t *testing.T) {
	r := func(n int, p50, max float64, codes map[string]int64) loadgen.Report {
		return loadgen.Report{Requests: int64(n), Answered: int64(n), StatusCodes: codes,
			Overall: &loadgen.Latency{Count: n, P50: p50, P90: 2 * p50, P99: 3 * p50, Max: max}}
	}
	l := sumLoad([]loadgen.Report{
		r(30, 10, 50, map[string]int64{"200": 30}),
		r(10, 30, 200, map[string]int64{"200": 8, "503": 2}),
		{Requests: 1, StatusCodes: map[string]int64{"0": 1}, Errors: map[string]int64{"refused": 1}},
	}, 40)
	if l.Streams != 3 || l.Requests != 41 || l.Answered != 40 || l.ok() != 38 || l.Errors["refused"] != 1 {
		t.Errorf("sum %+v", l)
	}
	if want := (loadgen.Latency{Count: 40, P50: 15, P90: 30, P99: 45, Max: 200}); l.Latency != want {
		t.Errorf("latency %+v, want %+v", l.Latency, want)
	}
}

func TestElideEndpoints(t *testing.T) {
	cfg := "origins:\n  - name: x\n    endpoints:\n      - {address: \"a:1\"}\n      - {address: \"a:2\"}\n      - {address: \"a:3\"}\n    pool: {}\n"
	want := "origins:\n  - name: x\n    endpoints:\n      - {address: \"a:1\"}\n      # … and 2 more endpoints\n    pool: {}\n"
	if got := elideEndpoints(cfg); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestTail(t *testing.T) {
	if got := tail([]byte("a\nb\nc\nd\n"), 2); got != "c\nd" {
		t.Errorf("tail 2: %q", got)
	}
	if got := tail([]byte("only"), 3); got != "only" {
		t.Errorf("tail of one line: %q", got)
	}
}

// Two samples taken close together (the sampler caught up after a stall)
// say little about a rate: the two sides are read one after the other.
func TestPeakIgnoresShortIntervals(t *testing.T) {
	o := Options{Gateways: 1, Loops: 1, Endpoints: 1, SubsetSize: 1, Rate: 1, StepDuration: 2 * time.Second}
	samples := []Sample{
		{T: 0},
		{T: 1, OriginAccepted: 5, MetricsCreated: 4},
		{T: 1.03, OriginAccepted: 6, MetricsCreated: 6},
		{T: 2.03, OriginAccepted: 8, MetricsCreated: 8},
	}
	s := summarize(Step{Loops: 1, Subset: "none"}, o, samples, samples[3], nil, 0)
	if s.OriginPeak != 5 || s.MetricsPeak != 4 {
		t.Errorf("peaks %v / %v, want 5 / 4 (the 0.03 s interval ignored)", s.OriginPeak, s.MetricsPeak)
	}
}
