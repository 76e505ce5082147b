package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/progress"
	"github.com/corput/corput/internal/subset"
)

// Options are a lab run's knobs (the flags of `corput lab`).
type Options struct {
	// Scenario is "default" (every experiment) or one experiment's name.
	Scenario string
	Scale    Scale
	Seed     uint64
	// Out is the report directory; "" writes nothing.
	Out string
	// Stdout receives the tables and the check lines; nil: none.
	Stdout io.Writer
	// Progress shows a progress bar when it is a terminal; nil: none.
	Progress io.Writer
	// Parallel is how many simulations run at once; 0: GOMAXPROCS.
	Parallel int
}

// Run runs the embedded scenario chosen by o, writes the report to o.Out
// and prints the tables and checks to o.Stdout.
func Run(ctx context.Context, o Options) (*Results, error) {
	sc := DefaultScenario(o.Scale, o.Seed)
	if err := sc.Select(o.Scenario); err != nil {
		return nil, err
	}
	return RunScenario(ctx, sc, o)
}

// RunScenario is Run on a given scenario.
func RunScenario(ctx context.Context, sc Scenario, o Options) (*Results, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if o.Out != "" {
		if err := os.MkdirAll(o.Out, 0o755); err != nil {
			return nil, fmt.Errorf("lab: --out %s: %w", o.Out, err)
		}
	}
	res, err := Simulate(ctx, sc, o.Parallel, o.Progress)
	if err != nil {
		return nil, err
	}
	if o.Out != "" {
		if err := WriteReport(o.Out, res); err != nil {
			return res, err
		}
	}
	if o.Stdout != nil {
		res.Print(o.Stdout, o.Out)
	}
	return res, nil
}

// job is one independent simulation. It calls tick once per virtual
// second (or unit of work); weight, its cost relative to the others, is
// what a tick is worth on the progress bar.
type job struct {
	ticks, weight int
	run           func(ctx context.Context, tick func()) error
}

// simJob is a simulation of d whose cost per virtual second is about that
// of cost requests.
func simJob(d time.Duration, cost float64, run func(ctx context.Context, tick func()) error) job {
	return job{ticks: int(d / time.Second), weight: max(1, int(cost/100)), run: run}
}

