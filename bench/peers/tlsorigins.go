package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corput/corput/internal/loadgen"
	"github.com/corput/corput/internal/testcert"
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
// CA. nginx and HAProxy (OpenSSL) are also told TLS 1.3 and
// TLS_AES_128_GCM_SHA256 only; Go's clients (corput, Caddy) offer
// AES-128-GCM first on CPUs with AES instructions, and every origin
// records what each handshake negotiated. Upstream HTTP/2 where the proxy
// speaks it: corput (protocol: auto, ALPN), HAProxy (alpn h2,http/1.1),
// Caddy (its default over TLS); nginx speaks HTTP/1.1 to origins.
const (
	scTLSOrigins    = "tls_origins"
	scManyEndpoints = "many_endpoints"
)

// ownsOrigins reports whether scenario sc starts origins of its own
// (spread, tls_origins, many_endpoints, h2_streams, h2_cpu) rather than
// using the four standard ones.
func ownsOrigins(sc string) bool {
	return sc == scSpread || sc == scTLSOrigins || sc == scManyEndpoints || isH2Scenario(sc)
}

// upTLS is the upstream TLS of a run: a CA, the origins' certificate it
// issued, and the proxies' client certificate, as PEM files.
type upTLS struct {
	ca               string // the CA certificate
	cert, key        string // the origins' certificate
	clientCert       string // the proxies' client certificate
	clientKey        string
	clientBoth       string      // client certificate then key (HAProxy's crt)
	client           *tls.Config // the runner's own, for the origins' stats
	serverName       string      // a name the origins' certificate has (nginx and Caddy check it)
	originsTLSMinVer string      // --min-tls of the origins
	corputProtocol   string      // corput's origins[].protocol (--tls-corput-protocol; writeUpTLS: auto)
}

// writeUpTLS makes the run's CA, origin and client certificates
// (internal/testcert: ECDSA P-256) in dir.
func writeUpTLS(dir string) (*upTLS, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ca, err := testcert.NewCA("corput bench CA")
	if err != nil {
		return nil, err
	}
	srv, err := ca.Issue("corput bench origin", x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	cli, err := ca.Issue("corput bench proxy", x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	u := &upTLS{serverName: "localhost", originsTLSMinVer: "1.3", corputProtocol: "auto"}
	if u.ca, _, err = ca.WriteFiles(dir, "ca"); err != nil {
		return nil, err
	}
	if u.cert, u.key, err = srv.WriteFiles(dir, "origin"); err != nil {
		return nil, err
	}
	if u.clientCert, u.clientKey, err = cli.WriteFiles(dir, "client"); err != nil {
		return nil, err
	}
	u.clientBoth = filepath.Join(dir, "client-with-key.pem")
	if err := os.WriteFile(u.clientBoth, append(append([]byte{}, cli.CertPEM...), cli.KeyPEM...), 0o600); err != nil {
		return nil, err
	}
	u.client = &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cli.TLS()}, MinVersion: tls.VersionTLS13}
	return u, nil
}

// statsClient is the runner's HTTPS client for the origins' stats: one
// keep-alive connection per origin process, opened by the first reading
// (before any proxy runs) and reused, so its one handshake per process is
// in every baseline and in no difference.
func (u *upTLS) statsClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: u.client, MaxIdleConnsPerHost: 1}}
}

