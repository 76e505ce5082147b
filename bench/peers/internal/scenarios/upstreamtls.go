package scenarios

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/corput/corput/bench/peers/internal/certs"
	"github.com/corput/corput/bench/peers/internal/load"
	"github.com/corput/corput/bench/peers/internal/origins"
	"github.com/corput/corput/bench/peers/internal/proc"
	"github.com/corput/corput/bench/peers/internal/proxies"
	"github.com/corput/corput/bench/peers/internal/results"
)

// Two scenarios put every proxy in front of TLS origins that require a
// client certificate (mTLS), as seed 003's production does, and count at
// the origins what that costs: TLS handshakes (full and resumed, from the
// origins' VerifyConnection), TCP connections, and the proxy's own CPU.
//
//   - tls_origins: 16 endpoints (--tls-origins processes × --tls-listeners
//     listeners); the skewed 70/30 mix at --rate for --skewed-duration,
//     then wrk -c64 on a tiny response for --raw-duration.
//   - many_endpoints: 64 endpoints (--many-origins × --many-listeners); the
//     same mix at --rate for --many-warmup, then for --many-window (60 s,
//     well inside corput's 10 min max_lifetime and every peer's keep-alive
//     timeout), where the handshakes and connections are counted.
//
// Every proxy gets the same TLS: the origins serve TLS 1.3 only
// (--min-tls 1.3) with one ECDSA P-256 certificate issued by the run's CA
// and demand a client certificate from that CA; each proxy presents the
// run's one P-256 client certificate and verifies the origin against the
// CA (proxies.TLSUpstream). nginx and HAProxy (OpenSSL) are also told TLS
// 1.3 and TLS_AES_128_GCM_SHA256 only; Go's clients (corput, Caddy) offer
// AES-128-GCM first on CPUs with AES instructions, and every origin
// records what each handshake negotiated.

// startTLSOrigins starts procs `corput origin --proto tls` processes with
// listeners listeners each (the default profile's classes, unlimited
// workers, keep-alive connections kept 10 min), their stats read over
// one mTLS connection each.
func (b *bench) startTLSOrigins(ctx context.Context, prefix string, procs, listeners int) (origins.Group, error) {
	if b.up == nil {
		u, err := certs.WriteUpstream(filepath.Join(b.dir, "upstream-tls"))
		if err != nil {
			return nil, fmt.Errorf("upstream certificates: %w", err)
		}
		b.up = u
	}
	return origins.StartGroup(ctx, b.ps, origins.Spec{Bin: b.bin, Prefix: prefix, Procs: procs, Seed: 300, GOMAXPROCS: b.o.OriginProcs,
		Listeners: listeners, HTTPS: origins.HTTPSClient(b.up.Client),
		Args: []string{"--proto", "tls", "--cert", b.up.Cert, "--key", b.up.Key, "--client-ca", b.up.CA, "--min-tls", b.up.OriginsMin,
			"--workers", "0", "--profile", "default", "--idle-timeout", "10m"}})
}

// runUpstreamTLS runs tls_origins or many_endpoints through every proxy,
// round by round, the proxies' order rotating, and folds the results.
func (b *bench) runUpstreamTLS(ctx context.Context, sc string) error {
	procs, listeners, prefix := b.o.TLS.Origins, b.o.TLS.Listeners, "t"
	if sc == results.ScManyEndpoints {
		procs, listeners, prefix = b.o.Many.Origins, b.o.Many.Listeners, "m"
	}
	group, err := b.startTLSOrigins(ctx, prefix, procs, listeners)
	if err != nil {
		return err
	}
	defer group.Stop()
	rounds := map[string][]results.Result{}
	for r := 0; r < b.o.Rounds; r++ {
		for _, p := range rotate(b.proxies, r) {
			res, err := b.upstreamTLSOne(ctx, sc, p, b.runDir(sc, r, p.Name()), group)
			if err != nil {
				return fmt.Errorf("%s via %s: %w", sc, p.Name(), err)
			}
			rounds[p.Name()] = append(rounds[p.Name()], res)
			u := res.Upstream
			fmt.Fprintf(b.log, "peers: %s round %d %-8s handshakes %d full + %d resumed, %d connections, p99 %.1f ms, %.0f µs CPU/request, window %.2f handshakes/s %v\n",
				sc, r+1, p.Name(), u.HandshakesFull, u.HandshakesResumed, u.Connections, u.P99MS, u.CPUusPerRequest, u.HandshakesPerS, u.Negotiated)
			if err := b.settle(ctx); err != nil {
				return err
			}
		}
	}
	s := b.res.Scenario(sc, b.upstreamTLSDescription(sc, len(group.Endpoints())))
	s.Note = upstreamTLSNote
	var names []string
	for _, p := range b.proxies {
		names = append(names, p.Name())
	}
	s.AddMedians(names, rounds, func(r results.Result) float64 { return r.P99MS })
	return nil
}

