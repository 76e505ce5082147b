package main

import (
	"fmt"
	"io"

	"github.com/corput/corput/internal/plan"
)

func init() {
	register(command{name: "plan", summary: "choose a subset size and predict connections, churn, resilience and handshake CPU", run: runPlan})
}

// runPlan is `corput plan --origins N --gateways G --loops K [--subset S]
// [--failures f] [--floor P] [--handshake-ms H] [--concurrency C]
// [--h2-streams M] [--lifetime D] [--health-interval I] [--trials T] [--seed X] [--json]`.
func runPlan(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("corput plan", stderr,
		"usage: corput plan --origins N --gateways G --loops K [--subset S] [--failures f] [--floor P] [--handshake-ms H] [--concurrency C] [--json]",
		"",
		"Recommends the smallest subset size that keeps --floor % of a loop's capacity with",
		"--failures endpoints of its subset down, and prints its connections, churn and handshake",
		"CPU next to no subsetting. Figures come from the subset engine (see docs/planner.md).")
	in := plan.Defaults
	in.Trials, in.Seed = defaultComparison.Trials, defaultComparison.Seed
	fs.IntVar(&in.Origins, "origins", 0, "`N` endpoints (origin servers) of the origin (required)")
	fs.IntVar(&in.Gateways, "gateways", 0, "`G` gateway instances (required)")
	fs.IntVar(&in.Loops, "loops", 0, "`K` loops per gateway (required)")
	fs.IntVar(&in.Subset, "subset", 0, "config subset.size `S` to plan for; 0 = recommend the smallest that keeps the floor")
	fs.IntVar(&in.Failures, "failures", in.Failures, "`f` endpoints of one subset that may fail together")
	fs.IntVar(&in.FloorPercent, "floor", in.FloorPercent, "`percent` of a loop's capacity that must be left with f endpoints failed")
	fs.Float64Var(&in.HandshakeMs, "handshake-ms", in.HandshakeMs, "CPU `ms` per TLS handshake, gateway and origin together")
	fs.IntVar(&in.Concurrency, "concurrency", in.Concurrency, "peak in-flight requests per loop to the origin (h1 needs one connection each)")
	fs.IntVar(&in.H2Streams, "h2-streams", in.H2Streams, "concurrent streams per h2 connection (SETTINGS_MAX_CONCURRENT_STREAMS)")
	fs.DurationVar(&in.Lifetime, "lifetime", in.Lifetime, "pool.max_lifetime: every connection is re-made this often; 0 = never")
	fs.DurationVar(&in.HealthInterval, "health-interval", in.HealthInterval, "health_check.interval: probes per endpoint per second are printed for it; 0 = no health checks")
	fs.IntVar(&in.Trials, "trials", in.Trials, "random memberships the churn is averaged over (as corput subsets)")
	fs.Uint64Var(&in.Seed, "seed", in.Seed, "seed of the memberships (as corput subsets)")
	asJSON := fs.Bool("json", false, "print the plan as JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	for _, req := range []struct {
		name string
		v    int
	}{{"origins", in.Origins}, {"gateways", in.Gateways}, {"loops", in.Loops}} {
		if req.v == 0 {
			fmt.Fprintf(stderr, "corput plan: --%s is required (e.g. --origins 800 --gateways 100 --loops 16)\n", req.name)
			return 2
		}
	}
	p, err := plan.Make(in)
	if err != nil {
		fmt.Fprintf(stderr, "corput plan: %v\n", err)
		return 2
	}
	return printResult("corput plan", *asJSON, p, p.WriteText, stdout, stderr)
}
