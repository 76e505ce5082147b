// Package drill runs corput's reliability drills (docs/reliability.md): a real gateway
// (gateway.New) in front of real test origins (internal/origin) on
// loopback, under open-loop Poisson load with the seed's 70/30 workload
// (vegeta, paced by loadgen.NewPoisson), while a fault is injected:
//
//   - crash: an origin dies under load (its in-flight requests are cut, its
//     port refuses connections);
//   - blackhole: an origin accepts connections and never answers;
//   - overload: three times the origins' capacity;
//   - deploy: every origin restarts in turn, with and without reconnect
//     jitter across the gateway's pools;
//   - soak: mixed load for a long time (10 minutes from the command).
//
// Every drill measures what a client saw (requests sent, answered, lost —
// no answer before the client gave up —, statuses, X-Corput-Error reasons,
// p50/p90/p99/max latency, shed latency), what the gateway did (pending
// waiters, ejections, connections created) and what the process kept
// (goroutines, file descriptors, RSS). A Result carries Checks: the bounds
// the drill must keep. Checks that depend on the machine (shed latency under
// 5 ms, goodput against capacity, RSS) are marked Machine; tests assert only
// the others, which hold on any machine: counts, bounds and "nothing lost".
//
// Time is the wall clock: a drill is an experiment on real sockets. The
// load's arrival schedule and class sequence are fixed by the seed.
package drill

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Options tune a drill run; the zero value runs the short (CI) version.
type Options struct {
	// Duration is how long load runs; 0 takes the drill's short default
	// (a few seconds; soak: 20s).
	Duration time.Duration
	// Rate is the mean arrival rate per second; 0 takes the drill's
	// default (overload derives it from the origins' capacity).
	Rate float64
	// Origins is how many endpoints the gateway balances over; 0 takes
	// the drill's default (10 for crash and blackhole: losing one keeps
	// 90% healthy, above the 80% panic threshold).
	Origins int
	// Pool overrides the gateway's pool keys, e.g. "over_cap: reject" or
	// "acquire_timeout: 100ms, max_connections: 8".
	Pool string
	// Seed fixes the arrival schedule, the class sequence and the
	// gateway's random choices.
	Seed uint64
	// Logger receives the gateway's log; nil discards it.
	Logger *slog.Logger
	// Progress, when set, is called about once a second with the load's
	// elapsed time and its planned duration.
	Progress func(elapsed, total time.Duration)
	// NetHTTP serves clients through net/http's server instead of the
	// fast path (downstream.fast_path: false).
	NetHTTP bool
	// Binary is the corput executable that fdflood runs as a separate
	// process; "" is this executable.
	Binary string
}

// Result is what one drill measured and the bounds it checked.
type Result struct {
	Drill   string   `json:"drill"`
	Command string   `json:"command"`
	Setup   Setup    `json:"setup"`
	Faults  []Fault  `json:"faults"`
	Load    Load     `json:"load"`
	Gateway Observed `json:"gateway"`
	Process Process  `json:"process"`
	// Deploy is the deploy drill's reconnect comparison.
	Deploy *Reconnects `json:"reconnects,omitempty"`
	// Flood is the fdflood drill's account.
	Flood  *Flood  `json:"flood,omitempty"`
	Checks []Check `json:"checks"`
}

// Setup is what the drill ran against.
type Setup struct {
	Origins        int     `json:"origins"`
	Workers        int     `json:"workers_per_origin"` // 0 = unlimited
	Loops          int     `json:"loops"`
	Rate           float64 `json:"rate_rps"`
	DurationS      float64 `json:"duration_s"`
	RequestTimeout string  `json:"request_timeout"`
	ClientTimeout  string  `json:"client_timeout"`
	// CapacityRPS is the origins' capacity (workers / mean service time),
	// when they have finite workers.
	CapacityRPS float64 `json:"capacity_rps,omitempty"`
	Gateway     string  `json:"gateway_config"` // the origin keys that differ from the defaults
	// Path is the path that served clients: "fast path" or "net/http path".
	Path string `json:"path"`
}

