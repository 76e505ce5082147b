// Package scenarios runs the peers comparison: every scenario through
// every proxy under test, on origins it starts, with the loads of the
// load package, and files the figures in results.
//
// A scenario owns its loop over rounds and proxies; the files are one per
// scenario family: standard.go (raw, raw_tls, skewed, overhead and the
// connections counted during them), coldjoin.go, spread.go, h2.go
// (h2_streams, h2_cpu), upstreamtls.go (tls_origins, many_endpoints) and
// tracing.go.
//
// Invariants:
//   - Every proxy is started fresh for every run, with the same origins,
//     and stopped after it; the origins are shared by the proxies of a
//     scenario, so each proxy meets the same ground.
//   - Within a scenario the proxies alternate and the order rotates by
//     round, so no proxy always goes first.
//   - A scenario's result per proxy is the median of its rounds by the
//     scenario's key figure (results.Median).
//   - Every process a run starts is stopped when it ends, an error or
//     Ctrl-C included (Run defers proc.StopAll).
//   - The figures at the origins are differences of their own counters
//     read before and after a run (origins.Tally), never the proxy's word.
package scenarios

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/corput/corput/bench/peers/internal/certs"
	"github.com/corput/corput/bench/peers/internal/origins"
	"github.com/corput/corput/bench/peers/internal/proc"
	"github.com/corput/corput/bench/peers/internal/proxies"
	"github.com/corput/corput/bench/peers/internal/results"
	"github.com/corput/corput/internal/progress"
)

// bench is one run of the comparison.
type bench struct {
	o       Options
	ps      *proc.Procs
	bin     string // corput
	dir     string // peers-run
	proxies []proxies.Proxy
	origins origins.Group // o1..o3 default, o4 the 5×-slow one
	res     *results.Results
	bar     *progress.Bar
	log     io.Writer
	// conns[proxy][scenario] sums the connections the origins accepted
	conns map[string]map[string]int64
	// tls is the run's throwaway certificate, made by the first raw_tls run
	tls *certs.Files
	// up is the upstream TLS of tls_origins and many_endpoints
	up *certs.Upstream
}

// pause lets sockets and schedulers settle between runs.
const pause = time.Second

// Run prepares the machine (the corput binary, the executables the
// scenarios need) and runs every scenario of o. The results so far are
// returned even when it fails.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) (*results.Results, error) {
	runDir := filepath.Join(o.Out, "peers-run")
	if err := os.RemoveAll(runDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}
	runDir, _ = filepath.Abs(runDir)
	if o.Corput == "" {
		o.Corput = filepath.Join(o.Out, "bin", "corput")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", o.Corput, "./cmd/corput").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build ./cmd/corput (run from the repository root, or pass --corput): %w: %s", err, out)
		}
	}
	bin, err := filepath.Abs(o.Corput)
	if err != nil {
		return nil, err
	}
	var under []proxies.Proxy
	need := []string{"wrk"}
	if slices.Contains(o.Scenarios, results.ScRawTLS) {
		need = append(need, "openssl") // load.ProbeTLS
	}
	if slices.Contains(o.Scenarios, results.ScSpread) {
		need = append(need, spreadNeeds...)
	}
	for _, n := range o.Proxies {
		p, err := proxies.ByName(n, proxies.Corput{Binary: bin, Balancer: o.Balancer, Downstream: o.Downstream}, o.Forwarded)
		if err != nil {
			return nil, err
		}
		under = append(under, p)
		if p.Bin() != "" {
			need = append(need, p.Bin())
		}
	}
	if err := proc.Install(need, o.Install); err != nil {
		return nil, err
	}

	ps := proc.New(runDir)
	defer ps.StopAll()
	b := &bench{o: o, ps: ps, bin: bin, dir: runDir, proxies: under, log: io.Discard,
		res: &results.Results{Machine: machine(o)}}
	if o.Verbose {
		b.log = stderr
	}
	if UsesStandardOrigins(o.Scenarios) {
		if err := b.startOrigins(ctx); err != nil {
			return nil, err
		}
	}
	b.bar = progress.New(stdout, "peers", b.totalRuns())
	err = b.runAll(ctx)
	b.bar.Done()
	b.res.Goals = b.res.Judge()
	return b.res, err
}

// machine describes this machine and the versions under test.
func machine(o Options) results.Machine {
	m := results.Machine{
		CPUs: runtime.NumCPU(), Go: runtime.Version(), Started: time.Now().UTC().Format(time.RFC3339),
		Versions: map[string]string{},
		Note: "wrk (or the Go load generator), the proxy and the origins share this machine's cores; that is the same for every proxy, " +
			"so the ratios are fair, and the absolute figures are this machine's. Origins are `corput origin` processes (HTTP/1.1)" +
			originProcsNote(o.OriginProcs) + ".",
	}
	probe := map[string][]string{
		results.Nginx: {"nginx", "-v"}, results.HAProxy: {"haproxy", "-v"}, results.Caddy: {"caddy", "version"},
	}
	for _, p := range o.Proxies {
		argv, ok := probe[p]
		if !ok {
			continue
		}
		out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		m.Versions[p] = firstVersion(string(out))
	}
	if rev, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Versions[results.Corput] = "git " + strings.TrimSpace(string(rev))
	}
	return m
}