// startTLSOrigins starts procs `corput origin --proto tls` processes with
// listeners listeners each (the default profile's classes, unlimited
// workers, keep-alive connections kept 10 min), and returns them and every
// listener's address.
func (b *bench) startTLSOrigins(ctx context.Context, prefix string, procs, listeners int) ([]*originProc, []string, error) {
	if b.up == nil {
		u, err := writeUpTLS(filepath.Join(b.dir, "upstream-tls"))
		if err != nil {
			return nil, nil, fmt.Errorf("upstream certificates: %w", err)
		}
		u.corputProtocol = b.o.tlsCorputProtocol
		b.up = u
	}
	client := b.up.statsClient()
	var os []*originProc
	var members []string
	for i := 1; i <= procs; i++ {
		id := fmt.Sprintf("%s%d", prefix, i)
		o, err := startOrigin(ctx, b.ps, b.bin, id, "127.0.0.1:0", uint64(300+i), b.o.originProcs,
			"--proto", "tls", "--cert", b.up.cert, "--key", b.up.key, "--client-ca", b.up.ca, "--min-tls", b.up.originsTLSMinVer,
			"--listeners", strconv.Itoa(listeners), "--workers", "0", "--profile", "default", "--idle-timeout", "10m")
		if err != nil {
			return os, nil, err
		}
		o.https = client
		os = append(os, o)
		st, err := o.stats()
		if err != nil {
			return os, nil, err
		}
		if len(st.Listeners) != listeners {
			return os, nil, fmt.Errorf("origin %s: %d listeners, want %d", id, len(st.Listeners), listeners)
		}
		for _, l := range st.Listeners {
			members = append(members, l.Address)
		}
	}
	return os, members, nil
}

// tlsTally is what TLS origins counted at one moment.
type tlsTally struct {
	full, resumed, accepted, open, requests int64
	negotiated                              map[string]int64
}

func takeTLSTally(os []*originProc) (tlsTally, error) {
	t := tlsTally{negotiated: map[string]int64{}}
	for _, o := range os {
		st, err := o.stats()
		if err != nil {
			return t, err
		}
		t.accepted += st.Connections.Accepted
		t.open += st.Connections.Open - 1 // the runner's own stats connection
		for _, l := range st.Listeners {
			t.requests += l.Requests
		}
		if st.TLS != nil {
			t.full += st.TLS.Full
			t.resumed += st.TLS.Resumed
			for k, v := range st.TLS.Negotiated {
				t.negotiated[k] += v
			}
		}
	}
	return t, nil
}

// since is what the origins counted between t0 and t (open: now).
func (t tlsTally) since(t0 tlsTally) tlsTally {
	d := tlsTally{full: t.full - t0.full, resumed: t.resumed - t0.resumed, accepted: t.accepted - t0.accepted,
		open: t.open, requests: t.requests - t0.requests, negotiated: map[string]int64{}}
	for k, v := range t.negotiated {
		if n := v - t0.negotiated[k]; n > 0 {
			d.negotiated[k] = n
		}
	}
	return d
}

// UpstreamTLS is one proxy's figures in front of mTLS origins, counted by
// the origins (handshakes, connections) and from /proc (CPU).
type UpstreamTLS struct {
	Endpoints int `json:"endpoints"`
	// HandshakesFull and HandshakesResumed are the TLS handshakes the
	// origins completed while the proxy ran (its start and pre-warming
	// included); Connections the TCP connections they accepted.
	HandshakesFull    int64 `json:"tls_handshakes_full"`
	HandshakesResumed int64 `json:"tls_handshakes_resumed"`
	Connections       int64 `json:"connections"`
	// P99MS is the skewed load's p99 (tls_origins) or the window's
	// (many_endpoints).
	P99MS float64 `json:"p99_ms"`
	// CPUusPerRequest is the proxy's CPU (utime + stime of its process
	// group, /proc/<pid>/stat) per request the origins received, over the
	// scenario's loads; Skewed… and Raw… split it by load.
	CPUusPerRequest       float64 `json:"cpu_us_per_request"`
	SkewedCPUusPerRequest float64 `json:"skewed_cpu_us_per_request,omitempty"`
	RawCPUusPerRequest    float64 `json:"raw_cpu_us_per_request,omitempty"`
	RawRPS                float64 `json:"raw_rps,omitempty"`
	RawP99MS              float64 `json:"raw_p99_ms,omitempty"`
	// Negotiated counts the origins' handshakes by version, suite and
	// application protocol ("TLSv1.3 TLS_AES_128_GCM_SHA256 h2").
	Negotiated map[string]int64 `json:"negotiated"`

	// many_endpoints: the window after warm-up.
	WarmupS             int     `json:"warmup_s,omitempty"`
	WindowS             int     `json:"window_s,omitempty"`
	WindowHandshakes    int64   `json:"window_handshakes,omitempty"`
	HandshakesPerS      float64 `json:"handshakes_per_s"`
	WindowConnections   int64   `json:"window_connections"`
	OpenConnections     int64   `json:"open_connections,omitempty"`
	WarmupHandshakes    int64   `json:"warmup_handshakes,omitempty"`
	WarmupConnectionsIn int64   `json:"warmup_connections,omitempty"`
}

