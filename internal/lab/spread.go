package lab

import (
	"context"
	"fmt"
	"math"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/workload"
)

// spreadRun is one run of the even-load experiment: a policy (peak_ewma
// with its tie ratio) on constant or noisy service times.
type spreadRun struct {
	policy balance.Policy
	tie    float64 // balancer.tie_ratio; 1 is the plain Peak EWMA
	noisy  bool
}

func (r spreadRun) name() string {
	if r.policy == balance.PeakEWMA && r.tie == 1 {
		return "peak_ewma (tie_ratio 1)"
	}
	return string(r.policy)
}

// spreadRuns are corput's policies, and the plain Peak EWMA (tie_ratio 1,
// the picker before the tie rule), on both service-time models (requests
// of one class: least_work sees cost 1 each).
func spreadRuns() []spreadRun {
	var runs []spreadRun
	for _, noisy := range []bool{false, true} {
		for _, r := range []spreadRun{{policy: balance.PeakEWMA, tie: 1.5}, {policy: balance.PeakEWMA, tie: 1}, {policy: balance.LeastWork},
			{policy: balance.P2C}, {policy: balance.RoundRobin}, {policy: balance.Random}} {
			r.noisy = noisy
			runs = append(runs, r)
		}
	}
	return runs
}

// SpreadResult is where one run's requests went: per endpoint and per loop,
// as multiples of an even share.
type SpreadResult struct {
	Policy   string  `json:"policy"`
	TieRatio float64 `json:"tie_ratio,omitempty"`
	Noise    float64 `json:"noise"` // the run's log-normal σ; 0 is constant service times
	Requests int64   `json:"requests"`
	Reached  int     `json:"endpoints_reached"`
	// EndpointMin/Max are the least and most requests an endpoint got, ÷
	// the mean; LoopMin/Max the same over the loops.
	EndpointMin float64 `json:"per_endpoint_min_over_mean"`
	EndpointMax float64 `json:"per_endpoint_max_over_mean"`
	LoopMin     float64 `json:"per_loop_min_over_mean"`
	LoopMax     float64 `json:"per_loop_max_over_mean"`
}

// runSpread simulates one run: Endpoints identical endpoints behind one
// gateway of Loops loops (Ringsteady subsets), Rate req/s of one class.
func runSpread(ctx context.Context, sc *Scenario, run spreadRun, tick func()) (SpreadResult, error) {
	s := sc.Spread
	bc := balance.DefaultConfig()
	bc.Policy, bc.SlowStart.Window = run.policy, 0
	if run.tie > 0 {
		bc.TieRatio = run.tie
	}
	noise := 0.0
	if run.noisy {
		noise = s.Noise
	}
	mix := workload.Mix{Classes: []workload.Class{{Name: "path", Percent: 100, Latency: s.Latency}}}
	e := newEngine(sc.Seed, mix, fleetOptions{
		gateways: 1, loops: s.Loops, algorithm: subset.NameRingsteady, scope: perLoop,
		pool: fleetPool(), conn: memconn.Config{Streams: 1}, balance: bc, workers: s.Workers, noise: noise,
	})
	members := make([]*instance, s.Endpoints)
	for i := range members {
		members[i] = e.newInstance(address(0, i), 1, workload.Warmup{}, 0)
	}
	if err := e.place(members); err != nil {
		return SpreadResult{}, fmt.Errorf("spread %s: %w", run.name(), err)
	}
	e.gws[0].start(s.Rate)
	if err := e.run(ctx, s.Duration, tick); err != nil {
		return SpreadResult{}, fmt.Errorf("spread %s: %w", run.name(), err)
	}
	r := SpreadResult{Policy: run.name(), Noise: noise, Requests: e.rec.arrivals}
	if run.policy == balance.PeakEWMA {
		r.TieRatio = run.tie
	}
	var got []float64
	for _, in := range members {
		if in.received > 0 {
			r.Reached++
		}
		got = append(got, float64(in.received))
	}
	r.EndpointMin, r.EndpointMax = overMean(got)
	got = got[:0]
	for _, l := range e.gws[0].loops {
		got = append(got, float64(l.requests))
	}
	r.LoopMin, r.LoopMax = overMean(got)
	return r, nil
}

// overMean returns the least and the most of vs, each ÷ their mean.
func overMean(vs []float64) (lo, hi float64) {
	sum := 0.0
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		sum += v
		lo, hi = min(lo, v), max(hi, v)
	}
	if sum == 0 {
		return 0, 0
	}
	mean := sum / float64(len(vs))
	return round2(lo / mean), round2(hi / mean)
}
