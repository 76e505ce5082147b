package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/corput/corput/internal/drill"
	"github.com/corput/corput/internal/progress"
)

func init() {
	register(command{name: "drill", summary: "fault drills against a real gateway: " + strings.Join(drill.Names(), ", "), run: runDrill})
}

// runDrill is `corput drill NAME [--duration D] [--rate N] [--origins N]
// [--pool KEYS] [--seed S] [--json] [--log]`. Exit 0 when every check
// passed, 1 when one failed (or the drill could not run), 2 for bad usage.
func runDrill(args []string, stdout, stderr io.Writer) int {
	usage := []string{
		"usage: corput drill NAME [--duration D] [--rate N] [--origins N] [--pool KEYS] [--seed S] [--fast-path=false] [--json] [--log]",
		"",
		"Runs a gateway and test origins on loopback, sends open-loop load with the 70/30 mix,",
		"injects a fault and prints what clients saw and what the gateway did. Drills:",
	}
	for _, n := range drill.Names() {
		usage = append(usage, fmt.Sprintf("  %-10s %s", n, drill.Summary(n)))
	}
	usage = append(usage, "", "The soak drill is meant to run long: corput drill soak --duration 10m.", "")
	fs := flagSet("corput drill", stderr, usage...)
	var o drill.Options
	fs.DurationVar(&o.Duration, "duration", 0, "how long load runs (default: the drill's short version)")
	fs.Float64Var(&o.Rate, "rate", 0, "mean arrivals per second (default: the drill's)")
	fs.IntVar(&o.Origins, "origins", 0, "endpoints behind the gateway (crash, blackhole; default 10)")
	fs.StringVar(&o.Pool, "pool", "", "override pool keys of the gateway, e.g. \"over_cap: reject, acquire_timeout: 100ms\"")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the arrival schedule, the class sequence and the gateway")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	logs := fs.Bool("log", false, "show the gateway's log on stderr")
	fastPath := fs.Bool("fast-path", true, "serve clients on the fast path (false: net/http's server, downstream.fast_path: false)")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if code, ok := parseFlags(fs, args); !ok {
			return code
		}
		fmt.Fprintln(stderr, "corput drill: name a drill:", strings.Join(drill.Names(), ", "))
		return 2
	}
	name := args[0]
	if code, ok := parseFlags(fs, args[1:]); !ok {
		return code
	}
	if drill.Summary(name) == "" {
		fmt.Fprintf(stderr, "corput drill: unknown drill %q; choose one of %s\n", name, strings.Join(drill.Names(), ", "))
		return 2
	}
	o.NetHTTP = !*fastPath
	if *logs {
		o.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	return drillRun(name, o, *asJSON, stdout, stderr)
}

// drillRun runs the drill name until it ends or SIGINT or SIGTERM, and
// prints its result: as JSON, or as text after a progress bar.
func drillRun(name string, opts drill.Options, asJSON bool, stdout, stderr io.Writer) int {
	var bar *progress.Bar
	if !asJSON {
		opts.Progress = func(elapsed, total time.Duration) {
			if bar == nil {
				bar = progress.New(stdout, "drill "+name, int(total/time.Second))
			}
			bar.Set(int(elapsed / time.Second))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := drill.Run(ctx, name, opts)
	bar.Done()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "corput", err)
		if res == nil {
			return 1 // the drill could not run (ports, files)
		}
	}
	if asJSON {
		if err := printJSON(stdout, res); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	} else {
		res.Format(stdout)
	}
	if !res.OK() {
		return 1
	}
	return 0
}
