package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/corput/corput/internal/workload"
)

// A proxy is one gateway under test. Every proxy gets equivalent settings:
// keep-alive to the origins, a least-connections style policy, retries of
// refused connections on another origin, no active health checks (except
// HAProxy's on a joining server: it is how HAProxy learns it is up), slow
// start where it has it (corput, HAProxy), and a bounded queue
// where it has one (corput: 50 pending per endpoint; HAProxy: maxconn 50 per
// server with a 1 s queue timeout; nginx OSS and Caddy have none).
type proxy interface {
	// name is the proxy's name in tables and JSON.
	name() string
	// bin is the executable that must be installed; "" for corput.
	bin() string
	// files writes the proxy's configuration for members (and joining,
	// an address that is not a member yet and joins later, "" when none)
	// into dir, listening on listen (cleartext, or HTTPS with tc's
	// certificate when tc is not nil: see tls.go), and returns the command
	// line.
	files(dir, listen string, members []string, joining string, tc *tlsFiles) ([]string, error)
	// join makes joining a member once it is up, when the proxy needs
	// telling (corput's discovery file); peers have it in their config
	// from the start and find it up by passive (nginx, Caddy) or active
	// (HAProxy) health checking.
	join(dir string, members []string) error
	// h2c reports whether the proxy's listener is set up for h2c by
	// prior knowledge (the spread scenario's h2 load): it is probed with
	// an h2c client. nginx's and HAProxy's such listener speaks h2 only.
	h2c() bool
}

// peer names, in the order runs alternate.
const (
	nameCorput  = "corput"
	nameNginx   = "nginx"
	nameHAProxy = "haproxy"
	nameCaddy   = "caddy"
)

// proxyByName returns the named proxy; corput is corput's settings, and
// fwd makes nginx and HAProxy add the X-Forwarded-For, -Proto and -Host
// fields corput and Caddy add (--forwarded-headers).
func proxyByName(name string, corput corputProxy, fwd bool) (proxy, error) {
	switch name {
	case nameCorput:
		return corput, nil
	case nameNginx:
		return nginxProxy{fwd: fwd}, nil
	case nameHAProxy:
		return haproxyProxy{fwd: fwd}, nil
	case nameCaddy:
		return caddyProxy{}, nil
	}
	return nil, fmt.Errorf("--proxies: unknown proxy %q: want corput, nginx, haproxy or caddy", name)
}

// aptPackage is the Debian package that installs a peer's executable.
var aptPackage = map[string]string{
	"nginx": "nginx-light", "haproxy": "haproxy", "caddy": "caddy", "wrk": "wrk", "openssl": "openssl", "h2load": "nghttp2-client",
}

// ensureInstalled installs the missing executables with apt-get.
func ensureInstalled(bins []string, install bool) error {
	var missing []string
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !install {
		return fmt.Errorf("not installed: %s (run without --install=false, or apt-get install %s)", strings.Join(missing, ", "), debs(missing))
	}
	fmt.Fprintf(os.Stderr, "peers: installing %s with apt-get\n", debs(missing))
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq"}, strings.Fields(debs(missing))...)} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
		}
	}
	return nil
}

