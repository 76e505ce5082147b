package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"

	"github.com/corput/corput/internal/origin"
)

// The h2 scenarios put each proxy that speaks HTTP/2 upstream in front of
// TLS origins that offer h2 by ALPN (`corput origin --proto tls`, one
// throwaway P-256 certificate that every proxy verifies): corput with
// protocol: auto, HAProxy (server … ssl alpn h2) and Caddy (https://
// upstreams: Go's transport, h2 by ALPN). nginx is left out: its proxy
// module speaks HTTP/1.x upstream only.
//
//   - h2_streams answers seed 002's unknown G-1, the memory a proxy grows
//     to while it holds 60,000 active upstream HTTP/2 streams: an h2c
//     client (x/net/http2, --h2-per-conn streams on each of its
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
const (
	scH2Streams = "h2_streams"
	scH2CPU     = "h2_cpu"
)

// h2HoldPath is the path the origins hold for --h2-hold (their hold
// class); any other path is a tiny immediate answer.
const h2HoldPath = "/hold"

// h2Options are the h2 scenarios' flags.
type h2Options struct {
	origins     int
	streams     int
	perConn     int
	ramp        time.Duration
	hold        time.Duration
	cpuDuration time.Duration
	cpuConns    int
	corputPool  string // corput's pool: line's flow mapping; "" for its defaults
}

// bindH2Flags defines the h2 scenarios' flags on fs.
func bindH2Flags(fs *flag.FlagSet, o *h2Options) {
	fs.IntVar(&o.origins, "h2-origins", 4, "h2_streams, h2_cpu: TLS origin processes (h2 by ALPN)")
	fs.IntVar(&o.streams, "h2-streams", 60000, "h2_streams: concurrent long requests (seed 002's G-1: 60,000)")
	fs.IntVar(&o.perConn, "h2-per-conn", 100, "h2_streams: streams per downstream h2c connection (HAProxy's default limit is 100)")
	fs.DurationVar(&o.ramp, "h2-ramp", 60*time.Second, "h2_streams: the requests start evenly over this")
	fs.DurationVar(&o.hold, "h2-hold", 90*time.Second, "h2_streams: the origins hold each request this long (more than --h2-ramp, so all are in flight at once)")
	fs.DurationVar(&o.cpuDuration, "h2-cpu-duration", 10*time.Second, "h2_cpu: measured wrk run")
	fs.IntVar(&o.cpuConns, "h2-cpu-conns", 64, "h2_cpu: wrk connections")
	fs.StringVar(&o.corputPool, "h2-corput-pool", "", "h2_streams, h2_cpu: corput's origins[].pool `YAML` flow mapping, e.g. '{acquire_timeout: 1s}' (default: none, corput's defaults)")
}

// validate checks the h2 flags.
func (o h2Options) validate() error {
	for _, v := range []struct {
		name string
		n    int
	}{{"--h2-origins", o.origins}, {"--h2-streams", o.streams}, {"--h2-per-conn", o.perConn}, {"--h2-cpu-conns", o.cpuConns}} {
		if v.n < 1 {
			return fmt.Errorf("%s %d: want 1 or more", v.name, v.n)
		}
	}
	if o.hold <= o.ramp {
		return fmt.Errorf("--h2-hold %v: want more than --h2-ramp %v, or the first requests end before the last start", o.hold, o.ramp)
	}
	if o.cpuDuration < time.Second {
		return fmt.Errorf("--h2-cpu-duration %v: want at least 1s (wrk counts whole seconds)", o.cpuDuration)
	}
	return nil
}

// isH2Scenario reports whether sc is one of the h2 scenarios (they start
// their own origins).
func isH2Scenario(sc string) bool { return sc == scH2Streams || sc == scH2CPU }

// h2Proxies are the proxies under test that speak h2 upstream.
func (b *bench) h2Proxies() []proxy {
	var out []proxy
	for _, p := range b.proxies {
		if p.name() != nameNginx {
			out = append(out, p)
		}
	}
	return out
}

// h2Runs is how many proxy runs an h2 scenario makes.
func (b *bench) h2Runs() int { return len(b.h2Proxies()) * b.o.rounds }

