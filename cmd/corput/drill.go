package main

import (
	"context"
	"encoding/json"
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
	duration := fs.Duration("duration", 0, "how long load runs (default: the drill's short version)")
	rate := fs.Float64("rate", 0, "mean arrivals per second (default: the drill's)")
	origins := fs.Int("origins", 0, "endpoints behind the gateway (crash, blackhole; default 10)")
	poolKeys := fs.String("pool", "", "override pool keys of the gateway, e.g. \"over_cap: reject, acquire_timeout: 100ms\"")
	seed := fs.Uint64("seed", 1, "seed of the arrival schedule, the class sequence and the gateway")
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
	opts := drill.Options{Duration: *duration, Rate: *rate, Origins: *origins, Pool: *poolKeys, Seed: *seed, NetHTTP: !*fastPath}
	if *logs {
		opts.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	var bar *progress.Bar
	if !*asJSON {
		shown := 0
		opts.Progress = func(elapsed, total time.Duration) {
			if bar == nil {
				bar = progress.New(stdout, "drill "+name, int(total/time.Second))
			}
			s := int(elapsed / time.Second)
			bar.Add(s - shown)
			shown = s
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
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
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
