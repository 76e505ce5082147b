package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corput/corput/internal/tracing/receiver"
)

// scTracing ("tracing", only when named) is corput against itself with
// tracing on: the raw load (wrk) with tracing off, at 1 % sampling to a
// real OTLP receiver, and at 100 % to a blackholed receiver (one that
// accepts and never reads); then the overhead scenario's open-loop load at
// half of the tracing-off raw rate of this run, tracing off and blackholed
// at 100 %. It reports req/s, p99, errors and the spans corput dropped
// (corput_tracing_spans_dropped_total, scraped after each run), and its
// goals: 0 requests fail, blackholed p99 within 10 % of tracing off,
// dropped spans rising (issue 21, docs/tracing.md).
const scTracing = "tracing"

// tracingRun is a tracing scenario's result beside Result's figures.
type tracingRun struct {
	Load         string  `json:"load"`    // raw or overhead
	Variant      string  `json:"variant"` // off, 1pct, blackholed-100pct
	SpansDropped float64 `json:"spans_dropped"`
}

// tracedCorput is corput with a tracing block appended to its config.
type tracedCorput struct {
	corputProxy
	variant string
	block   string // the tracing block; "" for tracing off
	admin   string // the admin address of the config files last wrote
}

func (p *tracedCorput) name() string { return nameCorput + "-tracing-" + p.variant }

func (p *tracedCorput) files(dir, listen string, members []string, joining string, tc *tlsFiles) ([]string, error) {
	cmd, err := p.corputProxy.files(dir, listen, members, joining, tc)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "corput.yaml")
	cfg, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(cfg), "\n") {
		if a, ok := strings.CutPrefix(line, "admin: "); ok {
			p.admin = a
		}
	}
	return cmd, os.WriteFile(path, append(cfg, p.block...), 0o644)
}

// spansDropped scrapes corput_tracing_spans_dropped_total from the admin
// listener of the corput running now.
func (p *tracedCorput) spansDropped(ctx context.Context) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+p.admin+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "corput_tracing_spans_dropped_total "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return 0, err
}

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
	base := corputProxy{bin_: b.bin, balancer: b.o.balancer, downstream: b.o.downstream}
	off := &tracedCorput{corputProxy: base, variant: "off"}
	onePct := &tracedCorput{corputProxy: base, variant: "1pct", block: fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: 0.01}\n", rc.GRPCAddr())}
	blackholed := &tracedCorput{corputProxy: base, variant: "blackholed-100pct", block: fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: 1.0}\n", bh.Addr())}
	rounds := map[string][]Result{}
	var keys []string
	run := func(load string, p *tracedCorput, r int, f func(base string) (Result, error)) error {
		dir := filepath.Join(b.dir, fmt.Sprintf("%s-%s-r%d-%s", scTracing, load, r+1, p.variant))
		var res Result
		err := b.withProxy(ctx, p, dir, "", nil, func(base, _ string, _ cpuClock) error {
			var err error
			if res, err = f(base); err != nil {
				return err
			}
			dropped, err := p.spansDropped(ctx)
			res.Tracing = &tracingRun{Load: load, Variant: p.variant, SpansDropped: dropped}
			return err
		})
		if err != nil {
			return fmt.Errorf("%s %s via %s: %w", scTracing, load, p.name(), err)
		}
		res.Proxy = p.name()
		key := load + " " + p.variant
		if len(rounds[key]) == 0 {
			keys = append(keys, key)
		}
		rounds[key] = append(rounds[key], res)
		fmt.Fprintf(b.log, "peers: %s %s round %d %-22s rps %.0f p99 %.2f ms errors %d spans dropped %.0f\n", scTracing, load, r+1, p.name(), res.RPS, res.P99MS, res.Errors, res.Tracing.SpansDropped)
		b.bar.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		return nil
	}
	variants := []*tracedCorput{off, onePct, blackholed}
	for r := 0; r < b.o.rounds; r++ {
		for i := range variants {
			p := variants[(i+r)%len(variants)]
			if err := run(scRaw, p, r, func(base string) (Result, error) {
				w, _, err := runWrk(ctx, base+"/", b.o.rawConns, b.o.rawDuration)
				return Result{RPS: w.RPS, P50MS: w.P50MS, P99MS: w.P99MS, Errors: w.Errors}, err
			}); err != nil {
				return err
			}
		}
		rate := b.o.ovRate
		if rate <= 0 {
			rate = rounds[scRaw+" off"][r].RPS / 2
		}
		for i, p := range []*tracedCorput{off, blackholed} {
			if r%2 == 1 {
				p = []*tracedCorput{blackholed, off}[i]
			}
			if err := run(scOverhead, p, r, func(base string) (Result, error) {
				return openLoopRaw(ctx, base+"/", rate, b.o.ovDuration, b.o.seed)
			}); err != nil {
				return err
			}
		}
	}
	s := b.res.scenario(scTracing, fmt.Sprintf("corput with tracing off, at 1 %% sampling to an OTLP receiver (gRPC, loopback), and at 100 %% to a blackholed receiver (accepts, never reads): raw = wrk -t2 -c%d -d%v; overhead = open-loop Poisson GETs at half of tracing-off's raw req/s for %v",
		b.o.rawConns, b.o.rawDuration, b.o.ovDuration))
	for _, k := range keys {
		s.Results = append(s.Results, median(rounds[k], func(r Result) float64 { return r.P99MS }))
	}
	return nil
}