// tlsVariant is p in front of TLS origins.
type tlsVariant struct {
	proxy
	up *upTLS
}

func (v tlsVariant) files(dir, listen string, members []string, joining string, tc *tlsFiles) ([]string, error) {
	u := v.up
	var name, text string
	var argv []string
	switch p := v.proxy.(type) {
	case corputProxy:
		admin, err := freePort()
		if err != nil {
			return nil, err
		}
		name = "corput.yaml"
		text = strings.Replace(corputConfig(listen, admin, p.balancer, p.downstream, p.loops, members, false, tc),
			"    protocol: h1\n", fmt.Sprintf("    protocol: %s\n    tls: {ca: %q, cert: %q, key: %q}\n", u.corputProtocol, u.ca, u.clientCert, u.clientKey), 1)
		argv = []string{p.bin_, "serve", "--config", filepath.Join(dir, name), "--log-level", "warn"}
	case nginxProxy:
		name = "nginx.conf"
		text = strings.Replace(nginxConfig(dir, listen, members, "", p.fwd, false, tc), "      proxy_pass http://origins;\n",
			"      proxy_pass https://origins;\n"+nginxUpstreamTLS(u), 1)
		argv = []string{"nginx", "-p", dir, "-c", filepath.Join(dir, name)}
	case haproxyProxy:
		name = "haproxy.cfg"
		text = strings.Replace(haproxyConfig(dir, listen, members, "", p.fwd, false, tc), "  default-server maxconn 50 slowstart 60s\n",
			"  default-server maxconn 50 slowstart 60s"+haproxyUpstreamTLS(u)+"\n", 1)
		argv = []string{"haproxy", "-db", "-f", filepath.Join(dir, name)}
	case caddyProxy:
		name = "Caddyfile"
		text = strings.Replace(caddyConfig(listen, members, "", false, tc), "\t\ttransport http {\n",
			"\t\ttransport http {\n"+caddyUpstreamTLS(u), 1)
		argv = []string{"caddy", "run", "--config", filepath.Join(dir, name), "--adapter", "caddyfile"}
	default:
		return nil, fmt.Errorf("%s has no TLS upstream configuration", v.name())
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		return nil, err
	}
	return argv, nil
}

// nginxUpstreamTLS is nginx's location lines for the origins: the client
// certificate, the origin verified against the CA by the name its
// certificate carries, TLS 1.3 with the one suite, sessions reused (its
// default, written out). nginx speaks HTTP/1.1 to origins.
func nginxUpstreamTLS(u *upTLS) string {
	return fmt.Sprintf("      proxy_ssl_certificate %s;\n      proxy_ssl_certificate_key %s;\n"+
		"      proxy_ssl_trusted_certificate %s;\n      proxy_ssl_verify on;\n      proxy_ssl_name %s;\n"+
		"      proxy_ssl_protocols TLSv1.3;\n      proxy_ssl_conf_command Ciphersuites %s;\n      proxy_ssl_session_reuse on;\n",
		u.clientCert, u.clientKey, u.ca, u.serverName, tlsSuite)
}

