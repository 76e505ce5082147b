package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/progress"
)

func init() {
	register(command{name: "origin", summary: "a test origin with a workload profile (classes, workers, warm-up, 5xx, h1/h2c/TLS)", run: runOrigin})
}

// runOrigin is `corput origin`: it serves until SIGINT or SIGTERM. The
// first line on stdout is "listening on URL"; on a terminal a status line
// follows, refreshed every second.
func runOrigin(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("corput origin", stderr,
		"usage: corput origin --listen ADDR [--listeners N] [--profile NAME] [--workers N] [--slowdown F] [--warmup 8x:40s] [--error-rate P] [--proto h1|h2c|tls]",
		"",
		"A request's class is the last segment of its path (/light, /heavy); any other path is a tiny immediate 200.",
		"GET "+origin.StatsPath+" is the ground truth as JSON. Profiles: "+strings.Join(origin.ProfileNames(), ", ")+".")
	f := origin.BindFlags(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	opts, err := f.Options()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	opts.ErrorLog = stderr
	srv, err := origin.Start(opts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer srv.Close()
	if err := f.WriteCA(srv); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintln(stdout, srv.Banner())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if progress.IsTerminal(stdout) {
		srv.ShowStatus(ctx, stdout)
	}
	<-ctx.Done()
	fmt.Fprintf(stdout, "\n%s\n", srv.Stats().Summary())
	return 0
}
