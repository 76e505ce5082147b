// Package live is the lab's live mode (`corput lab --live`): the steps that
// add the spec's connection-pool techniques one at a time (gw-04,
// docs/spec.md), at small scale over real sockets, with real `corput origin` and
// `corput serve` processes on loopback, counting upstream connections on
// both sides — at the origins (ground truth: TCP connections accepted and
// open) and from each gateway's /metrics
// (corput_upstream_connections_created_total and _open) — and plotting both.
//
// The steps (StepIDs) add one technique at a time: (0) a connection per
// request, (1) reuse through one shared pool per endpoint, (2) per-loop
// pools, the Zuul baseline of G×K×N connections, (3) HTTP/2 multiplexing,
// (4) Ringsteady subsetting, (5) an idle timeout tuned to the traffic's
// inter-request gap against an aggressive one. Each step starts G gateways
// with a generated config, waits for /readyz, drives open-loop Poisson load
// with the 70/30 mix (internal/loadgen) on one downstream connection per
// (gateway, loop), samples both sides every second, then stops the
// gateways and checks that the origins saw every connection close.
//
// The reload experiment (reload.go) then puts 10 configuration reloads
// (SIGHUP) of one gateway beside a restart of it under the same load, and
// checks that the reloads created no more upstream connections than a
// steady window of the same length, were all applied and failed no
// request. Options.Scenario runs either part alone.
//
// Invariants: the origins run for the whole run and their counters are
// read as differences, so a step counts only its own connections; the
// scraper removes its own connection from the origins' counts exactly;
// every child process leads its own process group and is stopped (SIGTERM,
// then SIGKILL) when a step ends, when the run fails and when ctx is
// cancelled. Results are figures measured on this machine in wall-clock
// time: they vary from run to run, and tests assert only on what the
// configuration fixes (connection counts), never on speed.
package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/corput/corput/internal/progress"
)

// Options configure a live run. Zero values take the defaults: 4 gateways ×
// 4 loops × 32 endpoints, subsets of 8, 320 requests/s, 15 s per step,
// every step, child processes of this executable.
type Options struct {
	Out    string    // output directory; created when missing
	Seed   uint64    // seeds the load and the origins' draws
	Stdout io.Writer // comparison tables; progress only on a terminal

	Gateways   int // G
	Loops      int // K, loops per gateway (step 1 uses 1)
	Endpoints  int // N, origins
	SubsetSize int // endpoints per loop in steps 4 and 5
	// Rate is the total request rate over the fleet, per second.
	Rate float64
	// StepDuration is how long each step's load runs.
	StepDuration time.Duration
	// Scenario is what runs: ScenarioAll ("" too) the steps, then the
	// reload experiment; ScenarioSteps or ScenarioReload one of them.
	Scenario string
	// Steps are the IDs to run, in order (see StepIDs); empty runs all.
	Steps []string
	// Reloads is the reload experiment's number of SIGHUPs, ReloadEvery
	// the time between two, RestartWindow how long the load runs from
	// the restart on (see reload.go).
	Reloads       int
	ReloadEvery   time.Duration
	RestartWindow time.Duration
	// Binary is the corput executable to run `corput origin` and
	// `corput serve` from; default os.Executable().
	Binary string
	// InProcess runs origins and gateways inside this process instead of
	// as child processes (tests). Traffic still crosses loopback sockets.
	InProcess bool
}

// Defaults, the small scale.
const (
	DefaultGateways     = 4
	DefaultLoops        = 4
	DefaultEndpoints    = 32
	DefaultSubsetSize   = 8
	DefaultRate         = 320
	DefaultStepDuration = 15 * time.Second
)

// Scenarios, for Options.Scenario.
const (
	ScenarioAll    = "default" // the steps, then the reload experiment
	ScenarioSteps  = "steps"   // the steps (StepIDs)
	ScenarioReload = "reload"  // reloads vs a restart of one gateway
)

// Scenarios lists the scenario names.
func Scenarios() []string { return []string{ScenarioAll, ScenarioSteps, ScenarioReload} }

