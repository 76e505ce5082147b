package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/corput/corput/internal/loadgen"
	"github.com/corput/corput/internal/progress"
	"github.com/corput/corput/internal/workload"
)

func init() {
	register(command{name: "load", summary: "open-loop Poisson load with the workload mix; prints p50/p90/p99/max", run: runLoad})
}

// runLoad is `corput load`. Exit 0 with a report (Ctrl-C prints the partial
// one), 2 for bad flags or a refused (uniform) workload.
func runLoad(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("corput load", stderr,
		"usage: corput load --target URL --rate N --duration D [--workload NAME|FILE] [--json] [--seed S] [--raw]",
		"",
		"Each request goes to URL/<class> (e.g. /light, /heavy), arrivals Poisson at --rate.",
		"A workload without cost skew is refused ("+workload.CodeNoSkew+") unless --raw.")
	f := loadgen.BindFlags(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	opts, err := f.Options()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	var bar *progress.Bar
	if !f.JSON() {
		bar = progress.New(stdout, fmt.Sprintf("load %g req/s", opts.Rate), int(opts.Duration/time.Second))
		opts.Progress = func(p loadgen.Progress) { bar.Set(int(p.Elapsed / time.Second)) }
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := loadgen.Run(ctx, opts)
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, err) // Run fails only on options, a uniform mix included
		return 2
	}
	bar.Done()
	if f.JSON() {
		if err := printJSON(stdout, rep); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	rep.Format(stdout)
	return 0
}
