package scenarios

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/corput/corput/bench/peers/internal/certs"
	"github.com/corput/corput/bench/peers/internal/load"
	"github.com/corput/corput/bench/peers/internal/origins"
	"github.com/corput/corput/bench/peers/internal/proxies"
	"github.com/corput/corput/bench/peers/internal/results"
	"github.com/corput/corput/internal/loadgen"
)

// The standard scenarios share four origins, started once for every
// proxy: three at the default profile and o4, 5× slower.
//
//   - raw: wrk -t2 -c64 for 10 s on a tiny response; req/s, p99 and the
//     proxy's CPU per request; a direct row straight to one origin.
//   - raw_tls: raw with wrk speaking HTTPS/1.1 to the proxy, which ends
//     TLS (certs' settings) and forwards to the same cleartext origins.
//   - skewed: the 70/30 mix, open-loop Poisson (internal/loadgen), with
//     the slow origin.
//   - cold_join: skewed while a fifth, cold origin joins (coldjoin.go).
//   - overhead: open-loop raw GETs at half of corput's raw req/s, direct
//     and through each proxy: the p99 each proxy adds.
//   - connections: what the origins accepted during raw, skewed and
//     cold_join, per proxy (first round).

// slowOrigin is the id of the 5×-slow origin.
const slowOrigin = "o4"

// startOrigins starts the four origins every proxy uses.
func (b *bench) startOrigins(ctx context.Context) error {
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("o%d", i)
		profile := "default"
		if id == slowOrigin {
			profile = "slow"
		}
		o, err := origins.Start(ctx, b.ps, b.bin, id, "127.0.0.1:0", uint64(i), b.o.OriginProcs, "--profile", profile)
		if err != nil {
			return err
		}
		b.origins = append(b.origins, o)
	}
	return nil
}

// roundsOf is how many rounds scenario sc runs: --raw-rounds for raw
// (when set), --rounds for the others.
func (b *bench) roundsOf(sc string) int {
	if sc == results.ScRaw && b.o.RawRounds > 0 {
		return b.o.RawRounds
	}
	return b.o.Rounds
}

// hasDirect reports whether scenario sc has a direct-to-origin row: raw
// and overhead. raw_tls has none: the origins speak cleartext HTTP/1.1, so
// wrk straight to one is raw's direct row.
func hasDirect(sc string) bool { return sc == results.ScRaw || sc == results.ScOverhead }

// countsConnections reports whether the connections scenario counts what
// the origins accepted during sc: raw, skewed and cold_join (raw_tls's
// upstream side is raw's; overhead runs at another rate).
func countsConnections(sc string) bool {
	return sc == results.ScRaw || sc == results.ScSkewed || sc == results.ScColdJoin
}

// runStandard runs sc round by round, the direct row first, then the
// proxies in rotating order, and folds the rounds.
func (b *bench) runStandard(ctx context.Context, sc string) error {
	rounds := map[string][]results.Result{}
	var names []string
	for r := 0; r < b.roundsOf(sc); r++ {
		if hasDirect(sc) {
			res, err := b.runOne(ctx, sc, nil, r, rounds)
			if err != nil {
				return err
			}
			rounds[results.Direct] = append(rounds[results.Direct], res)
		}
		for _, p := range rotate(b.proxies, r) {
			res, err := b.runOne(ctx, sc, p, r, rounds)
			if err != nil {
				return err
			}
			rounds[p.Name()] = append(rounds[p.Name()], res)
		}
	}
	if hasDirect(sc) {
		names = append(names, results.Direct)
	}
	for _, p := range b.proxies {
		names = append(names, p.Name())
	}
	b.fold(sc, names, rounds)
	return nil
}

