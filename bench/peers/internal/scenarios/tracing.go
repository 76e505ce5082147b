package scenarios

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/corput/corput/bench/peers/internal/load"
	"github.com/corput/corput/bench/peers/internal/proxies"
	"github.com/corput/corput/bench/peers/internal/results"
	"github.com/corput/corput/internal/tracing/receiver"
)

// The tracing scenario (only when named) is corput against itself with
// tracing on: the raw load (wrk) with tracing off, at 1 % sampling to a
// real OTLP receiver, and at 100 % to a blackholed receiver (one that
// accepts and never reads); then the overhead scenario's open-loop load at
// half of the tracing-off raw rate of this run, tracing off and blackholed
// at 100 %. It reports req/s, p99, errors and the spans corput dropped
// (corput_tracing_spans_dropped_total, scraped after each run), and its
// goals (results.Judge): 0 requests fail, blackholed p99 within 10 % of
// tracing off, dropped spans rising (docs/tracing.md).

// tracingRuns is the scenario's runs per round: raw ×3, overhead ×2.
const tracingRuns = 5

func (b *bench) runTracing(ctx context.Context) error {
	rc, err := receiver.Start()
	if err != nil {
		return err
	}
	defer rc.Close()
	bh, err := receiver.StartBlackhole()
	if err != nil {
		return err
	}
	defer bh.Close()
	base := proxies.Corput{Binary: b.bin, Balancer: b.o.Balancer, Downstream: b.o.Downstream}
	off := proxies.Traced{Corput: base, Variant: "off"}
	onePct := proxies.Traced{Corput: base, Variant: "1pct", Block: fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: 0.01}\n", rc.GRPCAddr())}
	blackholed := proxies.Traced{Corput: base, Variant: "blackholed-100pct", Block: fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: 1.0}\n", bh.Addr())}
	rounds := map[string][]results.Result{}
	var keys []string
	run := func(loadName string, p proxies.Traced, r int, f func(base string) (results.Result, error)) error {
		dir := filepath.Join(b.dir, fmt.Sprintf("%s-%s-r%d-%s", results.ScTracing, loadName, r+1, p.Variant))
		var res results.Result
		err := b.withProxy(ctx, p, dir, "", nil, func(base, _ string, _ cpuClock) error {
			var err error
			if res, err = f(base); err != nil {
				return err
			}
			admin, err := proxies.CorputAdmin(dir)
			if err != nil {
				return err
			}
			dropped, err := proxies.CorputSpansDropped(ctx, admin)
			res.Tracing = &results.TracingRun{Load: loadName, Variant: p.Variant, SpansDropped: dropped}
			return err
		})
		if err != nil {
			return fmt.Errorf("%s %s via %s: %w", results.ScTracing, loadName, p.Name(), err)
		}
		res.Proxy = p.Name()
		key := loadName + " " + p.Variant
		if len(rounds[key]) == 0 {
			keys = append(keys, key)
		}
		rounds[key] = append(rounds[key], res)
		fmt.Fprintf(b.log, "peers: %s %s round %d %-22s rps %.0f p99 %.2f ms errors %d spans dropped %.0f\n", results.ScTracing, loadName, r+1, p.Name(), res.RPS, res.P99MS, res.Errors, res.Tracing.SpansDropped)
		return b.settle(ctx)
	}
	variants := []proxies.Traced{off, onePct, blackholed}
	for r := 0; r < b.o.Rounds; r++ {
		for i := range variants {
			p := variants[(i+r)%len(variants)]
			if err := run(results.ScRaw, p, r, func(base string) (results.Result, error) {
				w, err := load.Wrk(ctx, base+"/", b.o.RawConns, b.o.RawDuration)
				return w.Result(), err
			}); err != nil {
				return err
			}
		}
		rate := b.o.OvRate
		if rate <= 0 {
			rate = rounds[results.ScRaw+" off"][r].RPS / 2
		}
		for i, p := range []proxies.Traced{off, blackholed} {
			if r%2 == 1 {
				p = []proxies.Traced{blackholed, off}[i]
			}
			if err := run(results.ScOverhead, p, r, func(base string) (results.Result, error) {
				return load.OpenLoop(ctx, base+"/", rate, b.o.OvDuration, b.o.Seed)
			}); err != nil {
				return err
			}
		}
	}
	s := b.res.Scenario(results.ScTracing, fmt.Sprintf("corput with tracing off, at 1 %% sampling to an OTLP receiver (gRPC, loopback), and at 100 %% to a blackholed receiver (accepts, never reads): raw = wrk -t2 -c%d -d%v; overhead = open-loop Poisson GETs at half of tracing-off's raw req/s for %v",
		b.o.RawConns, b.o.RawDuration, b.o.OvDuration))
	s.AddMedians(keys, rounds, func(r results.Result) float64 { return r.P99MS })
	return nil
}
