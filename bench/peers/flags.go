package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/corput/corput/bench/peers/internal/proxies"
	"github.com/corput/corput/bench/peers/internal/results"
	"github.com/corput/corput/bench/peers/internal/scenarios"
)

// parseOptions reads the flags into the scenarios' options and checks
// them; an error names the flag and what it wants.
func parseOptions(args []string, stderr io.Writer) (scenarios.Options, error) {
	var o scenarios.Options
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Corput, "corput", "", "corput `BINARY` (default: go build ./cmd/corput into OUT/bin)")
	fs.StringVar(&o.Balancer, "corput-balancer", proxies.DefaultBalancer, "corput's origins[].balancer `YAML` flow mapping (default: corput's defaults written out)")
	fs.StringVar(&o.Downstream, "corput-downstream", "", "corput's downstream `YAML` flow mapping, e.g. '{fast_path: false}' (default: none, corput's defaults)")
	fs.StringVar(&o.Out, "out", "bench-out", "output `DIR`: peers.json, peers.md, and peers-run/ with configs and logs")
	proxyList := fs.String("proxies", "corput,nginx,haproxy,caddy", "proxies to compare, in the order runs alternate")
	// raw_tls costs what raw costs (a wrk run per proxy, no direct run):
	// about 45 s a round of the default run's 7 minutes. spread is not in
	// the default: it opens 800 listeners and runs three loads per proxy.
	scenarioList := fs.String("scenarios", "raw,raw_tls,skewed,cold_join,overhead", "scenarios to run (connections are counted during raw, skewed and cold_join); spread, tracing, h2_streams, h2_cpu, tls_origins and many_endpoints run only when named")
	fs.IntVar(&o.Rounds, "rounds", 1, "runs of each scenario per proxy; the median round is reported")
	fs.IntVar(&o.RawRounds, "raw-rounds", 0, "runs of the raw scenario per proxy (0: --rounds); every round is reported, the median judged")
	fs.IntVar(&o.TLS.Origins, "tls-origins", 4, "tls_origins: origin processes")
	fs.IntVar(&o.TLS.Listeners, "tls-listeners", 4, "tls_origins: mTLS listeners (endpoints) per origin process")
	fs.StringVar(&o.TLS.CorputProtocol, "tls-corput-protocol", "auto", "tls_origins, many_endpoints: corput's protocol to the TLS origins: auto (h2 by ALPN, the default), h1 or h2; h1 measures what the origins' HTTP/2 server adds")
	fs.IntVar(&o.Many.Origins, "many-origins", 4, "many_endpoints: origin processes")
	fs.IntVar(&o.Many.Listeners, "many-listeners", 16, "many_endpoints: mTLS listeners (endpoints) per origin process")
	fs.DurationVar(&o.Many.Warmup, "many-warmup", 20*time.Second, "many_endpoints: load before the counted window")
	fs.DurationVar(&o.Many.Window, "many-window", 60*time.Second, "many_endpoints: the counted window (well inside corput's 10 min max_lifetime)")
	fs.BoolVar(&o.Forwarded, "forwarded-headers", true, "nginx and HAProxy add X-Forwarded-For, -Proto and -Host as corput and Caddy do (the same work at the origins); false runs their bare configs")
	fs.IntVar(&o.OriginProcs, "origin-procs", 1, "GOMAXPROCS of each origin process (0: Go's default, one per CPU); the origins stand in for services on other machines, so each keeps to one processor and leaves the rest to the proxy under test")
	fs.BoolVar(&o.Install, "install", true, "apt-get install haproxy, nginx-light, caddy and wrk (and openssl for raw_tls, nghttp2-client's h2load for spread) when missing")
	fs.BoolVar(&o.Verbose, "v", false, "print a line per run on stderr")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the load's arrivals and classes")
	fs.DurationVar(&o.RawDuration, "raw-duration", 10*time.Second, "raw test duration (wrk -d)")
	fs.IntVar(&o.RawConns, "raw-conns", 64, "raw test connections (wrk -c)")
	fs.DurationVar(&o.SkewDuration, "skewed-duration", 20*time.Second, "skewed test duration")
	fs.Float64Var(&o.Rate, "rate", 300, "open-loop rate of the skewed and cold-join tests, req/s")
	fs.DurationVar(&o.JoinAfter, "join-after", 5*time.Second, "cold join: load before the fifth origin starts")
	fs.DurationVar(&o.JoinWindow, "join-window", 75*time.Second, "cold join: how long the fifth origin is watched (its peaks over its first 30 s, its share from 60 s on)")
	fs.DurationVar(&o.OvDuration, "overhead-duration", 10*time.Second, "overhead test duration per target")
	fs.Float64Var(&o.OvRate, "overhead-rate", 0, "overhead test rate, req/s (0: half of corput's raw req/s in this run)")
	fs.IntVar(&o.Spread.Origins, "spread-origins", 8, "spread: origin processes")
	fs.IntVar(&o.Spread.Listeners, "spread-listeners", 100, "spread: listeners (endpoints) per origin process")
	fs.IntVar(&o.Spread.Loops, "spread-loops", 16, "spread: corput's loops")
	fs.DurationVar(&o.Spread.Duration, "spread-duration", 10*time.Second, "spread: duration of each wrk load")
	fs.IntVar(&o.Spread.Conns, "spread-conns", 256, "spread: connections of the first wrk load")
	fs.IntVar(&o.Spread.FewConns, "spread-few-conns", 4, "spread: connections of the last wrk load")
	fs.IntVar(&o.Spread.Streams, "spread-streams", 100, "spread: concurrent streams of the h2load load's one connection")
	fs.IntVar(&o.Spread.H2Requests, "spread-h2-requests", 40000, "spread: requests of the h2load load")
	bindH2Flags(fs, &o.H2)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.Proxies = splitList(*proxyList)
	o.Scenarios = splitList(*scenarioList)
	return o, validate(o)
}