// runOne runs round of sc through p (nil: direct), counting the
// connections the origins accepted meanwhile.
func (b *bench) runOne(ctx context.Context, sc string, p proxies.Proxy, round int, sofar map[string][]results.Result) (results.Result, error) {
	if err := ctx.Err(); err != nil {
		return results.Result{}, err
	}
	name := results.Direct
	if p != nil {
		name = p.Name()
	}
	dir := b.runDir(sc, round, name)
	t0, err := b.origins.Tally()
	if err != nil {
		return results.Result{}, err
	}
	var res results.Result
	var extra int64 // connections accepted by a joining origin
	switch sc {
	case results.ScRaw:
		res, err = b.raw(ctx, p, dir)
	case results.ScRawTLS:
		res, err = b.rawTLS(ctx, p, dir)
	case results.ScSkewed:
		res, err = b.skewed(ctx, p, dir, t0)
	case results.ScColdJoin:
		res, extra, err = b.coldJoin(ctx, p, dir)
	case results.ScOverhead:
		res, err = b.overhead(ctx, p, dir, sofar, round)
	}
	if err != nil {
		return results.Result{}, fmt.Errorf("%s via %s: %w", sc, name, err)
	}
	res.Proxy = name
	t1, err := b.origins.Tally()
	if err != nil {
		return results.Result{}, err
	}
	if p != nil && countsConnections(sc) && round == 0 {
		if b.conns[name] == nil {
			b.conns[name] = map[string]int64{}
		}
		b.conns[name][sc] += t1.Since(t0).Accepted + extra
	}
	fmt.Fprintf(b.log, "peers: %-9s round %d %-8s rps %.0f p50 %.2f p99 %.2f max %.1f ms%s\n", sc, round+1, name, res.RPS, res.P50MS, res.P99MS, res.MaxMS, tlsLog(res.TLS))
	return res, b.settle(ctx)
}

func tlsLog(t *results.TLSInfo) string {
	if t == nil {
		return ""
	}
	return ", " + t.String()
}

