package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/corput/corput/internal/loadgen"
	"github.com/corput/corput/internal/progress"
)

// bench is one run of the comparison.
type bench struct {
	o       options
	ps      *procs
	bin     string // corput
	dir     string // peers-run
	proxies []proxy
	origins []*originProc // o1..o3 default, o4 the 5×-slow one
	res     *Results
	bar     *progress.Bar
	log     io.Writer
	// conns[proxy][scenario] sums the connections the origins accepted
	conns map[string]map[string]int64
	// tls is the run's throwaway certificate, made by the first raw_tls run
	tls *tlsFiles
	// up is the upstream TLS of tls_origins and many_endpoints (tlsorigins.go)
	up *upTLS
}

// slowOrigin is the id of the 5×-slow origin.
const slowOrigin = "o4"

// pause lets sockets and schedulers settle between runs.
const pause = time.Second

// startOrigins starts the four origins every proxy uses.
func (b *bench) startOrigins(ctx context.Context) error {
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("o%d", i)
		profile := "default"
		if id == slowOrigin {
			profile = "slow"
		}
		o, err := startOrigin(ctx, b.ps, b.bin, id, "127.0.0.1:0", uint64(i), b.o.originProcs, "--profile", profile)
		if err != nil {
			return err
		}
		b.origins = append(b.origins, o)
	}
	return nil
}

func (b *bench) members() []string {
	out := make([]string, len(b.origins))
	for i, o := range b.origins {
		out[i] = o.addr
	}
	return out
}

func (b *bench) totalRuns() int {
	n := 0
	for _, s := range b.o.scenarios {
		switch s {
		case scSpread:
			n += b.spreadRuns()
			continue
		case scTLSOrigins, scManyEndpoints:
			n += b.tlsRuns()
			continue
		}
		if s == scTracing {
			n += tracingRuns * b.o.rounds
			continue
		}
		if isH2Scenario(s) {
			n += b.h2Runs()
			continue
		}
		per := len(b.proxies)
		if hasDirect(s) {
			per++
		}
		n += per * b.roundsOf(s)
	}
	return n
}

// roundsOf is how many rounds scenario sc runs: --raw-rounds for raw
// (when set), --rounds for the others.
func (b *bench) roundsOf(sc string) int {
	if sc == scRaw && b.o.rawRounds > 0 {
		return b.o.rawRounds
	}
	return b.o.rounds
}

// hasDirect reports whether scenario sc has a direct-to-origin row: raw
// and overhead. raw_tls has none: the origins speak cleartext HTTP/1.1, so
// wrk straight to one is raw's direct row.
func hasDirect(sc string) bool { return sc == scRaw || sc == scOverhead }

// order rotates the proxies by round, so no proxy always goes first.
func (b *bench) order(round int) []proxy {
	k := round % len(b.proxies)
	return append(slices.Clone(b.proxies[k:]), b.proxies[:k]...)
}

// runAll runs every scenario, alternating the proxies within each.
func (b *bench) runAll(ctx context.Context) error {
	b.conns = map[string]map[string]int64{}
	for _, sc := range b.o.scenarios {
		switch sc {
		case scSpread:
			if err := b.runSpread(ctx); err != nil {
				return err
			}
			continue
		case scTLSOrigins, scManyEndpoints:
			if err := b.runUpstreamTLS(ctx, sc); err != nil {
				return err
			}
			continue
		}
		if sc == scTracing {
			if err := b.runTracing(ctx); err != nil {
				return err
			}
			continue
		}
		if isH2Scenario(sc) {
			if err := b.runH2(ctx, sc); err != nil {
				return err
			}
			continue
		}
		rounds := map[string][]Result{}
		var names []string
		for r := 0; r < b.roundsOf(sc); r++ {
			if hasDirect(sc) {
				res, err := b.runOne(ctx, sc, nil, r, rounds)
				if err != nil {
					return err
				}
				rounds[nameDirect] = append(rounds[nameDirect], res)
			}
			for _, p := range b.order(r) {
				res, err := b.runOne(ctx, sc, p, r, rounds)
				if err != nil {
					return err
				}
				rounds[p.name()] = append(rounds[p.name()], res)
			}
		}
		if hasDirect(sc) {
			names = append(names, nameDirect)
		}
		for _, p := range b.proxies {
			names = append(names, p.name())
		}
		b.fold(sc, names, rounds)
	}
	b.foldConnections()
	return nil
}