// H2 is an h2 scenario's figures beyond Result's own; its fields sit in
// the result's object.
type H2 struct {
	// h2_streams
	OfferedStreams        int     `json:"offered_streams,omitempty"`
	ActiveStreams         int64   `json:"active_streams,omitempty"`        // peak in service at the origins
	ClientActiveStreams   int64   `json:"client_active_streams,omitempty"` // peak awaiting an answer at the client
	DownstreamConnections int     `json:"downstream_connections,omitempty"`
	UpstreamConnections   int64   `json:"upstream_connections"` // open at the origins at the peak (their own count)
	IdleRSSMiB            float64 `json:"idle_rss_mib,omitempty"`
	PeakRSSMiB            float64 `json:"peak_rss_mib,omitempty"`
	RSSPerStreamKiB       float64 `json:"rss_per_active_stream_kib,omitempty"`
	HoldS                 float64 `json:"hold_s,omitempty"`
	// h2_cpu
	CPUUSPerRequest float64 `json:"cpu_us_per_request,omitempty"`
	CPUSeconds      float64 `json:"cpu_s,omitempty"`
	// ErrorSamples are the first few errors' texts.
	ErrorSamples []string `json:"error_samples,omitempty"`
}

// h2Origins are the h2 scenarios' TLS origins and their certificate.
type h2Origins struct {
	procs  []*originProc
	tc     *tlsFiles
	client *http.Client // for their stats, over HTTPS verified with tc
}

// startH2Origins starts --h2-origins `corput origin --proto tls`
// processes with one certificate, unlimited workers and one class, hold,
// of --h2-hold.
func (b *bench) startH2Origins(ctx context.Context) (*h2Origins, error) {
	dir := filepath.Join(b.dir, "h2")
	tc, err := writeTLSFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("throwaway certificate: %w", err)
	}
	mix := filepath.Join(dir, "hold.yaml")
	if err := os.WriteFile(mix, fmt.Appendf(nil, "classes:\n  - {name: %s, percent: 100, latency: %v}\n", strings.TrimPrefix(h2HoldPath, "/"), b.o.h2.hold), 0o644); err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(tc.cert)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	h := &h2Origins{tc: tc, client: &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}}
	for i := 1; i <= b.o.h2.origins; i++ {
		o, err := startOrigin(ctx, b.ps, b.bin, fmt.Sprintf("t%d", i), "127.0.0.1:0", uint64(200+i), b.o.originProcs,
			"--proto", "tls", "--cert", tc.cert, "--key", tc.key, "--workers", "0", "--workload", mix)
		if err != nil {
			h.stop()
			return nil, err
		}
		h.procs = append(h.procs, o)
	}
	return h, nil
}

func (h *h2Origins) stop() {
	for _, o := range h.procs {
		o.c.stop(5 * time.Second)
	}
	h.client.CloseIdleConnections()
}

func (h *h2Origins) members() []string {
	out := make([]string, len(h.procs))
	for i, o := range h.procs {
		out[i] = o.addr
	}
	return out
}

// h2Tally is the origins' counters summed at one moment.
type h2Tally struct {
	inService int64 // requests in service now
	open      int64 // connections open now
	raw       int64 // raw (tiny) requests answered so far
}

func (h *h2Origins) tally() (h2Tally, error) {
	var t h2Tally
	for _, o := range h.procs {
		resp, err := h.client.Get("https://" + o.addr + origin.StatsPath)
		if err != nil {
			return t, fmt.Errorf("origin %s stats: %w", o.id, err)
		}
		var st origin.Stats
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			return t, fmt.Errorf("origin %s stats: %w", o.id, err)
		}
		t.inService += st.Concurrency.Current
		t.open += st.Connections.Open
		t.raw += st.Requests[origin.RawClass].Total()
	}
	return t, nil
}

// h2Proxy is a proxy set up for the h2 scenarios: h2 upstream to the TLS
// origins, verified with their certificate ca, and a cleartext listener,
// h2c by prior knowledge when prior is set (h2_streams' client).
type h2Proxy struct {
	proxy
	ca      string
	prior   bool
	timeout time.Duration // the proxies' upstream request / server timeouts
	fwd     bool          // HAProxy adds the X-Forwarded-* fields
	pool    string        // corput's pool: flow mapping; "" for none
}

