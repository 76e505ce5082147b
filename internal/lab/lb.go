package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/workload"
)

// lbRun is one run of the load-balancing comparison.
type lbRun struct {
	policy    balance.Policy
	slowStart bool
	variance  bool // the variance model's service times (LBScenario.Variance)
}

// lbPolicies are the policies the comparison runs, baselines first.
var lbPolicies = []balance.Policy{balance.RoundRobin, balance.Random, balance.P2C, balance.LeastRequest, balance.PeakEWMA, balance.LeastWork}

// lbRuns are, on constant service times and then on the variance model,
// every policy with the default slow start, then peak_ewma, least_work and
// round robin without it, for the cold-start comparison.
func lbRuns() []lbRun {
	runs := []lbRun{}
	for _, variance := range []bool{false, true} {
		for _, p := range lbPolicies {
			runs = append(runs, lbRun{policy: p, slowStart: true, variance: variance})
		}
		for _, p := range []balance.Policy{balance.PeakEWMA, balance.LeastWork, balance.RoundRobin} {
			runs = append(runs, lbRun{policy: p, variance: variance})
		}
	}
	return runs
}

func (r lbRun) name() string {
	n := string(r.policy)
	if !r.slowStart {
		n += "_no_slow_start"
	}
	if r.variance {
		n += "_variance"
	}
	return n
}

// Service-time models, as LBResult.Model names them.
const (
	modelConstant = "constant"
	modelVariance = "log-normal"
)

// The roles of the endpoints of the load-balancing scenario.
const (
	roleDegraded = "degraded"
	roleFlaky    = "flaky"
	roleCold     = "cold"
	roleWarm     = "warm"
)

// LBResult is one policy's figures on the degraded-endpoint scenario:
// latency from arrival to answer over every answered request (5xx and
// timeouts included, gateway 503s counted apart), overall and per class,
// and where the requests went.
type LBResult struct {
	Policy    string `json:"policy"`
	SlowStart bool   `json:"slow_start"`
	// Model is the service times: constant, or log-normal around each
	// class's mean with σ Variance.
	Model    string  `json:"service_times"`
	Variance float64 `json:"variance_sigma,omitempty"`

	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`

	Classes       map[string]Percentiles `json:"classes"`
	DegradedShare float64                `json:"degraded_share"`
	ColdShare     float64                `json:"cold_share"`
	FlakyShare    float64                `json:"flaky_share"`
	Shares        []EndpointShare        `json:"shares"`

	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"` // 5xx answers: injected 500s and timeouts
	Timeouts int64 `json:"timeouts"`
	Shed     int64 `json:"shed"`

	ColdMaxConcurrency int `json:"cold_max_concurrency_first_30s"`
	// ColdConcurrency is the cold endpoint's highest concurrency (requests
	// queued or in service at it) per 100 ms after it joined.
	ColdConcurrency []int `json:"cold_concurrency"`
}

// EndpointShare is the share of the requests that reached one endpoint,
// with what the endpoint saw of them.
type EndpointShare struct {
	Address  string  `json:"address"`
	Role     string  `json:"role"`
	Requests int64   `json:"requests"`
	Share    float64 `json:"share"`
	// Errors are the injected 500s it answered; MaxConcurrency the most
	// requests queued or in service at it at once.
	Errors         int64 `json:"errors"`
	MaxConcurrency int   `json:"max_concurrency"`
}

// ColdStartResult is the cold endpoint's highest concurrency during its
// first 30 s (LB-PAY-001's MC-BN-01 in docs/spec.md: it must stay under 20).
type ColdStartResult struct {
	Policy         string `json:"policy"`
	SlowStart      bool   `json:"slow_start"`
	Model          string `json:"service_times"`
	MaxConcurrency int    `json:"max_concurrency_first_30s"`
}

const coldStep = 100 * time.Millisecond

