package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/corput/corput/internal/origin"
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
	o := srv.Options()
	fmt.Fprintf(stdout, "listening on %s (profile %s, %s, workers %d, slowdown %g, warm-up %s, error rate %g%s)\n",
		srv.URL(), o.Profile, o.Proto, o.Workers, o.Slowdown, o.Warmup, o.ErrorRate, listenersNote(srv.Addrs()))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if file, ok := stdout.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
		showStatus(ctx, srv, stdout)
	}
	<-ctx.Done()
	st := srv.Stats()
	t := st.Total()
	fmt.Fprintf(stdout, "\nstopped: %d connections accepted, %d requests (%d ok, %d 500, %d cut), peak %d in service, %d waiting\n",
		st.Connections.Accepted, t.Total(), t.OK, t.Error, t.Canceled, st.Concurrency.Max, st.Queued.Max)
	return 0
}

// listenersNote is the listening line's tail for an origin with several
// listeners: ", 100 listeners 127.0.0.1:40100–40199".
func listenersNote(addrs []string) string {
	if len(addrs) < 2 {
		return ""
	}
	last := addrs[len(addrs)-1]
	last = last[strings.LastIndexByte(last, ':')+1:]
	return fmt.Sprintf(", %d listeners %s–%s", len(addrs), addrs[0], last)
}

// showStatus redraws one status line every second until ctx ends.
func showStatus(ctx context.Context, srv *origin.Server, w io.Writer) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var prev int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st := srv.Stats()
		n := st.Total().Total()
		fmt.Fprintf(w, "\r%d open / %d accepted connections, %d req/s, in service %d (peak %d), waiting %d, warm-up %.2fx   ",
			st.Connections.Open, st.Connections.Accepted, n-prev, st.Concurrency.Current, st.Concurrency.Max, st.Queued.Current, st.WarmupFactor)
		prev = n
	}
}