func (p h2Proxy) h2c() bool { return p.prior }

func (p h2Proxy) files(dir, listen string, members []string, _ string, _ *tlsFiles) ([]string, error) {
	var name, text string
	var argv []string
	switch v := p.proxy.(type) {
	case corputProxy:
		admin, err := freePort()
		if err != nil {
			return nil, err
		}
		name = "corput.yaml"
		text = corputH2Config(listen, admin, members, p.ca, v.balancer, p.pool, p.timeout)
		argv = []string{v.bin_, "serve", "--config", filepath.Join(dir, name), "--log-level", "warn"}
	case haproxyProxy:
		name = "haproxy.cfg"
		text = haproxyH2Config(dir, listen, members, p.ca, p.prior, v.fwd, p.timeout)
		argv = []string{"haproxy", "-db", "-f", filepath.Join(dir, name)}
	case caddyProxy:
		name = "Caddyfile"
		text = caddyH2Config(listen, members, p.ca, p.prior)
		argv = []string{"caddy", "run", "--config", filepath.Join(dir, name), "--adapter", "caddyfile"}
	default:
		return nil, fmt.Errorf("%s does not speak HTTP/2 upstream", p.name())
	}
	return argv, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)
}

// corputH2Config is corput at its defaults but for the origin's protocol
// (auto: ALPN picks h2), its TLS (verified with ca) and a request timeout
// above the hold; pool, when set, is its pool: line (--h2-corput-pool).
func corputH2Config(listen, admin string, members []string, ca, balancer, pool string, timeout time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %s\nadmin: %s\n", listen, admin)
	b.WriteString("routes:\n  - {path_prefix: /, origin: " + corputOrigin + "}\n")
	b.WriteString("origins:\n  - name: " + corputOrigin + "\n    protocol: auto\n")
	fmt.Fprintf(&b, "    tls: {ca: %q}\n", ca)
	b.WriteString(endpointsYAML(members, "    "))
	if balancer == "" {
		balancer = defaultBalancer
	}
	b.WriteString("    balancer: " + balancer + "\n")
	if pool != "" {
		b.WriteString("    pool: " + pool + "\n")
	}
	fmt.Fprintf(&b, "    timeouts: {connect: 1s, request: %v}\n", timeout)
	return b.String()
}