// Fault is one injected fault, timed from the start of load.
type Fault struct {
	AtS  float64 `json:"at_s"`
	What string  `json:"what"`
}

// Check is one bound a drill keeps.
type Check struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	OK   bool   `json:"ok"`
	// Machine marks a bound that depends on the machine (its speed, its
	// memory, the race detector): reported, never asserted by tests.
	Machine bool `json:"machine,omitempty"`
}

// OK reports whether every check passed.
func (r *Result) OK() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// Failed lists the checks that did not pass; machine-dependent ones only
// when withMachine is set.
func (r *Result) Failed(withMachine bool) []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.OK && (withMachine || !c.Machine) {
			out = append(out, c)
		}
	}
	return out
}

func (r *Result) check(name, want string, ok bool, got string, args ...any) {
	r.Checks = append(r.Checks, Check{Name: name, Want: want, Got: fmt.Sprintf(got, args...), OK: ok})
}

func (r *Result) machineCheck(name, want string, ok bool, got string, args ...any) {
	r.check(name, want, ok, got, args...)
	r.Checks[len(r.Checks)-1].Machine = true
}

// drill is one registered drill.
type drill struct {
	name, summary string
	short         time.Duration // default load duration
	run           func(ctx context.Context, o Options, r *Result) error
}

var drills = []drill{crashDrill, blackholeDrill, overloadDrill, deployDrill, soakDrill, fdfloodDrill}

// Names lists the drills in the order they are documented.
func Names() []string {
	out := make([]string, len(drills))
	for i, d := range drills {
		out[i] = d.name
	}
	return out
}

// Summary is a drill's one-line description.
func Summary(name string) string {
	for _, d := range drills {
		if d.name == name {
			return d.summary
		}
	}
	return ""
}

// Run runs the named drill. It fails only when the drill could not run
// (ports, bad options); a drill that ran returns its Result, whose Checks
// say whether the gateway kept its bounds.
func Run(ctx context.Context, name string, o Options) (*Result, error) {
	i := slices.IndexFunc(drills, func(d drill) bool { return d.name == name })
	if i < 0 {
		return nil, fmt.Errorf("drill %q: unknown; choose one of %s", name, strings.Join(Names(), ", "))
	}
	d := drills[i]
	if o.Duration < 0 || o.Rate < 0 {
		return nil, fmt.Errorf("drill %s: duration %v and rate %v must not be negative", name, o.Duration, o.Rate)
	}
	if o.Duration == 0 {
		o.Duration = d.short
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Result{Drill: name, Command: command(name, o)}
	before := sampleProcess()
	if err := d.run(ctx, o, r); err != nil {
		return nil, fmt.Errorf("drill %s: %w", name, err)
	}
	after := settle(before)
	r.Process.GoroutinesBefore, r.Process.GoroutinesAfter = before.goroutines, after.goroutines
	r.Process.FDsBefore, r.Process.FDsAfter = before.fds, after.fds
	r.check("goroutines return to baseline", fmt.Sprintf("≤ %d (before + %d)", before.goroutines+goroutineSlack, goroutineSlack),
		r.Process.GoroutinesAfter <= before.goroutines+goroutineSlack, "%d → %d", before.goroutines, r.Process.GoroutinesAfter)
	if before.fds >= 0 {
		r.check("file descriptors return to baseline", fmt.Sprintf("≤ %d", before.fds),
			r.Process.FDsAfter <= before.fds, "%d → %d", before.fds, r.Process.FDsAfter)
	}
	return r, ctx.Err()
}

func command(name string, o Options) string {
	s := "corput drill " + name + " --duration " + o.Duration.String()
	if o.Rate > 0 {
		s += fmt.Sprintf(" --rate %g", o.Rate)
	}
	if o.Origins > 0 {
		s += fmt.Sprintf(" --origins %d", o.Origins)
	}
	if o.Pool != "" {
		s += fmt.Sprintf(" --pool %q", o.Pool)
	}
	if o.Seed != 1 {
		s += fmt.Sprintf(" --seed %d", o.Seed)
	}
	if o.NetHTTP {
		s += " --fast-path=false"
	}
	return s
}