// validate checks the options parseOptions read.
func validate(o scenarios.Options) error {
	for _, s := range o.Scenarios {
		switch s {
		case results.ScRaw, results.ScRawTLS, results.ScSkewed, results.ScColdJoin, results.ScOverhead, results.ScSpread, results.ScTracing,
			results.ScH2Streams, results.ScH2CPU, results.ScTLSOrigins, results.ScManyEndpoints:
		default:
			return fmt.Errorf("--scenarios: unknown scenario %q: want raw, raw_tls, skewed, cold_join, overhead, spread, tracing, h2_streams, h2_cpu, tls_origins or many_endpoints", s)
		}
	}
	if o.Rounds < 1 {
		return fmt.Errorf("--rounds %d: want 1 or more", o.Rounds)
	}
	if o.RawRounds < 0 {
		return fmt.Errorf("--raw-rounds %d: want 0 (--rounds) or more, e.g. 5", o.RawRounds)
	}
	if o.Rate <= 0 {
		return fmt.Errorf("--rate %g: want a positive rate, e.g. 300", o.Rate)
	}
	if err := atLeastOne(
		flagInt{"--spread-origins", o.Spread.Origins}, flagInt{"--spread-listeners", o.Spread.Listeners}, flagInt{"--spread-loops", o.Spread.Loops},
		flagInt{"--spread-conns", o.Spread.Conns}, flagInt{"--spread-few-conns", o.Spread.FewConns}, flagInt{"--spread-streams", o.Spread.Streams},
		flagInt{"--spread-h2-requests", o.Spread.H2Requests}, flagInt{"--tls-origins", o.TLS.Origins}, flagInt{"--tls-listeners", o.TLS.Listeners},
		flagInt{"--many-origins", o.Many.Origins}, flagInt{"--many-listeners", o.Many.Listeners}); err != nil {
		return err
	}
	switch o.TLS.CorputProtocol {
	case "auto", "h1", "h2":
	default:
		return fmt.Errorf("--tls-corput-protocol %q: want auto, h1 or h2", o.TLS.CorputProtocol)
	}
	if err := validateH2(o.H2); err != nil {
		return err
	}
	if o.Spread.Duration < time.Second {
		return fmt.Errorf("--spread-duration %v: want at least 1s (wrk counts whole seconds)", o.Spread.Duration)
	}
	if o.OriginProcs < 0 {
		return fmt.Errorf("--origin-procs %d: want 0 (Go's default) or a processor count, e.g. 1", o.OriginProcs)
	}
	return nil
}

// flagInt is a count flag's name and value.
type flagInt struct {
	name string
	n    int
}

// atLeastOne checks that every count flag is 1 or more.
func atLeastOne(vs ...flagInt) error {
	for _, v := range vs {
		if v.n < 1 {
			return fmt.Errorf("%s %d: want 1 or more", v.name, v.n)
		}
	}
	return nil
}

// bindH2Flags defines the h2 scenarios' flags on fs.
func bindH2Flags(fs *flag.FlagSet, o *scenarios.H2Options) {
	fs.IntVar(&o.Origins, "h2-origins", 4, "h2_streams, h2_cpu: TLS origin processes (h2 by ALPN)")
	fs.IntVar(&o.Streams, "h2-streams", 60000, "h2_streams: concurrent long requests (seed 002's G-1: 60,000)")
	fs.IntVar(&o.PerConn, "h2-per-conn", 100, "h2_streams: streams per downstream h2c connection (HAProxy's default limit is 100)")
	fs.DurationVar(&o.Ramp, "h2-ramp", 60*time.Second, "h2_streams: the requests start evenly over this")
	fs.DurationVar(&o.Hold, "h2-hold", 90*time.Second, "h2_streams: the origins hold each request this long (more than --h2-ramp, so all are in flight at once)")
	fs.DurationVar(&o.CPUDuration, "h2-cpu-duration", 10*time.Second, "h2_cpu: measured wrk run")
	fs.IntVar(&o.CPUConns, "h2-cpu-conns", 64, "h2_cpu: wrk connections")
	fs.StringVar(&o.CorputPool, "h2-corput-pool", "", "h2_streams, h2_cpu: corput's origins[].pool `YAML` flow mapping, e.g. '{acquire_timeout: 1s}' (default: none, corput's defaults)")
}

// validateH2 checks the h2 flags.
func validateH2(o scenarios.H2Options) error {
	if err := atLeastOne(flagInt{"--h2-origins", o.Origins}, flagInt{"--h2-streams", o.Streams}, flagInt{"--h2-per-conn", o.PerConn}, flagInt{"--h2-cpu-conns", o.CPUConns}); err != nil {
		return err
	}
	if o.Hold <= o.Ramp {
		return fmt.Errorf("--h2-hold %v: want more than --h2-ramp %v, or the first requests end before the last start", o.Hold, o.Ramp)
	}
	if o.CPUDuration < time.Second {
		return fmt.Errorf("--h2-cpu-duration %v: want at least 1s (wrk counts whole seconds)", o.CPUDuration)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