func (b *bench) upstreamTLSDescription(sc string, endpoints int) string {
	if sc == results.ScManyEndpoints {
		return fmt.Sprintf("%d mTLS endpoints (%d origin processes × %d listeners, TLS 1.3 only, client certificates required); the skewed 70/30 mix at %g req/s "+
			"for %v of warm-up, then %v counted: handshakes/s and connections at the origins", endpoints, b.o.Many.Origins, b.o.Many.Listeners, b.o.Rate, b.o.Many.Warmup, b.o.Many.Window)
	}
	return fmt.Sprintf("%d mTLS endpoints (%d origin processes × %d listeners, TLS 1.3 only, client certificates required); the skewed 70/30 mix at %g req/s for %v, "+
		"then wrk -t2 -c%d -d%v; handshakes and connections counted by the origins, the proxy's CPU from /proc", endpoints, b.o.TLS.Origins, b.o.TLS.Listeners, b.o.Rate, b.o.SkewDuration, b.o.RawConns, b.o.RawDuration)
}

// upstreamTLSNote says what the two scenarios' figures are.
const upstreamTLSNote = "Handshakes: counted by the origins in tls.Config.VerifyConnection (every handshake; resumed = ConnectionState.DidResume), " +
	"from just before the proxy starts (its pre-warming counts) to the end of its loads. Connections: TCP connections the origins accepted in that time. " +
	"CPU: utime + stime of the proxy's process group (nginx's master and workers, HAProxy's and Caddy's threads, corput's) from /proc/<pid>/stat, " +
	"over the loads, per request the origins received. Every proxy presents the run's P-256 client certificate and verifies the origins against the run's CA; " +
	"the origins serve TLS 1.3 only; nginx and HAProxy are set to TLS_AES_128_GCM_SHA256 only, Go's clients (corput, Caddy) pick it first (negotiated: what the origins saw). " +
	"HTTP/2 upstream for corput (protocol: auto; --tls-corput-protocol may set h1, and negotiated says what was spoken), HAProxy (alpn h2,http/1.1) and Caddy; HTTP/1.1 for nginx."

// upstreamTLSOne starts p fresh in front of the TLS origins and runs sc's
// loads.
func (b *bench) upstreamTLSOne(ctx context.Context, sc string, p proxies.Proxy, dir string, group origins.Group) (results.Result, error) {
	if err := ctx.Err(); err != nil {
		return results.Result{}, err
	}
	members := group.Endpoints()
	t0, err := group.Tally()
	if err != nil {
		return results.Result{}, err
	}
	c, addr, err := proxies.Start(ctx, b.ps, proxies.TLSUpstream{Proxy: p, Up: b.up, CorputProtocol: b.o.TLS.CorputProtocol}, dir, members, "", nil)
	if err != nil {
		return results.Result{}, err
	}
	defer c.Stop(10 * time.Second)
	base := "http://" + addr
	u := &results.UpstreamTLS{Endpoints: len(members)}
	res := results.Result{Proxy: p.Name(), Upstream: u}
	pgid := c.Pgid()
	cpu0, tl0 := proc.GroupCPU(pgid), t0
	if sc == results.ScManyEndpoints {
		if _, err := b.mix(ctx, base, b.o.Many.Warmup); err != nil {
			return res, err
		}
		if tl0, err = group.Tally(); err != nil {
			return res, err
		}
		cpu0 = proc.GroupCPU(pgid)
	}
	first := b.o.SkewDuration
	if sc == results.ScManyEndpoints {
		first = b.o.Many.Window
	}
	rep, err := b.mix(ctx, base, first)
	if err != nil {
		return res, err
	}
	res = fromReport(rep)
	res.Proxy, res.Upstream = p.Name(), u
	u.P99MS = res.P99MS
	cpu1 := proc.GroupCPU(pgid)
	t1, err := group.Tally()
	if err != nil {
		return res, err
	}
	u.SkewedCPUusPerRequest = perRequest(cpu1-cpu0, t1.Since(tl0).Requests)
	last, cpuLast := t1, cpu1
	if sc == results.ScTLSOrigins {
		w, err := load.Wrk(ctx, base+"/", b.o.RawConns, b.o.RawDuration)
		if err != nil {
			return res, err
		}
		u.RawRPS, u.RawP99MS = w.RPS, w.P99MS
		cpuLast = proc.GroupCPU(pgid)
		if last, err = group.Tally(); err != nil {
			return res, err
		}
		u.RawCPUusPerRequest = perRequest(cpuLast-cpu1, last.Since(t1).Requests)
	}
	d := last.Since(t0)
	u.HandshakesFull, u.HandshakesResumed, u.Connections, u.Negotiated = d.Full, d.Resumed, d.Accepted, d.Negotiated
	u.CPUusPerRequest = perRequest(cpuLast-cpu0, last.Since(tl0).Requests)
	if sc == results.ScManyEndpoints {
		w, warm := t1.Since(tl0), tl0.Since(t0)
		u.WarmupS, u.WindowS = int(b.o.Many.Warmup/time.Second), int(b.o.Many.Window/time.Second)
		u.WindowHandshakes = w.Full + w.Resumed
		u.HandshakesPerS = results.Round3(float64(u.WindowHandshakes) / b.o.Many.Window.Seconds())
		u.WindowConnections, u.OpenConnections = w.Accepted, t1.Open
		u.WarmupHandshakes, u.WarmupConnectionsIn = warm.Full+warm.Resumed, warm.Accepted
	}
	return res, nil
}