// tracingGoals are issue 21's: with a blackholed receiver at 100 %
// sampling under the overhead load, no request fails, p99 stays within
// 10 % of tracing off, and the dropped-span counter rises.
func tracingGoals(s *Scenario) []Goal {
	var off, bh *Result
	for i := range s.Results {
		x := &s.Results[i]
		if x.Tracing == nil || x.Tracing.Load != scOverhead {
			continue
		}
		switch x.Tracing.Variant {
		case "off":
			off = x
		case "blackholed-100pct":
			bh = x
		}
	}
	if off == nil || bh == nil || off.P99MS <= 0 {
		return nil
	}
	r := bh.P99MS / off.P99MS
	return []Goal{
		{Name: "tracing: blackholed receiver, requests failed", Target: "0", Value: float64(bh.Errors), Met: bh.Errors == 0},
		{Name: "tracing: blackholed receiver, p99 / tracing off p99", Target: "≤ 1.10", Value: round3(r), Met: r <= 1.10,
			Note: fmt.Sprintf("%.2f ms vs %.2f ms", bh.P99MS, off.P99MS)},
		{Name: "tracing: blackholed receiver, spans dropped", Target: "> 0", Value: bh.Tracing.SpansDropped, Met: bh.Tracing.SpansDropped > 0},
	}
}

// tracingTable is the scenario's table rows.
func tracingTable(s *Scenario) (header []string, rows [][]string) {
	header = []string{"load", "tracing", "req/s", "p50 ms", "p99 ms", "errors", "spans dropped", "req/s vs off", "p99 vs off"}
	base := map[string]Result{}
	for _, x := range s.Results {
		if x.Tracing != nil && x.Tracing.Variant == "off" {
			base[x.Tracing.Load] = x
		}
	}
	for _, x := range s.Results {
		t := x.Tracing
		if t == nil {
			continue
		}
		o := base[t.Load]
		rows = append(rows, []string{t.Load, t.Variant, fmt.Sprintf("%.0f", x.RPS), ms(x.P50MS), ms(x.P99MS), strconv.FormatInt(x.Errors, 10),
			fmt.Sprintf("%.0f", t.SpansDropped), vsOff(x.RPS, o.RPS), vsOff(x.P99MS, o.P99MS)})
	}
	return header, rows
}

func vsOff(v, off float64) string {
	if off <= 0 {
		return "—"
	}
	return fmt.Sprintf("%+.1f %%", 100*(v/off-1))
}