// haproxyUpstreamTLS is HAProxy's server options: TLS verified against
// the CA, the client certificate (crt takes certificate and key in one
// file), ALPN h2 then http/1.1, TLS 1.3 with the one suite. HAProxy
// reuses TLS sessions to servers by default.
func haproxyUpstreamTLS(u *upTLS) string {
	return fmt.Sprintf(" ssl verify required ca-file %s crt %s alpn h2,http/1.1 ssl-min-ver TLSv1.3 ciphersuites %s",
		u.ca, u.clientBoth, tlsSuite)
}

// caddyUpstreamTLS is Caddy's transport lines: TLS with the client
// certificate, the CA and the certificate's name; over TLS Caddy offers
// HTTP/2 and HTTP/1.1 by ALPN. Go's crypto/tls takes no TLS 1.3 suite.
func caddyUpstreamTLS(u *upTLS) string {
	return fmt.Sprintf("\t\t\ttls\n\t\t\ttls_client_auth %s %s\n\t\t\ttls_trusted_ca_certs %s\n\t\t\ttls_server_name %s\n",
		u.clientCert, u.clientKey, u.ca, u.serverName)
}

// tlsRuns is how many proxy runs the two scenarios make.
func (b *bench) tlsRuns() int { return len(b.proxies) * b.o.rounds }

// runUpstreamTLS runs tls_origins or many_endpoints through every proxy,
// round by round, the proxies' order rotating, and folds the results.
func (b *bench) runUpstreamTLS(ctx context.Context, sc string) error {
	procs, listeners, prefix := b.o.tlsOrigins, b.o.tlsListeners, "t"
	if sc == scManyEndpoints {
		procs, listeners, prefix = b.o.manyOrigins, b.o.manyListeners, "m"
	}
	origins, members, err := b.startTLSOrigins(ctx, prefix, procs, listeners)
	defer func() {
		for _, o := range origins {
			o.c.stop(5 * time.Second)
		}
	}()
	if err != nil {
		return err
	}
	rounds := map[string][]Result{}
	for r := 0; r < b.o.rounds; r++ {
		for _, p := range b.order(r) {
			dir := filepath.Join(b.dir, fmt.Sprintf("%s-r%d-%s", sc, r+1, p.name()))
			res, err := b.upstreamTLSOne(ctx, sc, p, dir, origins, members)
			if err != nil {
				return fmt.Errorf("%s via %s: %w", sc, p.name(), err)
			}
			rounds[p.name()] = append(rounds[p.name()], res)
			u := res.Upstream
			fmt.Fprintf(b.log, "peers: %s round %d %-8s handshakes %d full + %d resumed, %d connections, p99 %.1f ms, %.0f µs CPU/request, window %.2f handshakes/s %v\n",
				sc, r+1, p.name(), u.HandshakesFull, u.HandshakesResumed, u.Connections, u.P99MS, u.CPUusPerRequest, u.HandshakesPerS, u.Negotiated)
			b.bar.Add(1)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
		}
	}
	s := b.res.scenario(sc, b.upstreamTLSDescription(sc, len(members)))
	s.Note = upstreamTLSNote
	for _, p := range b.proxies {
		if rs := rounds[p.name()]; len(rs) > 0 {
			s.Results = append(s.Results, median(rs, func(r Result) float64 { return r.P99MS }))
		}
	}
	return nil
}