func (b *bench) runOne(ctx context.Context, sc string, p proxy, round int, sofar map[string][]Result) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	name := nameDirect
	if p != nil {
		name = p.name()
	}
	dir := filepath.Join(b.dir, fmt.Sprintf("%s-r%d-%s", sc, round+1, name))
	t0, err := takeTally(b.origins)
	if err != nil {
		return Result{}, err
	}
	var res Result
	var extra int64 // connections accepted by a joining origin
	switch sc {
	case scRaw:
		res, err = b.raw(ctx, p, dir)
	case scRawTLS:
		res, err = b.rawTLS(ctx, p, dir)
	case scSkewed:
		res, err = b.skewed(ctx, p, dir, t0)
	case scCold:
		res, extra, err = b.coldJoin(ctx, p, dir)
	case scOverhead:
		res, err = b.overhead(ctx, p, dir, sofar, round)
	}
	if err != nil {
		return Result{}, fmt.Errorf("%s via %s: %w", sc, name, err)
	}
	res.Proxy = name
	t1, err := takeTally(b.origins)
	if err != nil {
		return Result{}, err
	}
	if p != nil && countsConnections(sc) && round == 0 {
		if b.conns[name] == nil {
			b.conns[name] = map[string]int64{}
		}
		b.conns[name][sc] += t1.since(t0).accepted + extra
	}
	fmt.Fprintf(b.log, "peers: %-9s round %d %-8s rps %.0f p50 %.2f p99 %.2f max %.1f ms%s\n", sc, round+1, name, res.RPS, res.P50MS, res.P99MS, res.MaxMS, tlsLog(res.TLS))
	b.bar.Add(1)
	select {
	case <-ctx.Done():
		return Result{}, ctx.Err()
	case <-time.After(pause):
	}
	return res, nil
}

// countsConnections reports whether the connections scenario counts what
// the origins accepted during sc: raw, skewed and cold_join (raw_tls's
// upstream side is raw's; overhead runs at another rate).
func countsConnections(sc string) bool { return sc == scRaw || sc == scSkewed || sc == scCold }

func tlsLog(t *TLSInfo) string {
	if t == nil {
		return ""
	}
	return ", " + t.String()
}

// withProxy starts p (nil: no proxy, target the first origin directly),
// calls f with the base URL, the proxy's address and its CPU clock, and
// stops p; with tc the proxy serves HTTPS with tc's certificate and the
// URL is https.
func (b *bench) withProxy(ctx context.Context, p proxy, dir, joining string, tc *tlsFiles, f func(base, addr string, cpu cpuClock) error) error {
	if p == nil {
		return f("http://"+b.origins[0].addr, b.origins[0].addr, nil)
	}
	c, addr, err := startProxy(ctx, b.ps, p, dir, b.members(), joining, tc)
	if err != nil {
		return err
	}
	defer c.stop(10 * time.Second)
	pgid := c.cmd.Process.Pid
	return f(scheme(tc)+"://"+addr, addr, func() time.Duration { return groupCPU(pgid) })
}

// cpuClock reads the user + system CPU time the proxy's process group has
// used so far (groupCPU); nil for the direct baseline, which has no proxy.
type cpuClock func() time.Duration

// raw is wrk -t2 -c64 -d10s on a tiny response.
func (b *bench) raw(ctx context.Context, p proxy, dir string) (Result, error) {
	var res Result
	err := b.withProxy(ctx, p, dir, "", nil, func(base, _ string, cpu cpuClock) error {
		var c0 time.Duration
		if cpu != nil {
			c0 = cpu()
		}
		w, _, err := runWrk(ctx, base+"/", b.o.rawConns, b.o.rawDuration)
		res = Result{RPS: w.RPS, P50MS: w.P50MS, P99MS: w.P99MS, Errors: w.Errors, Requests: w.Requests}
		if cpu != nil {
			res.ProxyCPUUS = perRequest(cpu()-c0, w.Requests)
		}
		return err
	})
	return res, err
}

// rawTLS is raw with wrk speaking HTTPS/1.1 to the proxy, which ends TLS
// and forwards to the same cleartext origins: every proxy has the run's
// certificate and TLS 1.3 with TLS_AES_128_GCM_SHA256 where it lets that
// be set (tls.go). Before wrk, one handshake as wrk does it (probeTLS)
// records what the proxy negotiated.
func (b *bench) rawTLS(ctx context.Context, p proxy, dir string) (Result, error) {
	if b.tls == nil {
		tc, err := writeTLSFiles(filepath.Join(b.dir, "tls"))
		if err != nil {
			return Result{}, fmt.Errorf("throwaway certificate: %w", err)
		}
		b.tls = tc
	}
	var res Result
	err := b.withProxy(ctx, p, dir, "", b.tls, func(base, addr string, _ cpuClock) error {
		t, err := probeTLS(ctx, addr)
		if err != nil {
			return err
		}
		w, _, err := runWrk(ctx, base+"/", b.o.rawConns, b.o.rawDuration)
		res = Result{RPS: w.RPS, P50MS: w.P50MS, P99MS: w.P99MS, Errors: w.Errors, TLS: &t}
		return err
	})
	return res, err
}

