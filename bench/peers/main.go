// Command peers benchmarks corput beside HAProxy, nginx and Caddy on this
// machine, in one run, on the same origins (docs/performance.md):
//
//  1. raw: GET a tiny response with wrk -t2 -c64 for 10 s — req/s and p99;
//  2. raw_tls: the same with wrk speaking HTTPS/1.1 to each proxy, which
//     ends TLS (1.3, one throwaway P-256 certificate, TLS_AES_128_GCM_SHA256
//     where the proxy lets it be set; see internal/certs) and forwards to
//     the same cleartext origins — req/s, p99 and what each proxy
//     negotiated;
//  3. skewed: 4 origins × 8 workers, 70 % 15 ms / 30 % 140 ms, one origin
//     5× slower, 300 req/s open-loop Poisson for 20 s (internal/loadgen) —
//     p50/p90/p99/max and success ratio;
//  4. cold join: under the same load a fifth, cold origin (10× slow
//     decaying over 40 s) joins — the requests it got and its concurrency
//     in its first 30 s, from its own counters;
//  5. connections: TCP connections the origins accepted during raw, skewed
//     and cold join, per proxy (ground truth from the origin side);
//  6. overhead: open-loop raw GETs at half of corput's raw req/s, direct to
//     an origin and through each proxy — the p99 each proxy adds;
//  7. spread (only when asked for: --scenarios spread): 800 identical
//     endpoints (8 origin processes × 100 listeners), a 15 ms path, corput
//     with 16 loops; wrk -c256, one h2c connection with 100 streams
//     (h2load) and wrk -c4 through each proxy — how evenly the requests
//     spread over the endpoints (the origins' per-listener counts) and,
//     for corput, over its loops;
//  8. tracing (only when asked for: --scenarios tracing): corput against
//     itself with tracing off, at 1 % sampling and blackholed at 100 %,
//     under raw and overhead loads;
//  9. h2_streams, h2_cpu, tls_origins and many_endpoints (only when asked
//     for): HTTP/2 and mTLS to the origins.
//
// It installs what is missing with apt-get (haproxy, nginx-light, caddy,
// wrk, and openssl for raw_tls's probe), starts the origins (`corput
// origin`) once for every proxy, starts each proxy fresh for each run with
// an equivalent generated config, alternates the proxies within every
// scenario, and stops every process it started (each leads its own process
// group; Ctrl-C and errors included). It writes bench-out/peers.json and
// bench-out/peers.md and prints the tables with corput/peer ratios.
//
// Not a CI test: it installs servers and runs for minutes. wrk, the proxy
// and the origins share the machine's cores; that is the same for every
// proxy, so the ratios are fair, and the absolute figures are this
// machine's.
//
// This package only reads the flags and hands them to the scenarios. The
// parts live under internal/: proc (processes and /proc), certs (the TLS
// material), origins (`corput origin` and its counters), proxies (every
// proxy's config), load (wrk, h2load and the Go clients), scenarios (the
// runs) and results (peers.json, peers.md and the goals).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/corput/corput/bench/peers/internal/scenarios"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "peers:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := scenarios.Run(ctx, o, stdout, stderr)
	if res != nil && len(res.Scenarios) > 0 {
		if werr := res.Write(o.Out); werr != nil {
			fmt.Fprintln(stderr, "peers: write results:", werr)
		}
		fmt.Fprintln(stdout)
		for _, t := range res.Tables() {
			fmt.Fprintln(stdout, t.Text())
		}
		fmt.Fprintf(stdout, "wrote %s and %s\n", filepath.Join(o.Out, "peers.json"), filepath.Join(o.Out, "peers.md"))
	}
	if err != nil {
		fmt.Fprintln(stderr, "peers:", err)
		return 1
	}
	return 0
}
