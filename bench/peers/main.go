// Command peers benchmarks corput beside HAProxy, nginx and Caddy on this
// machine, in one run, on the same origins (docs/performance.md):
//
//  1. raw: GET a tiny response with wrk -t2 -c64 for 10 s — req/s and p99;
//  2. raw_tls: the same with wrk speaking HTTPS/1.1 to each proxy, which
//     ends TLS (1.3, one throwaway P-256 certificate, TLS_AES_128_GCM_SHA256
//     where the proxy lets it be set; see tls.go) and forwards to the same
//     cleartext origins — req/s, p99 and what each proxy negotiated;
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
//     for corput, over its loops (spread.go);
//  8. tracing (only when asked for: --scenarios tracing): corput against
//     itself with tracing off, at 1 % sampling and blackholed at 100 %,
//     under raw and overhead loads (tracing.go).
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
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/corput/corput/internal/progress"
)

// options are the runner's flags.
type options struct {
	corput     string
	balancer   string
	downstream string
	out        string
	proxies    []string
	scenarios  []string
	rounds     int
	rawRounds  int
	install    bool
	forwarded  bool
	verbose    bool
	seed       uint64

	rawDuration  time.Duration
	rawConns     int
	skewDuration time.Duration
	rate         float64
	joinAfter    time.Duration
	joinWindow   time.Duration
	ovDuration   time.Duration
	ovRate       float64
	originProcs  int

	spreadOrigins    int
	spreadListeners  int
	spreadLoops      int
	spreadDuration   time.Duration
	spreadConns      int
	spreadFewConns   int
	spreadStreams    int
	spreadH2Requests int

	h2                         h2Options // h2_streams, h2_cpu (h2streams.go)
	tlsOrigins, tlsListeners   int
	tlsCorputProtocol          string // tls_origins, many_endpoints: corput's origins[].protocol
	manyOrigins, manyListeners int
	manyWarmup, manyWindow     time.Duration
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.corput, "corput", "", "corput `BINARY` (default: go build ./cmd/corput into OUT/bin)")
	fs.StringVar(&o.balancer, "corput-balancer", defaultBalancer, "corput's origins[].balancer `YAML` flow mapping (default: corput's defaults written out)")
	fs.StringVar(&o.downstream, "corput-downstream", "", "corput's downstream `YAML` flow mapping, e.g. '{fast_path: false}' (default: none, corput's defaults)")
	fs.StringVar(&o.out, "out", "bench-out", "output `DIR`: peers.json, peers.md, and peers-run/ with configs and logs")
	proxies := fs.String("proxies", "corput,nginx,haproxy,caddy", "proxies to compare, in the order runs alternate")
	// raw_tls costs what raw costs (a wrk run per proxy, no direct run):
	// about 45 s a round of the default run's 7 minutes. spread is not in
	// the default: it opens 800 listeners and runs three loads per proxy.
	scenarios := fs.String("scenarios", "raw,raw_tls,skewed,cold_join,overhead", "scenarios to run (connections are counted during raw, skewed and cold_join); spread, tracing, h2_streams, h2_cpu, tls_origins and many_endpoints run only when named")
	fs.IntVar(&o.rounds, "rounds", 1, "runs of each scenario per proxy; the median round is reported")
	fs.IntVar(&o.rawRounds, "raw-rounds", 0, "runs of the raw scenario per proxy (0: --rounds); every round is reported, the median judged")
	fs.IntVar(&o.tlsOrigins, "tls-origins", 4, "tls_origins: origin processes")
	fs.IntVar(&o.tlsListeners, "tls-listeners", 4, "tls_origins: mTLS listeners (endpoints) per origin process")
	fs.StringVar(&o.tlsCorputProtocol, "tls-corput-protocol", "auto", "tls_origins, many_endpoints: corput's protocol to the TLS origins: auto (h2 by ALPN, the issue's setting), h1 or h2; h1 measures what the origins' HTTP/2 server adds")
	fs.IntVar(&o.manyOrigins, "many-origins", 4, "many_endpoints: origin processes")
	fs.IntVar(&o.manyListeners, "many-listeners", 16, "many_endpoints: mTLS listeners (endpoints) per origin process")
	fs.DurationVar(&o.manyWarmup, "many-warmup", 20*time.Second, "many_endpoints: load before the counted window")
	fs.DurationVar(&o.manyWindow, "many-window", 60*time.Second, "many_endpoints: the counted window (well inside corput's 10 min max_lifetime)")
	fs.BoolVar(&o.forwarded, "forwarded-headers", true, "nginx and HAProxy add X-Forwarded-For, -Proto and -Host as corput and Caddy do (the same work at the origins); false runs their bare configs")
	fs.IntVar(&o.originProcs, "origin-procs", 1, "GOMAXPROCS of each origin process (0: Go's default, one per CPU); the origins stand in for services on other machines, so each keeps to one processor and leaves the rest to the proxy under test")
	fs.BoolVar(&o.install, "install", true, "apt-get install haproxy, nginx-light, caddy and wrk (and openssl for raw_tls, nghttp2-client's h2load for spread) when missing")
	fs.BoolVar(&o.verbose, "v", false, "print a line per run on stderr")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the load's arrivals and classes")
	fs.DurationVar(&o.rawDuration, "raw-duration", 10*time.Second, "raw test duration (wrk -d)")
	fs.IntVar(&o.rawConns, "raw-conns", 64, "raw test connections (wrk -c)")
	fs.DurationVar(&o.skewDuration, "skewed-duration", 20*time.Second, "skewed test duration")
	fs.Float64Var(&o.rate, "rate", 300, "open-loop rate of the skewed and cold-join tests, req/s")
	fs.DurationVar(&o.joinAfter, "join-after", 5*time.Second, "cold join: load before the fifth origin starts")
	fs.DurationVar(&o.joinWindow, "join-window", 75*time.Second, "cold join: how long the fifth origin is watched (its peaks over its first 30 s, its share from 60 s on)")
	fs.DurationVar(&o.ovDuration, "overhead-duration", 10*time.Second, "overhead test duration per target")
	fs.Float64Var(&o.ovRate, "overhead-rate", 0, "overhead test rate, req/s (0: half of corput's raw req/s in this run)")
	fs.IntVar(&o.spreadOrigins, "spread-origins", 8, "spread: origin processes")
	fs.IntVar(&o.spreadListeners, "spread-listeners", 100, "spread: listeners (endpoints) per origin process")
	fs.IntVar(&o.spreadLoops, "spread-loops", 16, "spread: corput's loops")
	fs.DurationVar(&o.spreadDuration, "spread-duration", 10*time.Second, "spread: duration of each wrk load")
	fs.IntVar(&o.spreadConns, "spread-conns", 256, "spread: connections of the first wrk load")
	fs.IntVar(&o.spreadFewConns, "spread-few-conns", 4, "spread: connections of the last wrk load")
	fs.IntVar(&o.spreadStreams, "spread-streams", 100, "spread: concurrent streams of the h2load load's one connection")
	fs.IntVar(&o.spreadH2Requests, "spread-h2-requests", 40000, "spread: requests of the h2load load")
	bindH2Flags(fs, &o.h2)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.proxies = splitList(*proxies)
	o.scenarios = splitList(*scenarios)
	for _, s := range o.scenarios {
		switch s {
		case scRaw, scRawTLS, scSkewed, scCold, scOverhead, scSpread, scTracing, scH2Streams, scH2CPU, scTLSOrigins, scManyEndpoints:
		default:
			return o, fmt.Errorf("--scenarios: unknown scenario %q: want raw, raw_tls, skewed, cold_join, overhead, spread, tracing, h2_streams, h2_cpu, tls_origins or many_endpoints", s)
		}
	}
	if o.rounds < 1 {
		return o, fmt.Errorf("--rounds %d: want 1 or more", o.rounds)
	}
	if o.rawRounds < 0 {
		return o, fmt.Errorf("--raw-rounds %d: want 0 (--rounds) or more, e.g. 5", o.rawRounds)
	}
	if o.rate <= 0 {
		return o, fmt.Errorf("--rate %g: want a positive rate, e.g. 300", o.rate)
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"--spread-origins", o.spreadOrigins}, {"--spread-listeners", o.spreadListeners}, {"--spread-loops", o.spreadLoops},
		{"--spread-conns", o.spreadConns}, {"--spread-few-conns", o.spreadFewConns}, {"--spread-streams", o.spreadStreams}, {"--spread-h2-requests", o.spreadH2Requests},
		{"--tls-origins", o.tlsOrigins}, {"--tls-listeners", o.tlsListeners}, {"--many-origins", o.manyOrigins}, {"--many-listeners", o.manyListeners}} {
		if v.n < 1 {
			return o, fmt.Errorf("%s %d: want 1 or more", v.name, v.n)
		}
	}
	switch o.tlsCorputProtocol {
	case "auto", "h1", "h2":
	default:
		return o, fmt.Errorf("--tls-corput-protocol %q: want auto, h1 or h2", o.tlsCorputProtocol)
	}
	if err := o.h2.validate(); err != nil {
		return o, err
	}
	if o.spreadDuration < time.Second {
		return o, fmt.Errorf("--spread-duration %v: want at least 1s (wrk counts whole seconds)", o.spreadDuration)
	}
	if o.originProcs < 0 {
		return o, fmt.Errorf("--origin-procs %d: want 0 (Go's default) or a processor count, e.g. 1", o.originProcs)
	}
	return o, nil
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
	res, err := runBench(ctx, o, stdout, stderr)
	if res != nil && len(res.Scenarios) > 0 {
		if werr := res.write(o.out); werr != nil {
			fmt.Fprintln(stderr, "peers: write results:", werr)
		}
		fmt.Fprintln(stdout)
		for _, t := range res.tables() {
			fmt.Fprintln(stdout, t.Text())
		}
		fmt.Fprintf(stdout, "wrote %s and %s\n", filepath.Join(o.out, "peers.json"), filepath.Join(o.out, "peers.md"))
	}
	if err != nil {
		fmt.Fprintln(stderr, "peers:", err)
		return 1
	}
	return 0
}