// skewed is the 70/30 open-loop load with one 5×-slow origin.
func (b *bench) skewed(ctx context.Context, p proxy, dir string, t0 tally) (Result, error) {
	var res Result
	err := b.withProxy(ctx, p, dir, "", nil, func(base, _ string, _ cpuClock) error {
		rep, err := loadgen.Run(ctx, loadgen.Options{Target: base, Rate: b.o.rate, Duration: b.o.skewDuration, Seed: b.o.seed})
		if err != nil {
			return err
		}
		res = fromReport(rep)
		t1, err := takeTally(b.origins)
		if err != nil {
			return err
		}
		d := t1.since(t0)
		var total int64
		for _, n := range d.requests {
			total += n
		}
		if total > 0 {
			share := float64(d.requests[slowOrigin]) / float64(total)
			res.SlowShare = &share
		}
		return nil
	})
	return res, err
}

func fromReport(rep loadgen.Report) Result {
	res := Result{RPS: rep.Throughput, Requests: rep.Requests, SuccessRatio: rep.SuccessRatio, RateRPS: rep.Rate}
	if rep.Overall != nil {
		res.P50MS, res.P90MS, res.P99MS, res.MaxMS = rep.Overall.P50, rep.Overall.P90, rep.Overall.P99, rep.Overall.Max
	}
	for _, c := range rep.Classes {
		switch c.Name {
		case "light":
			res.LightP50MS, res.LightP99MS = c.Latency.P50, c.Latency.P99
		case "heavy":
			res.HeavyP50MS, res.HeavyP99MS = c.Latency.P50, c.Latency.P99
		}
	}
	res.Errors = rep.Requests - rep.Answered
	return res
}

// The spans of the cold origin's figures, from its start: its first
// joinEarly (the peaks), and from joinLate to the end of the window (its
// share once slow start is over).
const (
	joinEarly = 30 * time.Second
	joinLate  = 60 * time.Second
)

// coldJoin runs the skewed load; after joinAfter a fifth, cold origin
// starts and joins, and is watched for joinWindow. It returns the
// connections the joining origin accepted.
func (b *bench) coldJoin(ctx context.Context, p proxy, dir string) (Result, int64, error) {
	var res Result
	var accepted int64
	joinAddr, err := freePort()
	if err != nil {
		return res, 0, err
	}
	err = b.withProxy(ctx, p, dir, joinAddr, nil, func(base, _ string, _ cpuClock) error {
		type outcome struct {
			rep loadgen.Report
			err error
		}
		done := make(chan outcome, 1)
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			d := b.o.joinAfter + b.o.joinWindow
			rep, err := loadgen.Run(lctx, loadgen.Options{Target: base, Rate: b.o.rate, Duration: d, Seed: b.o.seed})
			done <- outcome{rep, err}
		}()
		wait := func() outcome { cancel(); return <-done }
		select {
		case <-time.After(b.o.joinAfter):
		case <-ctx.Done():
			wait()
			return ctx.Err()
		}
		o5, err := startOrigin(ctx, b.ps, b.bin, "o5", joinAddr, 5, b.o.originProcs, "--profile", "cold")
		if err != nil {
			wait()
			return err
		}
		born := time.Now()
		defer o5.c.stop(5 * time.Second)
		tJoin, err := takeTally(b.origins)
		if err != nil {
			wait()
			return err
		}
		if err := p.join(dir, append(b.members(), o5.addr)); err != nil {
			wait()
			return err
		}
		// The other origins' counts at the cold one's early and late marks.
		marks := map[time.Duration]*tally{joinEarly: nil, joinLate: nil}
		var out outcome
		got := false
		for _, m := range []time.Duration{joinEarly, joinLate} {
			if m >= b.o.joinWindow {
				continue
			}
			select {
			case <-time.After(time.Until(born.Add(m))):
				t, err := takeTally(b.origins)
				if err != nil {
					wait()
					return err
				}
				marks[m] = &t
			case out = <-done:
				got = true
			case <-ctx.Done():
				wait()
				return ctx.Err()
			}
			if got {
				break
			}
		}
		if !got {
			out = <-done
		}
		if out.err != nil {
			return out.err
		}
		st, err := o5.stats()
		if err != nil {
			return err
		}
		// The cold origin's per-second history, for a look at when its
		// peaks came (the run's figures keep only the peaks).
		if js, err := json.MarshalIndent(st, "", " "); err == nil {
			if err := os.WriteFile(filepath.Join(dir, "cold-origin.json"), js, 0o644); err != nil {
				return err
			}
		}
		tEnd, err := takeTally(b.origins)
		if err != nil {
			return err
		}
		others := func(from, to *tally) int64 {
			if from == nil || to == nil {
				return 0
			}
			var n int64
			for _, k := range to.since(*from).requests {
				n += k
			}
			return n
		}
		res = fromReport(out.rep)
		res.Join = joinResult(st, joinSpans{
			window: int(b.o.joinWindow / time.Second), early: int(joinEarly / time.Second), late: int(joinLate / time.Second),
			others: others(&tJoin, &tEnd), othersEarly: others(&tJoin, marks[joinEarly]), othersLate: others(marks[joinLate], &tEnd),
		})
		accepted = st.Connections.Accepted
		return nil
	})
	return res, accepted, err
}

