package scenarios

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/corput/corput/bench/peers/internal/certs"
	"github.com/corput/corput/bench/peers/internal/load"
	"github.com/corput/corput/bench/peers/internal/origins"
	"github.com/corput/corput/bench/peers/internal/proc"
	"github.com/corput/corput/bench/peers/internal/proxies"
	"github.com/corput/corput/bench/peers/internal/results"
)

// The h2 scenarios put each proxy that speaks HTTP/2 upstream in front of
// TLS origins that offer h2 by ALPN (`corput origin --proto tls`, one
// throwaway P-256 certificate that every proxy verifies): corput with
// protocol: auto, HAProxy (server … ssl alpn h2) and Caddy (https://
// upstreams: Go's transport, h2 by ALPN). nginx is left out: its proxy
// module speaks HTTP/1.x upstream only.
//
//   - h2_streams measures the memory a proxy grows to while it holds
//     60,000 active upstream HTTP/2 streams (seed 002's unknown G-1): an
//     h2c client (load.Streams, --h2-per-conn streams on each of its
//     connections) opens --h2-streams requests over --h2-ramp to a path
//     the origins hold for --h2-hold, so all are in flight at once for
//     the hold's last part. The proxy's process group's RSS is sampled
//     from /proc; RSS per active stream = (peak − idle) ÷ the peak of the
//     requests in service at the origins (their own counters), beside the
//     upstream connections open then, errors and latency.
//   - h2_cpu is the proxy's CPU per request on the same origins: wrk
//     -t2 -c--h2-cpu-conns (HTTP/1.1) GETs a tiny response for
//     --h2-cpu-duration after a 2 s warm-up; CPU is the proxy's process
//     group's utime + stime over the measured run, requests the origins'
//     own count of them.

// h2HoldPath is the path the origins hold for --h2-hold (their hold
// class); any other path is a tiny immediate answer.
const h2HoldPath = "/hold"

// isH2Scenario reports whether sc is one of the h2 scenarios (they start
// their own origins).
func isH2Scenario(sc string) bool { return sc == results.ScH2Streams || sc == results.ScH2CPU }

// h2Proxies are the proxies under test that speak h2 upstream.
func (b *bench) h2Proxies() []proxies.Proxy {
	var out []proxies.Proxy
	for _, p := range b.proxies {
		if p.Name() != results.Nginx {
			out = append(out, p)
		}
	}
	return out
}

// h2Origins are the h2 scenarios' TLS origins and their certificate.
type h2Origins struct {
	group origins.Group
	tc    *certs.Files
}

// startH2Origins starts --h2-origins `corput origin --proto tls`
// processes with one certificate, unlimited workers and one class, hold,
// of --h2-hold; their stats are read over HTTPS verified with the
// certificate.
func (b *bench) startH2Origins(ctx context.Context) (*h2Origins, error) {
	dir := filepath.Join(b.dir, "h2")
	tc, err := certs.Write(dir)
	if err != nil {
		return nil, fmt.Errorf("throwaway certificate: %w", err)
	}
	mix := filepath.Join(dir, "hold.yaml")
	if err := os.WriteFile(mix, fmt.Appendf(nil, "classes:\n  - {name: %s, percent: 100, latency: %v}\n", strings.TrimPrefix(h2HoldPath, "/"), b.o.H2.Hold), 0o644); err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(tc.Cert)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	g, err := origins.StartGroup(ctx, b.ps, origins.Spec{Bin: b.bin, Prefix: "t", Procs: b.o.H2.Origins, Seed: 200, GOMAXPROCS: b.o.OriginProcs,
		HTTPS: origins.HTTPSClient(&tls.Config{RootCAs: roots}),
		Args:  []string{"--proto", "tls", "--cert", tc.Cert, "--key", tc.Key, "--workers", "0", "--workload", mix}})
	if err != nil {
		return nil, err
	}
	return &h2Origins{group: g, tc: tc}, nil
}