// raw is wrk -t2 -c64 -d10s on a tiny response.
func (b *bench) raw(ctx context.Context, p proxies.Proxy, dir string) (results.Result, error) {
	var res results.Result
	err := b.withProxy(ctx, p, dir, "", nil, func(base, _ string, cpu cpuClock) error {
		var c0 time.Duration
		if cpu != nil {
			c0 = cpu()
		}
		w, err := load.Wrk(ctx, base+"/", b.o.RawConns, b.o.RawDuration)
		res = w.Result()
		res.Requests = w.Requests
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
// be set (certs). Before wrk, one handshake as wrk does it
// (load.ProbeTLS) records what the proxy negotiated.
func (b *bench) rawTLS(ctx context.Context, p proxies.Proxy, dir string) (results.Result, error) {
	if b.tls == nil {
		tc, err := certs.Write(filepath.Join(b.dir, "tls"))
		if err != nil {
			return results.Result{}, fmt.Errorf("throwaway certificate: %w", err)
		}
		b.tls = tc
	}
	var res results.Result
	err := b.withProxy(ctx, p, dir, "", b.tls, func(base, addr string, _ cpuClock) error {
		t, err := load.ProbeTLS(ctx, addr)
		if err != nil {
			return err
		}
		w, err := load.Wrk(ctx, base+"/", b.o.RawConns, b.o.RawDuration)
		res = w.Result()
		res.TLS = &t
		return err
	})
	return res, err
}

// skewed is the 70/30 open-loop load with one 5×-slow origin.
func (b *bench) skewed(ctx context.Context, p proxies.Proxy, dir string, t0 origins.Tally) (results.Result, error) {
	var res results.Result
	err := b.withProxy(ctx, p, dir, "", nil, func(base, _ string, _ cpuClock) error {
		rep, err := b.mix(ctx, base, b.o.SkewDuration)
		if err != nil {
			return err
		}
		res = fromReport(rep)
		t1, err := b.origins.Tally()
		if err != nil {
			return err
		}
		d := t1.Since(t0)
		if total := d.ClassTotal(); total > 0 {
			share := float64(d.Class[slowOrigin]) / float64(total)
			res.SlowShare = &share
		}
		return nil
	})
	return res, err
}

// mix runs the load generator's 70/30 mix against base at the run's rate
// and seed for d.
func (b *bench) mix(ctx context.Context, base string, d time.Duration) (loadgen.Report, error) {
	return loadgen.Run(ctx, loadgen.Options{Target: base, Rate: b.o.Rate, Duration: d, Seed: b.o.Seed})
}

// fromReport is the load generator's report as a result row.
func fromReport(rep loadgen.Report) results.Result {
	res := results.Result{RPS: rep.Throughput, Requests: rep.Requests, SuccessRatio: rep.SuccessRatio, RateRPS: rep.Rate}
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

// overhead sends open-loop raw GETs at half of corput's raw throughput
// (or --overhead-rate) and reports the p99 added over direct.
func (b *bench) overhead(ctx context.Context, p proxies.Proxy, dir string, sofar map[string][]results.Result, round int) (results.Result, error) {
	rate := b.o.OvRate
	if rate <= 0 {
		c, ok := b.res.Find(results.ScRaw, results.Corput)
		if !ok || c.RPS <= 0 {
			return results.Result{}, fmt.Errorf("no corput raw throughput to take half of: run the raw scenario first or pass --overhead-rate")
		}
		rate = c.RPS / 2
	}
	var res results.Result
	err := b.withProxy(ctx, p, dir, "", nil, func(base, _ string, _ cpuClock) error {
		var err error
		res, err = load.OpenLoop(ctx, base+"/", rate, b.o.OvDuration, b.o.Seed)
		return err
	})
	if err != nil {
		return res, err
	}
	if p != nil && round < len(sofar[results.Direct]) {
		res.AddedP99MS = res.P99MS - sofar[results.Direct][round].P99MS
	}
	return res, nil
}

// fold stores each proxy's median round of a standard scenario: by
// req/s for raw and raw_tls, by p99 for the others.
func (b *bench) fold(sc string, names []string, rounds map[string][]results.Result) {
	key := func(r results.Result) float64 { return r.P99MS }
	desc := map[string]string{
		results.ScRaw:    fmt.Sprintf("GET a tiny response, wrk -t2 -c%d -d%v; direct = wrk straight to one origin", b.o.RawConns, b.o.RawDuration),
		results.ScRawTLS: fmt.Sprintf("raw over HTTPS/1.1: wrk -t2 -c%d -d%v, keep-alive, to each proxy over TLS; the proxy ends TLS and forwards to the same cleartext origins", b.o.RawConns, b.o.RawDuration),
		results.ScSkewed: fmt.Sprintf("4 origins × 8 workers, 70 %% 15 ms / 30 %% 140 ms, one origin 5× slower, %g req/s open-loop Poisson for %v",
			b.o.Rate, b.o.SkewDuration),
		results.ScColdJoin: fmt.Sprintf("the skewed load for %v; a fifth origin, cold (10× slow decaying to 1× over 40 s, 8 workers), starts after %v and joins; its first %v",
			b.o.JoinAfter+b.o.JoinWindow, b.o.JoinAfter, b.o.JoinWindow),
		results.ScOverhead: fmt.Sprintf("open-loop Poisson GETs of a tiny response at half of corput's raw req/s for %v, paced on a thread of their own with nanosleep; each request is timed from its scheduled arrival; added p99 = p99 through the proxy − p99 direct", b.o.OvDuration),
	}
	if sc == results.ScRaw || sc == results.ScRawTLS {
		key = func(r results.Result) float64 { return -r.RPS }
	}
	s := b.res.Scenario(sc, desc[sc])
	if sc == results.ScRawTLS {
		s.Note = rawTLSNote
	}
	s.AddMedians(names, rounds, key)
}

// foldConnections adds the connections scenario: what the origins
// accepted per proxy during raw, skewed and cold_join (first round).
func (b *bench) foldConnections() {
	if len(b.conns) == 0 {
		return
	}
	s := b.res.Scenario(results.ScConnections, "TCP connections the origins accepted while each proxy ran raw, skewed and cold_join (first round; counted by the origins)")
	for _, p := range b.proxies {
		c := b.conns[p.Name()]
		if c == nil {
			continue
		}
		var total int64
		for _, n := range c {
			total += n
		}
		c["total"] = total
		s.Results = append(s.Results, results.Result{Proxy: p.Name(), Conns: c})
	}
}

// rawTLSNote is the raw_tls scenario's note: its TLS settings, which each
// proxy takes, and which it cannot.
const rawTLSNote = "Every proxy serves the same throwaway self-signed ECDSA P-256 certificate and is set to TLS 1.3 only with " + certs.Suite +
	" as the only cipher suite where it lets that be set: nginx (ssl_protocols TLSv1.3; ssl_conf_command Ciphersuites) and HAProxy " +
	"(ssl-min-ver TLSv1.3; ciphersuites) take both. Caddy takes protocols tls1.3, and is given ciphers " + certs.Suite + ", which has no effect: " +
	"Go's crypto/tls (Caddy's and corput's) does not let TLS 1.3 cipher suites be configured. corput's tls block has only cert and key " +
	"(and client_ca), so corput offers TLS 1.2 and 1.3 with Go's defaults. Go's server picks " + certs.Suite + " itself when the CPU has " +
	"AES-GCM instructions and the client prefers an AES-GCM suite, as wrk (OpenSSL's defaults, AES-256-GCM first) does. The TLS column is " +
	"what one handshake made as wrk makes it (openssl s_client with OpenSSL's defaults, server name 127.0.0.1, no ALPN) negotiated with " +
	"each proxy before its wrk run. Keep-alive everywhere, as in raw: 64 handshakes a run, the rest is record encryption and decryption, " +
	"in wrk as in the proxy, on the same cores (the same for every proxy). " +
	"corput ends TLS in its fast path (crypto/tls over raw-syscall socket I/O) and serves HTTPS/1.1 with the same byte loop as cleartext."