// runs reports whether the options' scenario includes part (ScenarioSteps
// or ScenarioReload).
func (o Options) runs(part string) bool { return o.Scenario == ScenarioAll || o.Scenario == part }

// withDefaults fills zero fields and checks the rest.
func (o Options) withDefaults() (Options, error) {
	if o.Out == "" {
		o.Out = "lab-out"
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Gateways, DefaultGateways)
	def(&o.Loops, DefaultLoops)
	def(&o.Endpoints, DefaultEndpoints)
	def(&o.SubsetSize, DefaultSubsetSize)
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.StepDuration == 0 {
		o.StepDuration = DefaultStepDuration
	}
	if o.Scenario == "" {
		o.Scenario = ScenarioAll
	}
	def(&o.Reloads, DefaultReloads)
	if o.ReloadEvery == 0 {
		o.ReloadEvery = DefaultReloadEvery
	}
	if o.RestartWindow == 0 {
		o.RestartWindow = DefaultRestartWindow
	}
	var errs []error
	if !slices.Contains(Scenarios(), o.Scenario) {
		errs = append(errs, fmt.Errorf("scenario %q: want one of %v", o.Scenario, Scenarios()))
	}
	if o.Reloads < 1 {
		errs = append(errs, fmt.Errorf("reloads %d: want at least 1", o.Reloads))
	}
	if o.ReloadEvery < 200*time.Millisecond {
		errs = append(errs, fmt.Errorf("reload interval %v: want at least 200ms (each reload is waited for)", o.ReloadEvery))
	}
	if o.RestartWindow < 3*time.Second {
		errs = append(errs, fmt.Errorf("restart window %v: want at least 3s (a start, a drain and the load after them)", o.RestartWindow))
	}
	if o.Gateways < 1 || o.Loops < 1 || o.Endpoints < 1 {
		errs = append(errs, fmt.Errorf("gateways %d, loops %d, endpoints %d: each must be at least 1", o.Gateways, o.Loops, o.Endpoints))
	}
	if o.SubsetSize < 1 || o.SubsetSize > o.Endpoints {
		errs = append(errs, fmt.Errorf("subset size %d: want 1 to the number of endpoints (%d)", o.SubsetSize, o.Endpoints))
	}
	if o.Rate <= 0 {
		errs = append(errs, fmt.Errorf("rate %v: want a positive number of requests per second, e.g. 320", o.Rate))
	}
	if o.StepDuration < 2*time.Second {
		errs = append(errs, fmt.Errorf("step duration %v: want at least 2s (the steady figures use the second half)", o.StepDuration))
	}
	for _, id := range o.Steps {
		if !slices.Contains(StepIDs(), id) {
			errs = append(errs, fmt.Errorf("step %q: want one of %v", id, StepIDs()))
		}
	}
	if !o.InProcess && o.Binary == "" {
		bin, err := os.Executable()
		if err != nil {
			errs = append(errs, fmt.Errorf("finding the corput binary: %w (set Options.Binary)", err))
		}
		o.Binary = bin
	}
	return o, errors.Join(errs...)
}

// Results is live-results.json.
type Results struct {
	Mode        string  `json:"mode"` // "processes" or "in-process"
	Seed        uint64  `json:"seed"`
	Gateways    int     `json:"gateways"`
	Loops       int     `json:"loops"`
	Endpoints   int     `json:"endpoints"`
	SubsetSize  int     `json:"subset_size"`
	Rate        float64 `json:"rate"`
	StepSeconds float64 `json:"step_s"`
	WallSeconds float64 `json:"wall_s"`
	// Origins are the origins' addresses, endpoint i first.
	Origins []string     `json:"origins"`
	Steps   []StepResult `json:"steps"`
	// Reload is the reload experiment's; nil when it did not run.
	Reload *ReloadResult `json:"reload,omitempty"`
	// Checks are the must-show inequalities evaluated on the run's own
	// figures (the reload experiment's).
	Checks []Check `json:"checks,omitempty"`
}

// Check is one must-show inequality, evaluated on the run's figures.
type Check struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
}

// Status is PASS or FAIL.
func (c Check) Status() string {
	if c.Pass {
		return "PASS"
	}
	return "FAIL"
}