// haproxyH2Config: leastconn over h2 (alpn h2) TLS servers verified with
// ca, http-reuse always (streams share connections up to each origin's
// SETTINGS_MAX_CONCURRENT_STREAMS), no per-server maxconn (nothing
// queues), global maxconn 8000 (its file descriptors stay under this
// machine's hard limit of 20000; streams are not connections), and with
// prior an h2c listener.
func haproxyH2Config(dir, listen string, members []string, ca string, prior, fwd bool, timeout time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
  maxconn 8000
  pidfile %s/haproxy.pid
defaults
  mode http
  option http-keep-alive
  http-reuse always
  timeout connect 1s
  timeout client %[3]s
  timeout server %[3]s
  timeout http-keep-alive 60s
frontend fe
  bind %[2]s
%[4]s  default_backend origins
backend origins
  balance leastconn
`, dir, listen+haproxyH2C(prior), haproxyDuration(timeout), haproxyForwarded(fwd, false))
	for i, m := range members {
		fmt.Fprintf(&b, "  server t%d %s ssl verify required ca-file %s alpn h2\n", i+1, m, ca)
	}
	return b.String()
}

// haproxyDuration is d in HAProxy's units (whole seconds).
func haproxyDuration(d time.Duration) string { return strconv.Itoa(int(d/time.Second)) + "s" }

// caddyH2Config: least_conn over https:// upstreams verified with ca
// (Go's transport offers h2 and HTTP/1.1 by ALPN; the origins pick h2),
// keep-alive as in the other scenarios, and with prior HTTP/1.1 and h2c
// on the listener.
func caddyH2Config(listen string, members []string, ca string, prior bool) string {
	global := ""
	if prior {
		global = "\tservers {\n\t\tprotocols h1 h2c\n\t}\n"
	}
	ups := make([]string, len(members))
	for i, m := range members {
		ups[i] = "https://" + m
	}
	return fmt.Sprintf(`{
	admin off
	auto_https off
%s}
http://%s {
	reverse_proxy %s {
		lb_policy least_conn
		transport http {
			tls_trusted_ca_certs %s
			keepalive 60s
			keepalive_idle_conns 256
			keepalive_idle_conns_per_host 64
		}
	}
}
`, global, listen, strings.Join(ups, " "), ca)
}

// runH2 runs an h2 scenario: its origins, then every h2 proxy round by
// round (the order rotating), the median round per proxy.
func (b *bench) runH2(ctx context.Context, sc string) error {
	h, err := b.startH2Origins(ctx)
	if err != nil {
		return err
	}
	defer h.stop()
	proxies := b.h2Proxies()
	rounds := map[string][]Result{}
	for r := 0; r < b.o.rounds; r++ {
		k := r % len(proxies)
		for _, p := range append(slices.Clone(proxies[k:]), proxies[:k]...) {
			dir := filepath.Join(b.dir, fmt.Sprintf("%s-r%d-%s", sc, r+1, p.name()))
			hp := h2Proxy{proxy: p, ca: h.tc.cert, prior: sc == scH2Streams, timeout: b.o.h2.hold + time.Minute, fwd: b.o.forwarded, pool: b.o.h2.corputPool}
			var res Result
			if sc == scH2Streams {
				res, err = b.h2StreamsOne(ctx, hp, dir, h)
			} else {
				res, err = b.h2CPUOne(ctx, hp, dir, h)
			}
			if err != nil {
				return fmt.Errorf("%s via %s: %w", sc, p.name(), err)
			}
			res.Proxy = p.name()
			rounds[p.name()] = append(rounds[p.name()], res)
			fmt.Fprintf(b.log, "peers: %s round %d %-8s %s\n", sc, r+1, p.name(), h2Log(res))
			b.bar.Add(1)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
		}
	}
	s := b.res.scenario(sc, b.h2Description(sc))
	s.Note = h2Note(sc)
	key := func(r Result) float64 { return r.RSSPerStreamKiB + float64(r.Errors) }
	if sc == scH2CPU {
		key = func(r Result) float64 { return r.CPUUSPerRequest }
	}
	for _, p := range proxies {
		if rs := rounds[p.name()]; len(rs) > 0 {
			s.Results = append(s.Results, median(rs, key))
		}
	}
	return nil
}

func h2Log(r Result) string {
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
	o := b.o.h2
	if sc == scH2CPU {
		return fmt.Sprintf("CPU per request through each proxy to %d TLS origins speaking h2 (ALPN): wrk -t2 -c%d -d%v (HTTP/1.1, tiny response) after a 2 s warm-up; "+
			"CPU = the proxy's utime + stime from /proc over the measured run ÷ the requests the origins answered in it", o.origins, o.cpuConns, o.cpuDuration)
	}
	return fmt.Sprintf("seed 002 G-1: %d concurrent requests held %v by %d TLS origins speaking h2 (ALPN), started evenly over %v by an h2c client "+
		"(x/net/http2, %d streams per connection, %d connections); RSS of the proxy's process group from /proc every 200 ms; "+
		"RSS per active stream = (peak − idle) ÷ peak requests in service at the origins",
		o.streams, o.hold, o.origins, o.ramp, o.perConn, (o.streams+o.perConn-1)/o.perConn)
}

func h2Note(sc string) string {
	n := "nginx is not in this scenario: its proxy module speaks HTTP/1.x upstream only. corput: protocol auto with tls {ca} (ALPN picks h2), " +
		"its defaults otherwise; HAProxy: server … ssl verify required alpn h2, http-reuse always; Caddy: https:// upstreams (Go's transport, ALPN h2). " +
		"Every proxy verifies the origins' one throwaway P-256 certificate. "
	if sc == scH2CPU {
		return n + "The machine's cores are shared by wrk, the proxy and the origins (and other work on the machine): the figures are this machine's; " +
			"the ratios are what to read."
	}
	return n + "idle RSS is read 1 s after the proxy answered its first request; peak RSS is the highest sample while the streams were held. " +
		"upstream connections are those open at the origins at the peak (the origins' own count, less the bench's stats connections). " +
		"Latency counts the hold: p99 − hold is what the proxy added. The origins (Go's HTTP/2 server) advertise 250 concurrent streams per connection."
}

// h2StreamsOne starts p fresh and holds the streams through it.
func (b *bench) h2StreamsOne(ctx context.Context, p h2Proxy, dir string, h *h2Origins) (Result, error) {
	o := b.o.h2
	base, err := h.tally()
	if err != nil {
		return Result{}, err
	}
	c, addr, err := startProxy(ctx, b.ps, p, dir, h.members(), "", nil)
	if err != nil {
		return Result{}, err
	}
	defer c.stop(10 * time.Second)
	pgid := c.cmd.Process.Pid
	select {
	case <-ctx.Done():
		return Result{}, ctx.Err()
	case <-time.After(time.Second):
	}
	idle, err := readGroup(pgid)
	if err != nil {
		return Result{}, err
	}

	var peakRSS, peakActive, upstream int64
	var sampleErr error
	stop := make(chan struct{})
	sampled := make(chan struct{})
	var sl *streamLoad
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
			u, err := readGroup(pgid)
			if err == nil {
				peakRSS = max(peakRSS, u.RSSBytes)
			}
			t, err2 := h.tally()
			if err2 == nil && t.inService >= peakActive {
				peakActive, upstream = t.inService, t.open-base.open
			}
			if err := errors.Join(err, err2); err != nil && sampleErr == nil {
				sampleErr = err
			}
		}
	}()
	sl = &streamLoad{addr: addr, path: h2HoldPath, n: o.streams, perConn: o.perConn, ramp: o.ramp}
	lerr := sl.run(ctx)
	close(stop)
	<-sampled
	if lerr != nil {
		return Result{}, lerr
	}
	if sampleErr != nil {
		return Result{}, sampleErr
	}
	res := Result{Requests: int64(o.streams), Errors: sl.errors.Load()}
	if len(sl.lat) > 0 {
		slices.Sort(sl.lat)
		res.P50MS, res.P99MS, res.MaxMS = pct(sl.lat, 0.50), pct(sl.lat, 0.99), msOf(sl.lat[len(sl.lat)-1])
	}
	fig := &H2{OfferedStreams: o.streams, ActiveStreams: peakActive, ClientActiveStreams: sl.peak.Load(), DownstreamConnections: sl.conns,
		UpstreamConnections: upstream, IdleRSSMiB: mib(idle.RSSBytes), PeakRSSMiB: mib(peakRSS), HoldS: o.hold.Seconds(), ErrorSamples: sl.samples}
	if peakActive > 0 {
		fig.RSSPerStreamKiB = round3(float64(peakRSS-idle.RSSBytes) / float64(peakActive) / 1024)
	}
	res.H2 = fig
	return res, nil
}

func mib(b int64) float64 { return round3(float64(b) / (1 << 20)) }

// h2CPUOne starts p fresh, warms it, and measures its CPU per request
// under wrk.
func (b *bench) h2CPUOne(ctx context.Context, p h2Proxy, dir string, h *h2Origins) (Result, error) {
	o := b.o.h2
	c, addr, err := startProxy(ctx, b.ps, p, dir, h.members(), "", nil)
	if err != nil {
		return Result{}, err
	}
	defer c.stop(10 * time.Second)
	url := "http://" + addr + "/"
	if _, _, err := runWrk(ctx, url, o.cpuConns, 2*time.Second); err != nil {
		return Result{}, fmt.Errorf("warm-up: %w", err)
	}
	pgid := c.cmd.Process.Pid
	u0, err := readGroup(pgid)
	if err != nil {
		return Result{}, err
	}
	t0, err := h.tally()
	if err != nil {
		return Result{}, err
	}
	w, _, err := runWrk(ctx, url, o.cpuConns, o.cpuDuration)
	if err != nil {
		return Result{}, err
	}
	u1, err := readGroup(pgid)
	if err != nil {
		return Result{}, err
	}
	t1, err := h.tally()
	if err != nil {
		return Result{}, err
	}
	reqs := t1.raw - t0.raw
	res := Result{RPS: w.RPS, P50MS: w.P50MS, P99MS: w.P99MS, Errors: w.Errors, Requests: reqs}
	cpu := float64(u1.CPUTicks-u0.CPUTicks) / clockTicks
	fig := &H2{CPUSeconds: round3(cpu)}
	if reqs > 0 {
		fig.CPUUSPerRequest = round3(cpu * 1e6 / float64(reqs))
	}
	res.H2 = fig
	return res, nil
}

// streamLoad is h2_streams' client: n GETs of path on addr, started
// evenly over ramp, perConn on each of its h2c (prior knowledge)
// connections, every one held open until its answer ends.
type streamLoad struct {
	addr, path string
	n, perConn int
	ramp       time.Duration

	conns   int
	lat     []time.Duration // of the requests answered 200
	errors  atomic.Int64
	active  atomic.Int64
	peak    atomic.Int64
	mu      sync.Mutex // guards lat and samples
	samples []string
}

// maxErrSamples bounds the error texts kept.
const maxErrSamples = 5

func (l *streamLoad) run(ctx context.Context) error {
	raiseFDLimit()
	l.conns = (l.n + l.perConn - 1) / l.perConn
	t := &http2.Transport{AllowHTTP: true}
	ccs := make([]*http2.ClientConn, 0, l.conns)
	defer func() {
		for _, cc := range ccs {
			cc.Close()
		}
	}()
	var d net.Dialer
	for range l.conns {
		nc, err := d.DialContext(ctx, "tcp", l.addr)
		if err != nil {
			return fmt.Errorf("dial %s: %w", l.addr, err)
		}
		cc, err := t.NewClientConn(nc)
		if err != nil {
			nc.Close()
			return fmt.Errorf("h2c to %s: %w", l.addr, err)
		}
		ccs = append(ccs, cc)
	}
	l.lat = make([]time.Duration, 0, l.n)
	var wg sync.WaitGroup
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < l.n; {
		due := l.n
		if l.ramp > 0 {
			due = min(l.n, int(int64(l.n)*int64(time.Since(start))/int64(l.ramp))+1)
		}
		for ; i < due; i++ {
			wg.Add(1)
			go func(cc *http2.ClientConn) {
				defer wg.Done()
				l.one(ctx, cc)
			}(ccs[i%len(ccs)])
		}
		if i < l.n {
			select {
			case <-ctx.Done():
				wg.Wait()
				return ctx.Err()
			case <-tick.C:
			}
		}
	}
	wg.Wait()
	return ctx.Err()
}

// one sends one request on cc and reads its answer to the end.
func (l *streamLoad) one(ctx context.Context, cc *http2.ClientConn) {
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.addr+l.path, nil)
	if err != nil {
		l.fail(err.Error())
		return
	}
	storeMax(&l.peak, l.active.Add(1))
	resp, err := cc.RoundTrip(req)
	l.active.Add(-1)
	if err != nil {
		l.fail(err.Error())
		return
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		l.fail("body: " + err.Error())
	case resp.StatusCode != http.StatusOK:
		l.fail(fmt.Sprintf("%s %s", resp.Status, resp.Header.Get("X-Corput-Error")))
	default:
		d := time.Since(t0)
		l.mu.Lock()
		l.lat = append(l.lat, d)
		l.mu.Unlock()
	}
}

func (l *streamLoad) fail(msg string) {
	l.errors.Add(1)
	l.mu.Lock()
	if len(l.samples) < maxErrSamples {
		l.samples = append(l.samples, msg)
	}
	l.mu.Unlock()
}

// raiseFDLimit lifts this process's soft RLIMIT_NOFILE to its hard limit
// (the client's connections and the sockets net/http keeps).
func raiseFDLimit() {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) == nil && r.Cur < r.Max {
		r.Cur = r.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
	}
}

// storeMax raises v to n if n is higher.
func storeMax(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// h2Table is an h2 scenario's table, with corput/peer ratios (c is
// corput's row).
func h2Table(s Scenario, c Result) ([]string, [][]string) {
	var rows [][]string
	fig := func(r Result) H2 {
		if r.H2 == nil {
			return H2{}
		}
		return *r.H2
	}
	cf := fig(c)
	if s.Name == scH2CPU {
		for _, x := range s.Results {
			f := fig(x)
			rows = append(rows, []string{x.Proxy, fmt.Sprintf("%.0f", x.RPS), ms(x.P50MS), ms(x.P99MS), strconv.FormatInt(x.Errors, 10),
				strconv.FormatInt(x.Requests, 10), fmt.Sprintf("%.2f", f.CPUSeconds), fmt.Sprintf("%.1f", f.CPUUSPerRequest),
				ratio(cf.CPUUSPerRequest, f.CPUUSPerRequest, x.Proxy)})
		}
		return []string{"proxy", "req/s", "p50 ms", "p99 ms", "errors", "requests", "CPU s", "CPU µs/request", "corput/peer CPU"}, rows
	}
	for _, x := range s.Results {
		f := fig(x)
		rows = append(rows, []string{x.Proxy, strconv.Itoa(f.OfferedStreams), strconv.FormatInt(f.ActiveStreams, 10), strconv.FormatInt(x.Errors, 10),
			fmt.Sprintf("%.1f", f.IdleRSSMiB), fmt.Sprintf("%.1f", f.PeakRSSMiB), fmt.Sprintf("%.2f", f.RSSPerStreamKiB),
			ratio(cf.RSSPerStreamKiB, f.RSSPerStreamKiB, x.Proxy), strconv.Itoa(f.DownstreamConnections), strconv.FormatInt(f.UpstreamConnections, 10),
			ms(x.P50MS), ms(x.P99MS), fmt.Sprintf("%.0f", x.P99MS-f.HoldS*1000)})
	}
	return []string{"proxy", "streams offered", "active at peak (origins)", "errors", "idle RSS MiB", "peak RSS MiB", "RSS KiB / active stream",
		"corput/peer RSS per stream", "downstream conns", "upstream conns at peak", "p50 ms", "p99 ms", "p99 − hold ms"}, rows
}

// h2Goals judges issue 20's h2 items on r.
func (r *Results) h2Goals() []Goal {
	var gs []Goal
	if c, ok := r.find(scH2Streams, nameCorput); ok && c.H2 != nil {
		gs = append(gs, Goal{Name: "h2_streams: streams held with 0 errors (issue 20)", Target: fmt.Sprintf("%d active, 0 errors", c.OfferedStreams),
			Value: float64(c.ActiveStreams), Met: c.ActiveStreams >= int64(c.OfferedStreams) && c.Errors == 0,
			Note: fmt.Sprintf("%d errors", c.Errors)})
		if x, ok := r.find(scH2Streams, nameCaddy); ok && x.H2 != nil && x.RSSPerStreamKiB > 0 {
			note := fmt.Sprintf("corput %.2f KiB, Caddy %.2f KiB", c.RSSPerStreamKiB, x.RSSPerStreamKiB)
			if hp, ok := r.find(scH2Streams, nameHAProxy); ok && hp.H2 != nil {
				note += fmt.Sprintf(", HAProxy %.2f KiB", hp.RSSPerStreamKiB)
			}
			v := c.RSSPerStreamKiB / x.RSSPerStreamKiB
			gs = append(gs, Goal{Name: "h2_streams: RSS per active stream vs Caddy (issue 20)", Target: "≤ 1.0× Caddy's", Value: round3(v), Met: v <= 1, Note: note})
		}
	}
	if c, ok := r.find(scH2CPU, nameCorput); ok && c.H2 != nil && c.CPUUSPerRequest > 0 {
		best, who := 0.0, ""
		for _, p := range []string{nameHAProxy, nameCaddy} {
			if x, ok := r.find(scH2CPU, p); ok && x.H2 != nil && x.CPUUSPerRequest > 0 && (best == 0 || x.CPUUSPerRequest < best) {
				best, who = x.CPUUSPerRequest, p
			}
		}
		if best > 0 {
			v := c.CPUUSPerRequest / best
			gs = append(gs, Goal{Name: "h2_cpu: CPU per request on h2 origins vs the best h2 peer (issue 20)", Target: "≤ 1.0× the best of HAProxy and Caddy", Value: round3(v), Met: v <= 1,
				Note: fmt.Sprintf("corput %.1f µs, %s %.1f µs", c.CPUUSPerRequest, who, best)})
		}
	}
	return gs
}