// runBench prepares the machine and runs every scenario; the results so
// far are returned even when it fails.
func runBench(ctx context.Context, o options, stdout, stderr io.Writer) (*Results, error) {
	runDir := filepath.Join(o.out, "peers-run")
	if err := os.RemoveAll(runDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}
	runDir, _ = filepath.Abs(runDir)
	if o.corput == "" {
		o.corput = filepath.Join(o.out, "bin", "corput")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", o.corput, "./cmd/corput").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build ./cmd/corput (run from the repository root, or pass --corput): %w: %s", err, out)
		}
	}
	bin, err := filepath.Abs(o.corput)
	if err != nil {
		return nil, err
	}
	var proxies []proxy
	need := []string{"wrk"}
	if slices.Contains(o.scenarios, scRawTLS) {
		need = append(need, "openssl") // probeTLS
	}
	if slices.Contains(o.scenarios, scSpread) {
		need = append(need, spreadNeeds...)
	}
	for _, n := range o.proxies {
		p, err := proxyByName(n, corputProxy{bin_: bin, balancer: o.balancer, downstream: o.downstream}, o.forwarded)
		if err != nil {
			return nil, err
		}
		proxies = append(proxies, p)
		if p.bin() != "" {
			need = append(need, p.bin())
		}
	}
	if err := ensureInstalled(need, o.install); err != nil {
		return nil, err
	}

	ps := newProcs(runDir)
	defer ps.stopAll()
	b := &bench{o: o, ps: ps, bin: bin, dir: runDir, proxies: proxies, log: io.Discard,
		res: &Results{Machine: machine(o)}}
	if o.verbose {
		b.log = stderr
	}
	if usesStandardOrigins(o.scenarios) {
		if err := b.startOrigins(ctx); err != nil {
			return nil, err
		}
	}
	b.bar = progress.New(stdout, "peers", b.totalRuns())
	err = b.runAll(ctx)
	b.bar.Done()
	b.res.Goals = b.res.goals()
	return b.res, err
}