// ErrChecksFailed is Run's error when the run went through and wrote its
// report, but a check failed.
var ErrChecksFailed = errors.New("a check failed")

// StepResult is one step's measurements.
type StepResult struct {
	Step   Step   `json:"step"`
	Config string `json:"config"` // gateway 0's file
	// Gateways are the gateways' downstream addresses.
	Gateways []string `json:"gateways"`
	// Samples are taken every second from the start of the load to its
	// end (the last one once every answer is in).
	Samples []Sample `json:"samples"`
	// Rest is the sample once the fleet is at rest after the load, just
	// before the gateways stop.
	Rest    Sample  `json:"at_rest"`
	Summary Summary `json:"summary"`
	Load    Load    `json:"load"`
}

// Sample is both sides' counts at one instant. Accepted and Created count
// from the step's start (before its gateways were launched), so the
// pre-warming is included.
type Sample struct {
	T              float64 `json:"t_s"` // seconds since the load started
	OriginOpen     int64   `json:"origin_open"`
	OriginAccepted int64   `json:"origin_accepted"`
	MetricsOpen    float64 `json:"metrics_open"`
	MetricsCreated float64 `json:"metrics_created"`
}

// Summary condenses a step's samples. "Steady" is the second half of the
// load; "peak" the highest one-interval rate while the load ran.
type Summary struct {
	Pools     int     `json:"pools"`       // (endpoint, loop) pools across the fleet
	Floor     int     `json:"floor"`       // pools × prewarm: what stays open when idle
	MeanGapMS float64 `json:"mean_gap_ms"` // mean time between requests to one pool

	OriginOpen     float64 `json:"origin_open"` // mean, steady
	MetricsOpen    float64 `json:"metrics_open"`
	OriginOpenMax  int64   `json:"origin_open_max"`
	MetricsOpenMax float64 `json:"metrics_open_max"`

	OriginStart  int64   `json:"origin_created_at_start"` // before the load: pre-warming
	MetricsStart float64 `json:"metrics_created_at_start"`
	OriginTotal  int64   `json:"origin_created_total"` // start to rest
	MetricsTotal float64 `json:"metrics_created_total"`

	OriginSteady  float64 `json:"origin_created_per_s"`
	MetricsSteady float64 `json:"metrics_created_per_s"`
	OriginPeak    float64 `json:"origin_created_per_s_peak"`
	MetricsPeak   float64 `json:"metrics_created_per_s_peak"`

	// Closed counts the gateways' closes by reason at rest
	// (corput_upstream_connections_closed_total).
	Closed map[string]float64 `json:"closed_by_reason"`
	// LeftOpen is what the origins still had open after the gateways
	// stopped; anything but 0 is a leak.
	LeftOpen int64 `json:"left_open_after_stop"`
}