// runLB simulates one policy on the scenario: warm endpoints, one of them
// degraded and one flaky, and a cold one that joins at ColdAt.
func runLB(ctx context.Context, sc *Scenario, run lbRun, tick func()) (LBResult, error) {
	l := sc.LB
	bc := balance.DefaultConfig()
	bc.Policy = run.policy
	if !run.slowStart {
		bc.SlowStart.Window = 0
	}
	pc := fleetPool()
	variance := 0.0
	if run.variance {
		variance = l.Variance
	}
	e := newEngine(sc.Seed, sc.Mix, fleetOptions{
		gateways: l.Gateways, loops: l.Loops, algorithm: subset.NameRingsteady, scope: perLoop,
		pool: pc, conn: memconn.Config{Streams: sc.Fleet.Streams, DialLatency: sc.Fleet.DialLatency},
		balance: bc, workers: l.Workers, timeout: l.Timeout, retries: 1, variance: variance,
	})
	e.rec.until = l.Duration
	roles := map[*instance]string{}
	members := make([]*instance, l.Endpoints)
	for i := range members {
		slow, errs, role := 1.0, 0.0, roleWarm
		switch i {
		case 0:
			slow, role = l.Slowdown, roleDegraded
		case 1:
			errs, role = l.ErrorRate, roleFlaky
		}
		members[i] = e.newInstance(address(0, i), slow, workload.Warmup{}, errs)
		roles[members[i]] = role
	}
	if err := e.place(members); err != nil {
		return LBResult{}, fmt.Errorf("lb %s: %w", run.name(), err)
	}
	for _, g := range e.gws {
		g.start(l.Rate / float64(l.Gateways))
	}
	var cold *instance
	e.clk.AfterFunc(l.ColdAt, func() {
		cold = e.newInstance(address(0, l.Endpoints), 1, l.Warmup, 0)
		cold.trace = &concTrace{from: e.clk.Now(), step: coldStep, max: make([]int, l.ColdWindow/coldStep)}
		roles[cold] = roleCold
		if err := e.setMembers(append(append([]*instance(nil), e.members...), cold)); err != nil {
			e.fail(err)
		}
	})
	if err := e.run(ctx, l.Duration, tick); err != nil {
		return LBResult{}, fmt.Errorf("lb %s: %w", run.name(), err)
	}
	return lbResult(e, run, roles, cold), nil
}

func lbResult(e *engine, run lbRun, roles map[*instance]string, cold *instance) LBResult {
	all := percentiles(concat(e.rec.lat))
	r := LBResult{
		Policy: string(run.policy), SlowStart: run.slowStart, Model: modelConstant,
		P50: all.P50, P90: all.P90, P99: all.P99, Max: all.Max,
		Classes:  map[string]Percentiles{},
		Requests: e.rec.arrivals, Errors: e.rec.errors, Timeouts: e.rec.timeouts, Shed: e.rec.shedTotal(),
	}
	if v := e.o.variance; v > 0 {
		r.Model, r.Variance = modelVariance, v
	}
	for i, c := range e.mix.Classes {
		if i < len(e.rec.lat) {
			r.Classes[c.Name] = percentiles(e.rec.lat[i])
		}
	}
	var total int64
	for _, in := range e.insts {
		total += in.received
	}
	for _, in := range e.insts {
		s := EndpointShare{Address: in.addr, Role: roles[in], Requests: in.received, Errors: in.failed, MaxConcurrency: in.maxConc}
		if total > 0 {
			s.Share = round4(float64(in.received) / float64(total))
		}
		r.Shares = append(r.Shares, s)
		switch s.Role {
		case roleDegraded:
			r.DegradedShare = s.Share
		case roleFlaky:
			r.FlakyShare = s.Share
		case roleCold:
			r.ColdShare = s.Share
		}
	}
	if cold != nil {
		r.ColdConcurrency = cold.trace.max
		for _, c := range cold.trace.max {
			r.ColdMaxConcurrency = max(r.ColdMaxConcurrency, c)
		}
	}
	return r
}

func round4(x float64) float64 { return round2(x*100) / 100 }