// runH2 runs an h2 scenario: its origins, then every h2 proxy round by
// round (the order rotating), the median round per proxy.
func (b *bench) runH2(ctx context.Context, sc string) error {
	h, err := b.startH2Origins(ctx)
	if err != nil {
		return err
	}
	defer h.group.Stop()
	list := b.h2Proxies()
	rounds := map[string][]results.Result{}
	for r := 0; r < b.o.Rounds; r++ {
		for _, p := range rotate(list, r) {
			hp := proxies.H2Upstream{Proxy: p, CA: h.tc.Cert, Prior: sc == results.ScH2Streams, Timeout: b.o.H2.Hold + time.Minute, Pool: b.o.H2.CorputPool}
			var res results.Result
			if sc == results.ScH2Streams {
				res, err = b.h2StreamsOne(ctx, hp, b.runDir(sc, r, p.Name()), h.group)
			} else {
				res, err = b.h2CPUOne(ctx, hp, b.runDir(sc, r, p.Name()), h.group)
			}
			if err != nil {
				return fmt.Errorf("%s via %s: %w", sc, p.Name(), err)
			}
			res.Proxy = p.Name()
			rounds[p.Name()] = append(rounds[p.Name()], res)
			fmt.Fprintf(b.log, "peers: %s round %d %-8s %s\n", sc, r+1, p.Name(), h2Log(res))
			if err := b.settle(ctx); err != nil {
				return err
			}
		}
	}
	s := b.res.Scenario(sc, b.h2Description(sc))
	s.Note = h2Note(sc)
	key := func(r results.Result) float64 { return r.RSSPerStreamKiB + float64(r.Errors) }
	if sc == results.ScH2CPU {
		key = func(r results.Result) float64 { return r.CPUUSPerRequest }
	}
	var names []string
	for _, p := range list {
		names = append(names, p.Name())
	}
	s.AddMedians(names, rounds, key)
	return nil
}

func h2Log(r results.Result) string {
	h := r.H2
	if h == nil {
		return ""
	}
	if h.CPUUSPerRequest > 0 {
		return fmt.Sprintf("rps %.0f p99 %.2f ms cpu %.1f us/request (%.2f s for %d requests)", r.RPS, r.P99MS, h.CPUUSPerRequest, h.CPUSeconds, r.Requests)
	}
	return fmt.Sprintf("active %d (client %d) errors %d idle %.1f MiB peak %.1f MiB → %.2f KiB/stream, upstream conns %d, p99 %.0f ms%s",
		h.ActiveStreams, h.ClientActiveStreams, r.Errors, h.IdleRSSMiB, h.PeakRSSMiB, h.RSSPerStreamKiB, h.UpstreamConnections, r.P99MS, errSamples(h.ErrorSamples))
}

func errSamples(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return "; first errors: " + strings.Join(s, " | ")
}

func (b *bench) h2Description(sc string) string {
	o := b.o.H2
	if sc == results.ScH2CPU {
		return fmt.Sprintf("CPU per request through each proxy to %d TLS origins speaking h2 (ALPN): wrk -t2 -c%d -d%v (HTTP/1.1, tiny response) after a 2 s warm-up; "+
			"CPU = the proxy's utime + stime from /proc over the measured run ÷ the requests the origins answered in it", o.Origins, o.CPUConns, o.CPUDuration)
	}
	return fmt.Sprintf("seed 002 G-1: %d concurrent requests held %v by %d TLS origins speaking h2 (ALPN), started evenly over %v by an h2c client "+
		"(x/net/http2, %d streams per connection, %d connections); RSS of the proxy's process group from /proc every 200 ms; "+
		"RSS per active stream = (peak − idle) ÷ peak requests in service at the origins",
		o.Streams, o.Hold, o.Origins, o.Ramp, o.PerConn, (o.Streams+o.PerConn-1)/o.PerConn)
}

func h2Note(sc string) string {
	n := "nginx is not in this scenario: its proxy module speaks HTTP/1.x upstream only. corput: protocol auto with tls {ca} (ALPN picks h2), " +
		"its defaults otherwise; HAProxy: server … ssl verify required alpn h2, http-reuse always; Caddy: https:// upstreams (Go's transport, ALPN h2). " +
		"Every proxy verifies the origins' one throwaway P-256 certificate. "
	if sc == results.ScH2CPU {
		return n + "The machine's cores are shared by wrk, the proxy and the origins (and other work on the machine): the figures are this machine's; " +
			"the ratios are what to read."
	}
	return n + "idle RSS is read 1 s after the proxy answered its first request; peak RSS is the highest sample while the streams were held. " +
		"upstream connections are those open at the origins at the peak (the origins' own count, less the bench's stats connections). " +
		"Latency counts the hold: p99 − hold is what the proxy added. The origins (Go's HTTP/2 server) advertise 250 concurrent streams per connection."
}