// Simulate runs the scenario's experiments, parallel ones at most parallel
// at a time, and evaluates the checks. Every simulation is single-threaded
// and seeded, so the results do not depend on parallel.
func Simulate(ctx context.Context, sc Scenario, parallel int, progressTo io.Writer) (*Results, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	res := &Results{Scenario: sc}
	var jobs []job
	fleetRate := sc.Fleet.RatePerGateway * float64(sc.Fleet.Gateways)
	if sc.Runs(ExpSteps) {
		res.Steps = make([]StepResult, len(steps))
		for i, st := range steps {
			// Without subsets every loop keeps a pool per endpoint: the
			// event queue holds a timer per pool, which triples the cost.
			cost := fleetRate
			if st.scope == perLoop && st.algorithm == subset.NameNone {
				cost *= 3
			}
			jobs = append(jobs, simJob(sc.Steps.Duration, cost, func(ctx context.Context, tick func()) (err error) {
				res.Steps[i], err = runStep(ctx, &sc, st, tick)
				return err
			}))
		}
	}
	if sc.Runs(ExpHerd) {
		res.Herd = make([]HerdResult, len(herdVariants))
		for i, v := range herdVariants {
			jobs = append(jobs, simJob(sc.Herd.Duration, fleetRate, func(ctx context.Context, tick func()) (err error) {
				res.Herd[i], err = runHerd(ctx, &sc, v, tick)
				return err
			}))
		}
	}
	var lb []LBResult
	if sc.Runs(ExpLB) {
		runs := lbRuns()
		lb = make([]LBResult, len(runs))
		for i, run := range runs {
			jobs = append(jobs, simJob(sc.LB.Duration, sc.LB.Rate, func(ctx context.Context, tick func()) (err error) {
				lb[i], err = runLB(ctx, &sc, run, tick)
				return err
			}))
		}
	}
	if sc.Runs(ExpSubsets) {
		jobs = append(jobs, job{ticks: sc.Subsets.Trials, weight: 10, run: func(_ context.Context, tick func()) error {
			rep, err := subset.Compare(subset.Scenario{
				Endpoints: sc.Fleet.Endpoints, Fleet: subset.Fleet{Gateways: sc.Fleet.Gateways, Loops: sc.Fleet.Loops},
				Trials: sc.Subsets.Trials, Seed: sc.Seed,
				Progress: func(int, int) { tick() },
			}, subset.Algorithms())
			res.Subsets = &rep
			return err
		}})
	}
	if sc.Runs(ExpResilience) {
		jobs = append(jobs, job{ticks: len(sc.Resilience.Sizes), weight: 10, run: func(_ context.Context, tick func()) (err error) {
			res.Resilience, err = runResilience(&sc, tick)
			return err
		}})
	}
	if sc.Runs(ExpSpread) {
		runs := spreadRuns()
		res.Spread = make([]SpreadResult, len(runs))
		for i, run := range runs {
			jobs = append(jobs, simJob(sc.Spread.Duration, sc.Spread.Rate, func(ctx context.Context, tick func()) (err error) {
				res.Spread[i], err = runSpread(ctx, &sc, run, tick)
				return err
			}))
		}
	}
	if sc.Runs(ExpFleet) {
		fr := sc.FleetRings
		runs := fleetRingsRuns(fr)
		res.FleetRings = make([]FleetRingsResult, len(runs))
		for i, run := range runs {
			jobs = append(jobs, simJob(fr.Duration, fr.RatePerGateway*float64(fr.Gateways), func(ctx context.Context, tick func()) (err error) {
				res.FleetRings[i], err = runFleetRings(ctx, &sc, run, tick)
				return err
			}))
		}
	}
	if sc.Runs(ExpPayments) {
		runs := paymentsRuns()
		res.Payments = make([]PaymentsResult, len(runs))
		for i, run := range runs {
			jobs = append(jobs, simJob(sc.Payments.Duration+sc.Payments.Timeout+time.Second, sc.Payments.Rate, func(ctx context.Context, tick func()) (err error) {
				res.Payments[i], err = runPayments(ctx, &sc, run, tick)
				return err
			}))
		}
	}
	if err := runJobs(ctx, jobs, parallel, progressTo); err != nil {
		return nil, err
	}
	for _, r := range lb {
		if r.SlowStart {
			res.LB = append(res.LB, r)
		} else {
			res.LBWithoutSlowStart = append(res.LBWithoutSlowStart, r)
		}
	}
	if lb != nil {
		res.ColdStart = coldStartRows(lb)
	}
	res.evaluate()
	return res, nil
}

// coldStartRows orders the cold-start figures: per service-time model,
// peak_ewma and least_work with and without slow start first, then the
// others.
func coldStartRows(lb []LBResult) []ColdStartResult {
	var rows []ColdStartResult
	for _, r := range lb {
		rows = append(rows, ColdStartResult{Policy: r.Policy, SlowStart: r.SlowStart, Model: r.Model, MaxConcurrency: r.ColdMaxConcurrency})
	}
	rank := func(c ColdStartResult) int {
		k := 2
		switch c.Policy {
		case string(balance.PeakEWMA):
			k = 0
		case string(balance.LeastWork):
			k = 1
		}
		if c.Model != modelConstant {
			k += 3
		}
		return k
	}
	slices.SortStableFunc(rows, func(a, b ColdStartResult) int { return rank(a) - rank(b) })
	return rows
}

// runJobs runs jobs, the heaviest first, on at most parallel goroutines,
// and returns the first error (cancelling the rest).
func runJobs(ctx context.Context, jobs []job, parallel int, progressTo io.Writer) error {
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	total := 0
	for _, j := range jobs {
		total += j.ticks * j.weight
	}
	var bar *progress.Bar
	if progressTo != nil {
		bar = progress.New(progressTo, "corput lab", total)
	}
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return jobs[b].ticks*jobs[b].weight - jobs[a].ticks*jobs[a].weight })
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for range min(parallel, len(jobs)) {
		wg.Go(func() {
			for i := range next {
				j := jobs[i]
				if errs[i] = j.run(ctx, func() { bar.Add(j.weight) }); errs[i] != nil {
					cancel()
				}
			}
		})
	}
	for _, i := range order {
		next <- i
	}
	close(next)
	wg.Wait()
	bar.Done()
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
	return first
}