func (b *bench) upstreamTLSDescription(sc string, endpoints int) string {
	if sc == scManyEndpoints {
		return fmt.Sprintf("%d mTLS endpoints (%d origin processes × %d listeners, TLS 1.3 only, client certificates required); the skewed 70/30 mix at %g req/s "+
			"for %v of warm-up, then %v counted: handshakes/s and connections at the origins", endpoints, b.o.manyOrigins, b.o.manyListeners, b.o.rate, b.o.manyWarmup, b.o.manyWindow)
	}
	return fmt.Sprintf("%d mTLS endpoints (%d origin processes × %d listeners, TLS 1.3 only, client certificates required); the skewed 70/30 mix at %g req/s for %v, "+
		"then wrk -t2 -c%d -d%v; handshakes and connections counted by the origins, the proxy's CPU from /proc", endpoints, b.o.tlsOrigins, b.o.tlsListeners, b.o.rate, b.o.skewDuration, b.o.rawConns, b.o.rawDuration)
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
func (b *bench) upstreamTLSOne(ctx context.Context, sc string, p proxy, dir string, origins []*originProc, members []string) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	t0, err := takeTLSTally(origins)
	if err != nil {
		return Result{}, err
	}
	c, addr, err := startProxy(ctx, b.ps, tlsVariant{proxy: p, up: b.up}, dir, members, "", nil)
	if err != nil {
		return Result{}, err
	}
	defer c.stop(10 * time.Second)
	base := "http://" + addr
	u := &UpstreamTLS{Endpoints: len(members)}
	res := Result{Proxy: p.name(), Upstream: u}
	skewed := func(d time.Duration) (loadgen.Report, error) {
		return loadgen.Run(ctx, loadgen.Options{Target: base, Rate: b.o.rate, Duration: d, Seed: b.o.seed})
	}
	cpu0, tl0 := groupCPU(c.cmd.Process.Pid), t0
	if sc == scManyEndpoints {
		if _, err := skewed(b.o.manyWarmup); err != nil {
			return res, err
		}
		if tl0, err = takeTLSTally(origins); err != nil {
			return res, err
		}
		cpu0 = groupCPU(c.cmd.Process.Pid)
	}
	first := b.o.skewDuration
	if sc == scManyEndpoints {
		first = b.o.manyWindow
	}
	rep, err := skewed(first)
	if err != nil {
		return res, err
	}
	res = fromReport(rep)
	res.Proxy, res.Upstream = p.name(), u
	u.P99MS = res.P99MS
	cpu1 := groupCPU(c.cmd.Process.Pid)
	t1, err := takeTLSTally(origins)
	if err != nil {
		return res, err
	}
	u.SkewedCPUusPerRequest = perRequest(cpu1-cpu0, t1.since(tl0).requests)
	last, cpuLast := t1, cpu1
	if sc == scTLSOrigins {
		w, _, err := runWrk(ctx, base+"/", b.o.rawConns, b.o.rawDuration)
		if err != nil {
			return res, err
		}
		u.RawRPS, u.RawP99MS = w.RPS, w.P99MS
		cpuLast = groupCPU(c.cmd.Process.Pid)
		if last, err = takeTLSTally(origins); err != nil {
			return res, err
		}
		u.RawCPUusPerRequest = perRequest(cpuLast-cpu1, last.since(t1).requests)
	}
	d := last.since(t0)
	u.HandshakesFull, u.HandshakesResumed, u.Connections, u.Negotiated = d.full, d.resumed, d.accepted, d.negotiated
	u.CPUusPerRequest = perRequest(cpuLast-cpu0, last.since(tl0).requests)
	if sc == scManyEndpoints {
		w, warm := t1.since(tl0), tl0.since(t0)
		u.WarmupS, u.WindowS = int(b.o.manyWarmup/time.Second), int(b.o.manyWindow/time.Second)
		u.WindowHandshakes = w.full + w.resumed
		u.HandshakesPerS = round3(float64(u.WindowHandshakes) / b.o.manyWindow.Seconds())
		u.WindowConnections, u.OpenConnections = w.accepted, t1.open
		u.WarmupHandshakes, u.WarmupConnectionsIn = warm.full+warm.resumed, warm.accepted
	}
	return res, nil
}

func perRequest(cpu time.Duration, requests int64) float64 {
	if requests <= 0 {
		return 0
	}
	return round3(float64(cpu.Microseconds()) / float64(requests))
}

// groupCPU is the user + system CPU time of every process in the process
// group pgid (the proxy leads its own: procs.start), from /proc
// (readGroup): nginx's workers count with their master. A process that
// already exited is not counted (none of the proxies' do while they run).
func groupCPU(pgid int) time.Duration {
	u, _ := readGroup(pgid)
	return time.Duration(u.CPUTicks) * time.Second / clockTicks
}
