package lab

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/workload"
)

// step is one of the first seed's steps: what changes from the previous one.
type step struct {
	id, name, title string
	scope           poolScope
	algorithm       string
	h2              bool
	idle            func(sc *Scenario) time.Duration // nil: the default idle timeout
}

// steps are the spec's connection-pool techniques added one at a time, 0–5
// (gw-04, docs/spec.md); step 5 is two runs, aggressive eviction
// and an idle timeout tuned to the traffic.
var steps = []step{
	{id: "0", name: "conn_per_request", title: "a connection per request", scope: perRequest, algorithm: subset.NameNone},
	{id: "1", name: "shared_pool", title: "reuse, one pool per gateway", scope: perGateway, algorithm: subset.NameNone},
	{id: "2", name: "per_loop_pools", title: "per-loop pools (Zuul baseline G×K×N)", scope: perLoop, algorithm: subset.NameNone},
	{id: "3", name: "h2_multiplexing", title: "+ HTTP/2 multiplexing", scope: perLoop, algorithm: subset.NameNone, h2: true},
	{id: "4", name: "subsetting", title: "+ Ringsteady subsetting", scope: perLoop, algorithm: subset.NameRingsteady, h2: true},
	{id: "5a", name: "idle_ttl_aggressive", title: "+ aggressive idle eviction", scope: perLoop, algorithm: subset.NameRingsteady, h2: true,
		idle: func(sc *Scenario) time.Duration { return sc.Steps.AggressiveIdle }},
	{id: "5b", name: "idle_ttl_tuned", title: "+ idle timeout tuned to the traffic", scope: perLoop, algorithm: subset.NameRingsteady, h2: true,
		idle: tunedIdle},
}

// tunedIdle is an idle timeout tuned to the traffic of one subsetted pool:
// the gap between two of its requests that only one gap in 1000 exceeds,
// ln(1000)/r for Poisson arrivals at r per second, rounded up to a second.
func tunedIdle(sc *Scenario) time.Duration {
	f := sc.Fleet
	s := f.sizing().Subsets(f.Endpoints, f.Gateways*f.Loops, 0)
	k := (f.Endpoints + s - 1) / s
	r := f.RatePerGateway / float64(f.Loops*k)
	return time.Duration(math.Ceil(math.Log(1000)/r)) * time.Second
}

// StepResult is one step's connection figures. The steady figures are
// taken over the scenario's steady window (pools filled, no deploy or
// autoscale): open connections as the median of the per-second samples,
// creations as a rate (created in the window ÷ its length).
type StepResult struct {
	Step        string        `json:"step"`
	Name        string        `json:"name"`
	Title       string        `json:"title"`
	Protocol    string        `json:"protocol"`
	Subset      string        `json:"subset"`
	Pools       string        `json:"pools"`
	IdleTimeout time.Duration `json:"idle_timeout_ns"`

	OpenPeak          float64 `json:"open_connections_peak"`
	OpenSteady        float64 `json:"open_connections_steady"`
	CreatedSteady     float64 `json:"created_per_sec_steady"`
	CreatedPeak       float64 `json:"created_per_sec_peak"`
	CreatedDeployPeak float64 `json:"created_per_sec_deploy_peak"`
	CreatedDeploy     float64 `json:"created_during_deploy"`
	CreatedTotal      int64   `json:"created_total"`
	// OriginOpenSteady is the steady open count as the origins count it.
	OriginOpenSteady float64          `json:"origin_open_connections_steady"`
	ClosedBy         map[string]int64 `json:"closed_by_reason"`

	Latency  Percentiles `json:"latency"`
	Requests int64       `json:"requests"`
	Errors   int64       `json:"errors"`
	Shed     int64       `json:"shed"`

	Series timeSeries `json:"series"`
}

// fleetPool is the pool configuration of the fleet experiments: the
// defaults, with no pre-warm (traffic opens the connections, as in the Zuul
// baseline).
func fleetPool() pool.Config {
	c := pool.DefaultConfig()
	c.Prewarm = 0
	return c
}

// fleetEngine builds the engine of a fleet experiment with its initial,
// warm membership of sc.Fleet.Endpoints instances.
func fleetEngine(sc *Scenario, seed uint64, o fleetOptions) (*engine, error) {
	f := sc.Fleet
	o.gateways, o.loops, o.workers, o.sizing = f.Gateways, f.Loops, f.Workers, f.sizing()
	o.retries = 1
	if o.balance.Policy == "" {
		o.balance = balance.DefaultConfig()
	}
	e := newEngine(seed, sc.Mix, o)
	members := make([]*instance, f.Endpoints)
	for i := range members {
		members[i] = e.newInstance(address(0, i), 1, workload.Warmup{}, 0)
	}
	if err := e.place(members); err != nil {
		return nil, err
	}
	return e, nil
}