// overhead sends open-loop raw GETs at half of corput's raw throughput
// (or --overhead-rate) and reports the p99 added over direct.
func (b *bench) overhead(ctx context.Context, p proxy, dir string, sofar map[string][]Result, round int) (Result, error) {
	rate := b.o.ovRate
	if rate <= 0 {
		c, ok := b.res.find(scRaw, nameCorput)
		if !ok || c.RPS <= 0 {
			return Result{}, fmt.Errorf("no corput raw throughput to take half of: run the raw scenario first or pass --overhead-rate")
		}
		rate = c.RPS / 2
	}
	var res Result
	err := b.withProxy(ctx, p, dir, "", nil, func(base, _ string, _ cpuClock) error {
		var err error
		res, err = openLoopRaw(ctx, base+"/", rate, b.o.ovDuration, b.o.seed)
		return err
	})
	if err != nil {
		return res, err
	}
	if p != nil && round < len(sofar[nameDirect]) {
		res.AddedP99MS = res.P99MS - sofar[nameDirect][round].P99MS
	}
	return res, nil
}

func pct(d []time.Duration, q float64) float64 {
	i := int(float64(len(d))*q+0.999999999) - 1
	return msOf(d[min(max(i, 0), len(d)-1)])
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fold stores each proxy's median round of a scenario.
func (b *bench) fold(sc string, names []string, rounds map[string][]Result) {
	key := func(r Result) float64 { return r.P99MS }
	desc := map[string]string{
		scRaw:    fmt.Sprintf("GET a tiny response, wrk -t2 -c%d -d%v; direct = wrk straight to one origin", b.o.rawConns, b.o.rawDuration),
		scRawTLS: fmt.Sprintf("raw over HTTPS/1.1: wrk -t2 -c%d -d%v, keep-alive, to each proxy over TLS; the proxy ends TLS and forwards to the same cleartext origins", b.o.rawConns, b.o.rawDuration),
		scSkewed: fmt.Sprintf("4 origins × 8 workers, 70 %% 15 ms / 30 %% 140 ms, one origin 5× slower, %g req/s open-loop Poisson for %v",
			b.o.rate, b.o.skewDuration),
		scCold: fmt.Sprintf("the skewed load for %v; a fifth origin, cold (10× slow decaying to 1× over 40 s, 8 workers), starts after %v and joins; its first %v",
			b.o.joinAfter+b.o.joinWindow, b.o.joinAfter, b.o.joinWindow),
		scOverhead: fmt.Sprintf("open-loop Poisson GETs of a tiny response at half of corput's raw req/s for %v, paced on a thread of their own with nanosleep; each request is timed from its scheduled arrival; added p99 = p99 through the proxy − p99 direct", b.o.ovDuration),
	}
	if sc == scRaw || sc == scRawTLS {
		key = func(r Result) float64 { return -r.RPS }
	}
	s := b.res.scenario(sc, desc[sc])
	if sc == scRawTLS {
		s.Note = rawTLSNote
	}
	for _, n := range names {
		if rs := rounds[n]; len(rs) > 0 {
			s.Results = append(s.Results, median(rs, key))
		}
	}
}

// foldConnections adds the connections scenario: what the origins
// accepted per proxy during raw, skewed and cold_join (first round).
func (b *bench) foldConnections() {
	if len(b.conns) == 0 {
		return
	}
	s := b.res.scenario(scConnections, "TCP connections the origins accepted while each proxy ran raw, skewed and cold_join (first round; counted by the origins)")
	for _, p := range b.proxies {
		c := b.conns[p.name()]
		if c == nil {
			continue
		}
		var total int64
		for _, n := range c {
			total += n
		}
		c["total"] = total
		s.Results = append(s.Results, Result{Proxy: p.name(), Conns: c})
	}
}