// Run runs the steps and the reload experiment (as o.Scenario says),
// prints the comparison tables and one PASS/FAIL line per check to
// o.Stdout and writes live-results.json, live-report.md and the plots to
// o.Out. A failed check is ErrChecksFailed, once everything is written.
func Run(ctx context.Context, o Options) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	var steps []Step
	if o.runs(ScenarioSteps) {
		steps = o.steps()
	}
	if len(o.Steps) > 0 {
		steps = slices.DeleteFunc(steps, func(s Step) bool { return !slices.Contains(o.Steps, s.ID) })
	}
	_, _, _, reloadLoad := o.reloadSpans()
	work := filepath.Join(o.Out, "live-run")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	r := &run{o: o, sc: newScraper(), res: Results{
		Mode: "processes", Seed: o.Seed, Gateways: o.Gateways, Loops: o.Loops, Endpoints: o.Endpoints,
		SubsetSize: o.SubsetSize, Rate: o.Rate, StepSeconds: o.StepDuration.Seconds(),
	}}
	defer r.sc.close()
	r.launch = &processes{bin: o.Binary, dir: work}
	if o.InProcess {
		r.launch, r.res.Mode = inProcess{}, "in-process"
	}
	what := fmt.Sprintf("%d gateways × %d loops × %d endpoints, %g req/s, %v per step, %d steps", o.Gateways, o.Loops, o.Endpoints, o.Rate, o.StepDuration, len(steps))
	if o.runs(ScenarioReload) {
		what += fmt.Sprintf(", then %d reloads %v apart and a restart of one gateway (%v of load)", o.Reloads, o.ReloadEvery, reloadLoad)
	}
	if len(steps) == 0 {
		what = fmt.Sprintf("%d reloads %v apart and a restart of one gateway of %d loops × %d endpoints, %g req/s (%v of load)",
			o.Reloads, o.ReloadEvery, o.Loops, o.Endpoints, o.Rate, reloadLoad)
	}
	fmt.Fprintf(o.Stdout, "corput lab --live: %s (%s); logs and configs in %s\n", what, r.res.Mode, work)
	began := time.Now()
	if err := r.startOrigins(ctx); err != nil {
		return errors.Join(err, stopAll(r.origins))
	}
	seconds := len(steps) * int(o.StepDuration/time.Second)
	if o.runs(ScenarioReload) {
		seconds += int(reloadLoad / time.Second)
	}
	r.bar = progress.New(o.Stdout, "lab --live", seconds)
	for _, st := range steps {
		res, err := r.step(ctx, st, work)
		if err != nil {
			r.bar.Done()
			return errors.Join(fmt.Errorf("step %s: %w", st.ID, err), stopAll(r.origins))
		}
		r.res.Steps = append(r.res.Steps, res)
		if r.bar == nil { // no terminal: a line per step instead of a bar
			s := res.Summary
			fmt.Fprintf(o.Stdout, "step %s: %.0f open at the origins / %.0f by /metrics, %.1f / %.1f created/s, %d requests\n",
				st.ID, s.OriginOpen, s.MetricsOpen, s.OriginSteady, s.MetricsSteady, res.Load.Requests)
		}
	}
	if o.runs(ScenarioReload) {
		res, err := r.reload(ctx, work)
		if err != nil {
			r.bar.Done()
			return errors.Join(fmt.Errorf("reload experiment: %w", err), stopAll(r.origins))
		}
		r.res.Reload = &res
		r.res.Checks = append(r.res.Checks, res.checks()...)
		if r.bar == nil {
			rl, rs := res.window(WindowReloads), res.window(WindowRestart)
			fmt.Fprintf(o.Stdout, "reload: %.0f of %d reloads applied; created %d / %.0f in the reload window, %d / %.0f in the restart window; %d and %d requests failed\n",
				res.ReloadsOK, res.Reloads, rl.OriginCreated, rl.MetricsCreated, rs.OriginCreated, rs.MetricsCreated, rl.Failed, rs.Failed)
		}
	}
	r.bar.Done()
	err = stopAll(r.origins)
	r.res.WallSeconds = time.Since(began).Seconds()
	if err := errors.Join(err, r.res.write(o.Out, o.Stdout)); err != nil {
		return err
	}
	for _, c := range r.res.Checks {
		if !c.Pass {
			return ErrChecksFailed
		}
	}
	return nil
}

// run is one live run's state.
type run struct {
	o       Options
	launch  launcher
	sc      *scraper
	origins []*part
	bar     *progress.Bar
	res     Results
}

func (r *run) startOrigins(ctx context.Context) error {
	for i := range r.o.Endpoints {
		p, err := r.launch.origin(ctx, i, r.o.Seed+uint64(i))
		if err != nil {
			return err
		}
		r.origins = append(r.origins, p)
		r.res.Origins = append(r.res.Origins, p.addr)
	}
	return nil
}