func debs(bins []string) string {
	var out []string
	for _, b := range bins {
		out = append(out, aptPackage[b])
	}
	return strings.Join(out, " ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// startProxy writes p's files, starts it and waits until a request
// through it (over HTTPS when tc is not nil) is answered 200.
func startProxy(ctx context.Context, ps *procs, p proxy, dir string, members []string, joining string, tc *tlsFiles) (*child, string, error) {
	listen, err := freePort()
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	argv, err := p.files(dir, listen, members, joining, tc)
	if err != nil {
		return nil, "", err
	}
	env := []string{"HOME=" + dir, "XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir}
	c, err := ps.start(p.name()+"-"+filepath.Base(dir), env, argv...)
	if err != nil {
		return nil, "", err
	}
	if err := c.waitTCP(ctx, listen); err != nil {
		c.stop(time.Second)
		return nil, "", err
	}
	if err := waitOK(ctx, c, scheme(tc)+"://"+listen+"/", p.h2c()); err != nil {
		c.stop(time.Second)
		return nil, "", err
	}
	return c, listen, nil
}

// scheme is the proxies' URL scheme: https when tc is not nil.
func scheme(tc *tlsFiles) string {
	if tc != nil {
		return "https"
	}
	return "http"
}

// waitOK polls url until it answers 200, over h2c by prior knowledge
// when h2c is set; an https url's certificate is not verified (it is the
// run's throwaway one).
func waitOK(ctx context.Context, c *child, url string, h2c bool) error {
	deadline := time.Now().Add(startTimeout)
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	if h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	client := &http.Client{Timeout: time.Second, Transport: tr}
	defer client.CloseIdleConnections()
	var last string
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if h2c && resp.ProtoMajor != 2 {
				return fmt.Errorf("%s answered over %s, not h2c", url, resp.Proto)
			}
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if err := c.waitStep(ctx, deadline); err != nil {
			return fmt.Errorf("%w (last answer from %s: %s)", err, url, last)
		}
	}
}

// --- corput

type corputProxy struct {
	bin_       string
	balancer   string // the balancer: line's flow mapping
	downstream string // the downstream: line's flow mapping; "" for none
	loops      int    // the loops: line; 0 for none (corput's default)
	prior      bool   // probed over h2c (its cleartext listener always speaks it)
}

// corputOrigin is the origin's name in corput's config.
const corputOrigin = "bench"

// defaultBalancer is corput's default policy, written out.
const defaultBalancer = "{policy: least_work, choices: 2}"

func (corputProxy) name() string { return nameCorput }
func (corputProxy) bin() string  { return "" }
func (p corputProxy) h2c() bool  { return p.prior }

// corputConfig is the gateway's config: defaults everywhere (peak_ewma
// with two choices, 50 pending per endpoint, 60 s slow start, retries of
// connect failures), members static, or from a watched file when a member
// joins later; with tc, HTTPS on listen (the tls block has no version or
// cipher setting: Go's defaults, TLS 1.2 and 1.3); loops above 0 sets the
// loops (the spread scenario's 16).
func corputConfig(listen, admin, balancer, downstream string, loops int, members []string, joining bool, tc *tlsFiles) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %s\nadmin: %s\n", listen, admin)
	if loops > 0 {
		fmt.Fprintf(&b, "loops: %d\n", loops)
	}
	if tc != nil {
		fmt.Fprintf(&b, "tls: {cert: %q, key: %q}\n", tc.cert, tc.key)
	}
	if downstream != "" {
		b.WriteString("downstream: " + downstream + "\n")
	}
	b.WriteString("routes:\n  - {path_prefix: /, origin: " + corputOrigin + "}\n")
	b.WriteString("origins:\n  - name: " + corputOrigin + "\n    protocol: h1\n")
	if joining {
		b.WriteString("    discovery: {type: file, path: endpoints.yaml}\n    debounce: 500ms\n")
	} else {
		b.WriteString(endpointsYAML(members, "    "))
	}
	if balancer == "" {
		balancer = defaultBalancer
	}
	b.WriteString("    balancer: " + balancer + "\n")
	b.WriteString("    slow_start: {window: 60s}\n")
	b.WriteString("    timeouts: {connect: 1s, request: 30s}\n")
	b.WriteString(workloadYAML(workload.Default()))
	return b.String()
}

// workloadYAML is corput's workload block for the load generator's mix:
// its classes, each matched by the path suffix the generator gives its
// requests (/light, /heavy), so that corput knows each request's class
// and cost (the peers have no such setting; raw requests match none and
// cost 1).
func workloadYAML(m workload.Mix) string {
	var b strings.Builder
	b.WriteString("workload:\n  classes:\n")
	for _, c := range m.Classes {
		fmt.Fprintf(&b, "    - {name: %s, percent: %g, latency: %v, match: {path_suffix: /%s}}\n", c.Name, c.Percent, c.Latency, c.Name)
	}
	return b.String()
}

func endpointsYAML(members []string, indent string) string {
	if len(members) == 0 {
		return indent + "endpoints: []\n"
	}
	var b strings.Builder
	b.WriteString(indent + "endpoints:\n")
	for _, m := range members {
		fmt.Fprintf(&b, "%s  - {address: %s}\n", indent, m)
	}
	return b.String()
}

func (p corputProxy) files(dir, listen string, members []string, joining string, tc *tlsFiles) ([]string, error) {
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	if joining != "" {
		if err := p.join(dir, members); err != nil {
			return nil, err
		}
	}
	path := filepath.Join(dir, "corput.yaml")
	if err := os.WriteFile(path, []byte(corputConfig(listen, admin, p.balancer, p.downstream, p.loops, members, joining != "", tc)), 0o644); err != nil {
		return nil, err
	}
	return []string{p.bin_, "serve", "--config", path, "--log-level", "warn"}, nil
}

// join rewrites the endpoints file atomically (a temporary file renamed
// over it), as discovery.md asks.
func (corputProxy) join(dir string, members []string) error {
	tmp := filepath.Join(dir, "endpoints.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(endpointsYAML(members, "")), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "endpoints.yaml"))
}

// --- nginx

// nginxProxy is nginx; fwd adds the X-Forwarded-* fields; prior makes
// its listener h2c by prior knowledge (listen … http2: h2 only).
type nginxProxy struct{ fwd, prior bool }

func (nginxProxy) name() string                { return nameNginx }
func (nginxProxy) bin() string                 { return "nginx" }
func (nginxProxy) join(string, []string) error { return nil }
func (p nginxProxy) h2c() bool                 { return p.prior }

// nginxConfig: least_conn, 64 idle keep-alive connections per worker (or
// one per member when there are more: with 800 servers a cache of 64
// never holds the next server's connection, and every request dials),
// passive health (a refused connection takes a server out for 2 s and the
// request goes to the next one), and with fwd the X-Forwarded-For, -Proto
// and -Host fields corput sends; with tc, HTTPS on listen, TLS 1.3 only
// with TLS_AES_128_GCM_SHA256 only. nginx OSS has neither slow start nor
// a request queue. With h2c the listener speaks HTTP/2 by prior knowledge
// only (nginx 1.22: a cleartext listen … http2 takes no HTTP/1.1).
func nginxConfig(dir, listen string, members []string, joining string, fwd, h2c bool, tc *tlsFiles) string {
	var b strings.Builder
	fmt.Fprintf(&b, `daemon off;
master_process on;
worker_processes auto;
user root;
pid %[1]s/nginx.pid;
error_log %[1]s/nginx-error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  keepalive_requests 1000000;
  upstream origins {
    least_conn;
`, dir)
	all := append(append([]string{}, members...), nonEmpty(joining)...)
	for _, m := range all {
		fmt.Fprintf(&b, "    server %s max_fails=1 fail_timeout=2s;\n", m)
	}
	fmt.Fprintf(&b, `    keepalive %d;
    keepalive_requests 1000000;
  }
  server {
    listen %s;
%s    location / {
      proxy_pass http://origins;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
%s      proxy_next_upstream error timeout;
      proxy_connect_timeout 1s;
      proxy_read_timeout 30s;
    }
  }
}
`, max(64, len(all)), nginxListen(listen, tc, h2c), nginxTLS(tc), nginxForwarded(fwd))
	return b.String()
}

// nginxListen is the listen directive's argument.
func nginxListen(listen string, tc *tlsFiles, h2c bool) string {
	switch {
	case tc != nil:
		return listen + " ssl"
	case h2c:
		return listen + " http2"
	}
	return listen
}

// nginxTLS is the server's TLS lines: the certificate, TLS 1.3 only, and
// the one TLS 1.3 suite (ssl_ciphers sets TLS 1.2's; OpenSSL takes TLS
// 1.3's as Ciphersuites).
func nginxTLS(tc *tlsFiles) string {
	if tc == nil {
		return ""
	}
	return fmt.Sprintf("    ssl_certificate %s;\n    ssl_certificate_key %s;\n    ssl_protocols TLSv1.3;\n    ssl_conf_command Ciphersuites %s;\n",
		tc.cert, tc.key, tlsSuite)
}

// nginxForwarded is the proxy_set_header lines that send what corput's
// Forwarding sends for a direct client: its address, the scheme and the
// Host it asked for.
func nginxForwarded(fwd bool) string {
	if !fwd {
		return ""
	}
	return "      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n" +
		"      proxy_set_header X-Forwarded-Proto $scheme;\n" +
		"      proxy_set_header X-Forwarded-Host $http_host;\n"
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func (p nginxProxy) files(dir, listen string, members []string, joining string, tc *tlsFiles) ([]string, error) {
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(nginxConfig(dir, listen, members, joining, p.fwd, p.prior, tc)), 0o644); err != nil {
		return nil, err
	}
	return []string{"nginx", "-p", dir, "-c", path}, nil
}

// --- HAProxy

// haproxyProxy is HAProxy; fwd adds the X-Forwarded-* fields; prior
// makes its listener h2c by prior knowledge (bind … proto h2: h2 only).
type haproxyProxy struct{ fwd, prior bool }

func (haproxyProxy) name() string                { return nameHAProxy }
func (haproxyProxy) bin() string                 { return "haproxy" }
func (haproxyProxy) join(string, []string) error { return nil }
func (p haproxyProxy) h2c() bool                 { return p.prior }

// haproxyConfig: leastconn, http-reuse always, at most 50 requests per
// server with the rest queued up to 1 s (HAProxy's bounded queue),
// slowstart 60s, a refused connection redispatched to another server, and
// with fwd the X-Forwarded-For, -Proto and -Host fields corput sends; with
// tc, HTTPS on listen, TLS 1.3 only with TLS_AES_128_GCM_SHA256 only; with
// h2c, HTTP/2 by prior knowledge only on listen.
func haproxyConfig(dir, listen string, members []string, joining string, fwd, h2c bool, tc *tlsFiles) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
  maxconn 4096
  pidfile %s/haproxy.pid
defaults
  mode http
  option http-keep-alive
  http-reuse always
  timeout connect 1s
  timeout client 30s
  timeout server 30s
  timeout queue 1s
  timeout http-keep-alive 60s
  retries 2
  option redispatch
frontend fe
  bind %s
%s  default_backend origins
backend origins
  balance leastconn
  option httpchk GET /
  default-server maxconn 50 slowstart 60s
`, dir, listen+haproxyTLS(tc)+haproxyH2C(h2c), haproxyForwarded(fwd, tc != nil))
	for i, m := range members {
		fmt.Fprintf(&b, "  server o%d %s\n", i+1, m)
	}
	if joining != "" {
		// Only the joining server is health-checked: that is how HAProxy
		// sees it come up (and starts its slow start).
		fmt.Fprintf(&b, "  server o%d %s check inter 1s fall 1 rise 1\n", len(members)+1, joining)
	}
	return b.String()
}

// haproxyTLS is the bind line's TLS options: the certificate with its key
// (crt takes both in one file), TLS 1.3 only, and the one TLS 1.3 suite
// (ciphers sets TLS 1.2's).
func haproxyTLS(tc *tlsFiles) string {
	if tc == nil {
		return ""
	}
	return fmt.Sprintf(" ssl crt %s ssl-min-ver TLSv1.3 ciphersuites %s", tc.both, tlsSuite)
}

// haproxyH2C is the bind line's h2c option.
func haproxyH2C(h2c bool) string {
	if !h2c {
		return ""
	}
	return " proto h2"
}

// haproxyForwarded is the frontend lines that send what corput's
// Forwarding sends for a direct client (X-Forwarded-Proto https behind
// TLS).
func haproxyForwarded(fwd, https bool) string {
	if !fwd {
		return ""
	}
	proto := "http"
	if https {
		proto = "https"
	}
	return "  option forwardfor\n" +
		"  http-request set-header X-Forwarded-Proto " + proto + "\n" +
		"  http-request set-header X-Forwarded-Host %[req.hdr(host)]\n"
}

func (p haproxyProxy) files(dir, listen string, members []string, joining string, tc *tlsFiles) ([]string, error) {
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(haproxyConfig(dir, listen, members, joining, p.fwd, p.prior, tc)), 0o644); err != nil {
		return nil, err
	}
	return []string{"haproxy", "-db", "-f", path}, nil
}

// --- Caddy

// caddyProxy is Caddy; prior adds h2c (by prior knowledge) to its
// cleartext listener's protocols.
type caddyProxy struct{ prior bool }

func (caddyProxy) name() string                { return nameCaddy }
func (caddyProxy) bin() string                 { return "caddy" }
func (caddyProxy) join(string, []string) error { return nil }
func (p caddyProxy) h2c() bool                 { return p.prior }

// caddyConfig: least_conn, keep-alive with 64 idle connections per host,
// passive health (a failed request takes the host out for 2 s) and retries
// on another host for 1 s; with tc, HTTPS on listen, TLS 1.3 only (see
// caddyTLS); with h2c, HTTP/1.1 and h2c on listen. Caddy has no slow start
// and no request queue.
func caddyConfig(listen string, members []string, joining string, h2c bool, tc *tlsFiles) string {
	all := append(append([]string{}, members...), nonEmpty(joining)...)
	global, site, tlsBlock := "", "http://"+listen, ""
	switch {
	case tc != nil:
		global, site, tlsBlock = caddyTLS(listen, tc)
	case h2c:
		global = "\tservers {\n\t\tprotocols h1 h2c\n\t}\n"
	}
	return fmt.Sprintf(`{
	admin off
	auto_https off
%s}
%s {
%s	reverse_proxy %s {
		lb_policy least_conn
		lb_try_duration 1s
		fail_duration 2s
		transport http {
			keepalive 60s
			keepalive_idle_conns 256
			keepalive_idle_conns_per_host 64
		}
	}
}
`, global, site, tlsBlock, strings.Join(all, " "))
}

// caddyTLS is the Caddyfile's TLS parts: HTTP/1.1 and HTTP/2 only (no
// HTTP/3 listener, as nginx and HAProxy have none here); the certificate
// for clients that send no server name (Go's client sends none for an IP
// address; wrk sends 127.0.0.1); and the site's tls block, TLS 1.3 only.
// Its ciphers line names the scenario's suite as the others are given it,
// but Go's crypto/tls ignores cipher suites for TLS 1.3: Caddy takes the
// line and negotiates what Go picks.
func caddyTLS(listen string, tc *tlsFiles) (global, site, block string) {
	global = "\tdefault_sni 127.0.0.1\n\tservers {\n\t\tprotocols h1 h2\n\t}\n"
	block = fmt.Sprintf("\ttls %s %s {\n\t\tprotocols tls1.3\n\t\tciphers %s # no effect: crypto/tls has no TLS 1.3 suite setting\n\t}\n",
		tc.cert, tc.key, tlsSuite)
	return global, "https://" + listen, block
}

func (p caddyProxy) files(dir, listen string, members []string, joining string, tc *tlsFiles) ([]string, error) {
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyConfig(listen, members, joining, p.prior, tc)), 0o644); err != nil {
		return nil, err
	}
	return []string{"caddy", "run", "--config", path, "--adapter", "caddyfile"}, nil
}