// originProcsNote says how many processors each origin had.
func originProcsNote(n int) string {
	if n == 0 {
		return ", with Go's default processors each"
	}
	return fmt.Sprintf(", with GOMAXPROCS=%d each", n)
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
	return strings.TrimSpace(proc.LastLines(out, 1))
}

// ownsOrigins reports whether scenario sc starts origins of its own
// (spread, tls_origins, many_endpoints, h2_streams, h2_cpu) rather than
// using the four standard ones.
func ownsOrigins(sc string) bool {
	return sc == results.ScSpread || sc == results.ScTLSOrigins || sc == results.ScManyEndpoints || isH2Scenario(sc)
}

// UsesStandardOrigins reports whether any scenario that shares the four
// standard origins runs (the others start their own).
func UsesStandardOrigins(scenarios []string) bool {
	return slices.ContainsFunc(scenarios, func(s string) bool { return !ownsOrigins(s) })
}

// totalRuns is how many proxy runs the scenarios make, for the progress
// bar.
func (b *bench) totalRuns() int {
	n := 0
	for _, sc := range b.o.Scenarios {
		switch {
		case sc == results.ScSpread:
			n += len(b.spreadLoads()) * len(b.proxies) * b.o.Rounds
		case sc == results.ScTLSOrigins || sc == results.ScManyEndpoints:
			n += len(b.proxies) * b.o.Rounds
		case sc == results.ScTracing:
			n += tracingRuns * b.o.Rounds
		case isH2Scenario(sc):
			n += len(b.h2Proxies()) * b.o.Rounds
		default:
			per := len(b.proxies)
			if hasDirect(sc) {
				per++
			}
			n += per * b.roundsOf(sc)
		}
	}
	return n
}

// runAll runs every scenario, alternating the proxies within each.
func (b *bench) runAll(ctx context.Context) error {
	b.conns = map[string]map[string]int64{}
	for _, sc := range b.o.Scenarios {
		var err error
		switch {
		case sc == results.ScSpread:
			err = b.runSpread(ctx)
		case sc == results.ScTLSOrigins || sc == results.ScManyEndpoints:
			err = b.runUpstreamTLS(ctx, sc)
		case sc == results.ScTracing:
			err = b.runTracing(ctx)
		case isH2Scenario(sc):
			err = b.runH2(ctx, sc)
		default:
			err = b.runStandard(ctx, sc)
		}
		if err != nil {
			return err
		}
	}
	b.foldConnections()
	return nil
}

// rotate is list rotated by round, so no proxy always goes first.
func rotate(list []proxies.Proxy, round int) []proxies.Proxy {
	k := round % len(list)
	return append(slices.Clone(list[k:]), list[:k]...)
}

// runDir is the directory of one run: its configs and logs.
func (b *bench) runDir(sc string, round int, name string) string {
	return filepath.Join(b.dir, fmt.Sprintf("%s-r%d-%s", sc, round+1, name))
}

// settle counts a finished run on the progress bar and pauses, so
// sockets and schedulers settle before the next.
func (b *bench) settle(ctx context.Context) error {
	b.bar.Add(1)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(pause):
		return nil
	}
}

// cpuClock reads the user + system CPU time the proxy's process group has
// used so far (proc.GroupCPU); nil for the direct baseline, which has no
// proxy.
type cpuClock func() time.Duration

// withProxy starts p (nil: no proxy, target the first origin directly),
// calls f with the base URL, the proxy's address and its CPU clock, and
// stops p; with tc the proxy serves HTTPS with tc's certificate and the
// URL is https.
func (b *bench) withProxy(ctx context.Context, p proxies.Proxy, dir, joining string, tc *certs.Files, f func(base, addr string, cpu cpuClock) error) error {
	if p == nil {
		return f("http://"+b.origins[0].Addr, b.origins[0].Addr, nil)
	}
	c, addr, err := proxies.Start(ctx, b.ps, p, dir, b.origins.Endpoints(), joining, tc)
	if err != nil {
		return err
	}
	defer c.Stop(10 * time.Second)
	pgid := c.Pgid()
	return f(proxies.Scheme(tc)+"://"+addr, addr, func() time.Duration { return proc.GroupCPU(pgid) })
}

// perRequest is cpu per request, in microseconds.
func perRequest(cpu time.Duration, requests int64) float64 {
	if requests <= 0 {
		return 0
	}
	return results.Round3(float64(cpu.Microseconds()) / float64(requests))
}