// step runs one step: gateways up and ready, load with sampling, gateways
// down, origins back to zero open connections.
func (r *run) step(ctx context.Context, st Step, work string) (StepResult, error) {
	o := r.o
	res := StepResult{Step: st}
	base, err := r.settle(ctx)
	if err != nil {
		return res, fmt.Errorf("before the step: %w", err)
	}
	var gws []*part
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		return stopAll(gws)
	}
	defer stop()
	for i := range o.Gateways {
		text := st.gatewayConfig(i, o.Gateways, r.res.Origins)
		if i == 0 {
			res.Config = string(text)
		}
		g, err := r.launch.gateway(ctx, fmt.Sprintf("step%s-gw%d", st.ID, i), text)
		if err != nil {
			return res, err
		}
		gws = append(gws, g)
		res.Gateways = append(res.Gateways, g.addr)
	}
	if err := r.waitReady(ctx, gws); err != nil {
		return res, err
	}

	start := time.Now()
	sample := func() error {
		s, err := r.sample(ctx, gws, base)
		s.T = time.Since(start).Seconds()
		res.Samples = append(res.Samples, s)
		return err
	}
	if err := sample(); err != nil {
		return res, err
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		var err error
		res.Load, err = drive(lctx, gws, st.Loops, o.Rate, o.StepDuration, o.Seed^uint64(len(r.res.Steps)+1), nil)
		done <- err
	}()
	// Samples fall on whole seconds of the load; one that comes late
	// (a busy machine) moves the next to the following whole second
	// rather than sampling twice in a row.
	next := time.NewTimer(time.Second)
	defer next.Stop()
	for loading := true; loading; {
		select {
		case err := <-done:
			if err != nil {
				return res, fmt.Errorf("load: %w", err)
			}
			loading = false
		case <-next.C:
			r.bar.Add(1)
			if err := sample(); err != nil {
				cancel()
				<-done
				return res, err
			}
			elapsed := time.Since(start)
			next.Reset(elapsed.Truncate(time.Second) + time.Second - elapsed)
		}
	}
	if err := sample(); err != nil {
		return res, err
	}
	if res.Rest, err = r.rest(ctx, gws, base, res.Samples[len(res.Samples)-1]); err != nil {
		return res, err
	}
	res.Rest.T = time.Since(start).Seconds()
	last, err := r.sc.gateways(ctx, gws)
	if err != nil {
		return res, err
	}
	if err := stop(); err != nil {
		return res, err
	}
	after, err := r.settle(ctx)
	res.Summary = summarize(st, o, res.Samples, res.Rest, last.Closed, after.Open)
	return res, err
}

// restInterval and restTimeout pace the wait for a fleet at rest.
const (
	restInterval = 250 * time.Millisecond
	restTimeout  = 5 * time.Second
)

// rest samples the fleet after its load until two samples in a row agree
// (idle timers may still be closing connections), for at most restTimeout,
// and returns the last one: the moment both sides can be compared exactly.
func (r *run) rest(ctx context.Context, gws []*part, base originCount, prev Sample) (Sample, error) {
	deadline := time.Now().Add(restTimeout)
	for {
		time.Sleep(restInterval)
		s, err := r.sample(ctx, gws, base)
		if err != nil || s == prev || time.Now().After(deadline) {
			return s, err
		}
		prev = s
	}
}

// sample reads both sides now, relative to the origins' counts base.
func (r *run) sample(ctx context.Context, gws []*part, base originCount) (Sample, error) {
	g, err := r.sc.gateways(ctx, gws)
	if err != nil {
		return Sample{}, err
	}
	oc, err := r.sc.origins(ctx, r.origins)
	if err != nil {
		return Sample{}, err
	}
	return Sample{OriginOpen: oc.Open, OriginAccepted: oc.Accepted - base.Accepted, MetricsOpen: g.Open, MetricsCreated: g.Created}, nil
}

// waitReady polls every gateway's /readyz (pools pre-warmed, config
// applied).
func (r *run) waitReady(ctx context.Context, gws []*part) error {
	deadline := time.Now().Add(startupTimeout)
	for _, g := range gws {
		for !r.sc.ready(ctx, g.admin) {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("%s: not ready within %v: %w", g.name, startupTimeout, context.Cause(ctx))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// settleTimeout bounds the wait for the origins to see every connection of
// a stopped step close.
const settleTimeout = 10 * time.Second

// settle waits until the origins have no connection open (but the
// scraper's), for at most settleTimeout, and returns their counts.
func (r *run) settle(ctx context.Context) (originCount, error) {
	deadline := time.Now().Add(settleTimeout)
	for {
		oc, err := r.sc.origins(ctx, r.origins)
		if err != nil || oc.Open == 0 || time.Now().After(deadline) {
			return oc, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