// address names instance i of deploy generation gen.
func address(gen, i int) string {
	return fmt.Sprintf("10.%d.%d.%d:8080", gen, i/256, i%256)
}

func connConfig(sc *Scenario, h2 bool) memconn.Config {
	c := memconn.Config{Streams: 1, DialLatency: sc.Fleet.DialLatency}
	if h2 {
		c.Streams = sc.Fleet.Streams
	}
	return c
}

// runStep simulates one step over the scenario's timeline.
func runStep(ctx context.Context, sc *Scenario, st step, tick func()) (StepResult, error) {
	pc := fleetPool()
	if st.idle != nil {
		pc.IdleTimeout = st.idle(sc)
	}
	e, err := fleetEngine(sc, sc.Seed, fleetOptions{
		algorithm: st.algorithm, scope: st.scope, pool: pc, conn: connConfig(sc, st.h2), baseline: true,
	})
	if err != nil {
		return StepResult{}, fmt.Errorf("step %s: %w", st.name, err)
	}
	for _, g := range e.gws {
		g.start(sc.Fleet.RatePerGateway)
	}
	scheduleOriginEvents(e, sc)
	if err := e.run(ctx, sc.Steps.Duration, tick); err != nil {
		return StepResult{}, fmt.Errorf("step %s: %w", st.name, err)
	}
	return stepResult(e, sc, st, pc), nil
}

// scheduleOriginEvents arms the timeline's rolling deploy (every instance
// replaced by a new, cold one, a batch at a time) and the autoscale (new
// cold instances join).
func scheduleOriginEvents(e *engine, sc *Scenario) {
	s, f := sc.Steps, sc.Fleet
	batches := (f.Endpoints + s.DeployBatch - 1) / s.DeployBatch
	for b := range batches {
		e.clk.AfterFunc(s.DeployAt+time.Duration(b)*s.DeployEvery, func() {
			next := make([]*instance, 0, len(e.members))
			for _, in := range e.members {
				if idx := in.id; idx >= b*s.DeployBatch && idx < (b+1)*s.DeployBatch {
					next = append(next, e.newInstance(address(1, idx), 1, f.Warmup, 0))
					continue
				}
				next = append(next, in)
			}
			if err := e.setMembers(next); err != nil {
				e.fail(err)
			}
		})
	}
	e.clk.AfterFunc(s.AutoscaleAt, func() {
		next := append([]*instance(nil), e.members...)
		for i := range s.AutoscaleAdd {
			next = append(next, e.newInstance(address(2, i), 1, f.Warmup, 0))
		}
		if err := e.setMembers(next); err != nil {
			e.fail(err)
		}
	})
}

// deployEnd is when the last deploy batch starts, plus one batch interval.
func (s StepsScenario) deployEnd(endpoints int) time.Duration {
	batches := (endpoints + s.DeployBatch - 1) / s.DeployBatch
	return s.DeployAt + time.Duration(batches)*s.DeployEvery
}

func stepResult(e *engine, sc *Scenario, st step, pc pool.Config) StepResult {
	s, ts := sc.Steps, e.ts
	r := StepResult{
		Step: st.id, Name: st.name, Title: st.title, Protocol: "h1", Subset: st.algorithm,
		Pools:       map[poolScope]string{perLoop: "per (endpoint, loop)", perGateway: "per endpoint", perRequest: "per endpoint, Connection: close"}[st.scope],
		IdleTimeout: pc.IdleTimeout, Series: ts,
	}
	if st.h2 {
		r.Protocol = "h2"
	}
	steadyOpen := window(ts.Open, s.SteadyFrom, s.SteadyTo)
	steadyCreated := window(ts.Created, s.SteadyFrom, s.SteadyTo)
	deploy := window(ts.Created, s.DeployAt, s.deployEnd(sc.Fleet.Endpoints))
	r.OpenPeak = peak(ts.Open)
	r.OpenSteady = median(steadyOpen)
	r.OriginOpenSteady = median(window(ts.OriginOpen, s.SteadyFrom, s.SteadyTo))
	r.CreatedSteady = round2(sum(steadyCreated) / float64(len(steadyCreated)))
	r.CreatedPeak = peak(ts.Created)
	r.CreatedDeployPeak = peak(deploy)
	r.CreatedDeploy = sum(deploy)
	r.CreatedTotal = e.tally.Created()
	r.ClosedBy = map[string]int64{}
	for _, reason := range pool.CloseReasons() {
		if n := e.tally.Closed(reason); n > 0 {
			r.ClosedBy[reason.String()] = n
		}
	}
	r.Latency = percentiles(concat(e.rec.lat))
	r.Requests, r.Errors, r.Shed = e.rec.arrivals, e.rec.errors, e.rec.shedTotal()
	return r
}

func concat(parts [][]float64) []float64 {
	var out []float64
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
