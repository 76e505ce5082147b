package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/corput/corput/internal/lab"
	"github.com/corput/corput/internal/lab/live"
)

func init() {
	register(command{name: "lab", summary: "measure connections, churn and tail latency of every technique; write a report with plots", run: runLab})
}

// runLab is `corput lab [--scenario NAME] [--out DIR] [--sim|--live]
// [--scale small|full] [--seed N]`. It exits 0 when every check passes, 1
// when a check fails or the run breaks, 2 on a usage error. The reload
// scenario exists only live: `--scenario reload` implies --live; with
// --live, `--scenario steps` or `reload` runs that part alone.
func runLab(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("corput lab", stderr,
		"usage: corput lab [--scenario NAME] [--out DIR] [--sim|--live] [--scale small|full] [--seed N]",
		"\nRuns the experiments on an embedded scenario, prints the comparison tables and one",
		"PASS/FAIL line per check, and writes the report to DIR (see docs/lab.md).")
	scenario := fs.String("scenario", "default", "`NAME` of the experiments to run: default (all of them) or one of "+strings.Join(lab.Experiments(), ", ")+
		"; opt-in: "+lab.ExpPayments+" (seed 002's drill: 80 pods, 36,000 req/s, 10 killed; every policy)"+
		"; live: steps or "+live.ScenarioReload+" (reloads vs a restart of one gateway; implies --live)")
	out := fs.String("out", "./lab-out", "report `DIR`: results.json, report.md, report.html, PNG plots")
	liveMode := fs.Bool("live", false, "run the steps and the reload experiment over real sockets with corput serve and corput origin processes")
	simMode := fs.Bool("sim", true, "run the simulator on virtual time")
	scale := fs.String("scale", string(lab.ScaleSmall), "`small` (10 gateways × 16 loops × 800 endpoints) or full (100 × 16 × 800)")
	seed := fs.Uint64("seed", 1, "`N` seeds every draw: the same seed gives the same figures")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	sc, err := lab.ParseScale(*scale)
	if err != nil {
		fmt.Fprintf(stderr, "corput lab: %v\n", err)
		return 2
	}
	if *scenario == live.ScenarioReload {
		simSet := false
		fs.Visit(func(f *flag.Flag) { simSet = simSet || (f.Name == "sim" && *simMode) })
		if simSet && !*liveMode {
			fmt.Fprintf(stderr, "corput lab: --scenario %s runs real processes: use --live, not --sim\n", live.ScenarioReload)
			return 2
		}
		*liveMode = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *liveMode {
		return runLabLive(ctx, live.Options{Out: *out, Seed: *seed, Stdout: stdout, Scenario: *scenario}, stderr)
	}
	return runLabSim(ctx, lab.Options{Scenario: *scenario, Scale: sc, Seed: *seed, Out: *out, Stdout: stdout, Progress: stderr}, stderr)
}

// runLabLive runs the live lab; o.Scenario selects a live part, and the
// simulator's other names do not apply (they run both).
func runLabLive(ctx context.Context, o live.Options, stderr io.Writer) int {
	if o.Scenario != live.ScenarioSteps && o.Scenario != live.ScenarioReload {
		o.Scenario = live.ScenarioAll
	}
	if err := live.Run(ctx, o); err != nil {
		fmt.Fprintf(stderr, "corput lab --live: %v\n", err)
		return 1
	}
	return 0
}

// runLabSim runs the simulator's experiments after a line that names
// them (an unknown scenario is a usage error, before anything runs).
func runLabSim(ctx context.Context, opts lab.Options, stderr io.Writer) int {
	probe := lab.DefaultScenario(opts.Scale, opts.Seed)
	if err := probe.Select(opts.Scenario); err != nil {
		fmt.Fprintf(stderr, "corput lab: %v\n", err)
		return 2
	}
	f := probe.Fleet
	fmt.Fprintf(opts.Stdout, "corput lab: scale %s (%d gateways × %d loops × %d endpoints), seed %d, experiments: %s\n\n",
		opts.Scale, f.Gateways, f.Loops, f.Endpoints, opts.Seed, strings.Join(probe.Run, ", "))
	res, err := lab.Run(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "corput lab: %v\n", err)
		return 1
	}
	if !res.Passed() {
		return 1
	}
	return 0
}