// originProcsNote says how many processors each origin had.
func originProcsNote(n int) string {
	if n == 0 {
		return ", with Go's default processors each"
	}
	return fmt.Sprintf(", with GOMAXPROCS=%d each", n)
}

// machine describes this machine and the versions under test.
func machine(o options) Machine {
	m := Machine{
		CPUs: runtime.NumCPU(), Go: runtime.Version(), Started: time.Now().UTC().Format(time.RFC3339),
		Versions: map[string]string{},
		Note: "wrk (or the Go load generator), the proxy and the origins share this machine's cores; that is the same for every proxy, " +
			"so the ratios are fair, and the absolute figures are this machine's. Origins are `corput origin` processes (HTTP/1.1)" +
			originProcsNote(o.originProcs) + ".",
	}
	probe := map[string][]string{
		nameNginx: {"nginx", "-v"}, nameHAProxy: {"haproxy", "-v"}, nameCaddy: {"caddy", "version"},
	}
	for _, p := range o.proxies {
		argv, ok := probe[p]
		if !ok {
			continue
		}
		out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		m.Versions[p] = firstVersion(string(out))
	}
	if rev, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Versions[nameCorput] = "git " + strings.TrimSpace(string(rev))
	}
	return m
}

// firstVersion picks the first version-looking word of a -v output:
// "nginx version: nginx/1.22.1" → 1.22.1, "HAProxy version 2.6.12-1 ..." →
// 2.6.12-1, "v2.6.2 h1:..." → v2.6.2.
func firstVersion(out string) string {
	for _, f := range strings.Fields(out) {
		if i := strings.LastIndexByte(f, '/'); i >= 0 {
			f = f[i+1:]
		}
		if len(f) > 1 && (f[0] >= '0' && f[0] <= '9' || f[0] == 'v' && f[1] >= '0' && f[1] <= '9') && strings.Contains(f, ".") {
			return f
		}
	}
	return strings.TrimSpace(lastLines(out, 1))
}