// h2StreamsOne starts p fresh and holds the streams through it, sampling
// the proxy's RSS and the origins' requests in service every 200 ms.
func (b *bench) h2StreamsOne(ctx context.Context, p proxies.Proxy, dir string, group origins.Group) (results.Result, error) {
	o := b.o.H2
	base, err := group.Tally()
	if err != nil {
		return results.Result{}, err
	}
	c, addr, err := proxies.Start(ctx, b.ps, p, dir, group.Endpoints(), "", nil)
	if err != nil {
		return results.Result{}, err
	}
	defer c.Stop(10 * time.Second)
	pgid := c.Pgid()
	select {
	case <-ctx.Done():
		return results.Result{}, ctx.Err()
	case <-time.After(time.Second):
	}
	idle, err := proc.ReadGroup(pgid)
	if err != nil {
		return results.Result{}, err
	}

	var peakRSS, peakActive, upstream int64
	var sampleErr error
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			u, err := proc.ReadGroup(pgid)
			if err == nil {
				peakRSS = max(peakRSS, u.RSSBytes)
			}
			t, err2 := group.Tally()
			if err2 == nil && t.InService >= peakActive {
				peakActive, upstream = t.InService, t.Open-base.Open
			}
			if err := errors.Join(err, err2); err != nil && sampleErr == nil {
				sampleErr = err
			}
		}
	}()
	sl, lerr := load.Streams{Addr: addr, Path: h2HoldPath, N: o.Streams, PerConn: o.PerConn, Ramp: o.Ramp}.Run(ctx)
	close(stop)
	<-sampled
	if lerr != nil {
		return results.Result{}, lerr
	}
	if sampleErr != nil {
		return results.Result{}, sampleErr
	}
	res := results.Result{Requests: int64(o.Streams), Errors: sl.Errors, P50MS: sl.P50MS, P99MS: sl.P99MS, MaxMS: sl.MaxMS}
	fig := &results.H2{OfferedStreams: o.Streams, ActiveStreams: peakActive, ClientActiveStreams: sl.Peak, DownstreamConnections: sl.Conns,
		UpstreamConnections: upstream, IdleRSSMiB: mib(idle.RSSBytes), PeakRSSMiB: mib(peakRSS), HoldS: o.Hold.Seconds(), ErrorSamples: sl.Samples}
	if peakActive > 0 {
		fig.RSSPerStreamKiB = results.Round3(float64(peakRSS-idle.RSSBytes) / float64(peakActive) / 1024)
	}
	res.H2 = fig
	return res, nil
}

func mib(b int64) float64 { return results.Round3(float64(b) / (1 << 20)) }

// h2CPUOne starts p fresh, warms it, and measures its CPU per request
// under wrk.
func (b *bench) h2CPUOne(ctx context.Context, p proxies.Proxy, dir string, group origins.Group) (results.Result, error) {
	o := b.o.H2
	c, addr, err := proxies.Start(ctx, b.ps, p, dir, group.Endpoints(), "", nil)
	if err != nil {
		return results.Result{}, err
	}
	defer c.Stop(10 * time.Second)
	url := "http://" + addr + "/"
	if _, err := load.Wrk(ctx, url, o.CPUConns, 2*time.Second); err != nil {
		return results.Result{}, fmt.Errorf("warm-up: %w", err)
	}
	pgid := c.Pgid()
	u0, err := proc.ReadGroup(pgid)
	if err != nil {
		return results.Result{}, err
	}
	var w load.WrkResult
	d, err := group.During(func() (err error) {
		w, err = load.Wrk(ctx, url, o.CPUConns, o.CPUDuration)
		return err
	})
	if err != nil {
		return results.Result{}, err
	}
	u1, err := proc.ReadGroup(pgid)
	if err != nil {
		return results.Result{}, err
	}
	reqs := d.Raw
	res := w.Result()
	res.Requests = reqs
	cpu := (u1.CPU() - u0.CPU()).Seconds()
	fig := &results.H2{CPUSeconds: results.Round3(cpu)}
	if reqs > 0 {
		fig.CPUUSPerRequest = results.Round3(cpu * 1e6 / float64(reqs))
	}
	res.H2 = fig
	return res, nil
}
