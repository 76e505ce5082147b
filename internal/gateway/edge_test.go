package gateway

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/corput/corput/internal/accesslog"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/proxyproto"
	"github.com/corput/corput/internal/waitfor"
)

// xffOrigin is an origin that records each request's X-Forwarded-For
// and answers "ok".
type xffOrigin struct {
	addr string
	mu   sync.Mutex
	seen []string
}

func startXFFOrigin(t testing.TB) *xffOrigin {
	t.Helper()
	o := &xffOrigin{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.seen = append(o.seen, r.Header.Get("X-Forwarded-For"))
		o.mu.Unlock()
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(srv.Close)
	o.addr = srv.Listener.Addr().String()
	return o
}

func (o *xffOrigin) requests() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seen...)
}

// edgeGateway starts a gateway in front of origin with the top-level keys
// given (downstream, tls, ...), its route's extra keys, and a JSON access
// log in file.
func edgeGateway(t testing.TB, top, routeKeys, origin, file string) *Gateway {
	t.Helper()
	g := newGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
%s
access_log: {path: %s, format: json}
routes:
  - {name: app, path_prefix: /, origin: app%s}
origins:
  - name: app
    protocol: h1
    endpoints: [{address: %q}]
`, top, file, routeKeys, origin), Options{})
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, g)
	return g
}

// dialFrom connects to addr from the local address local (a loopback
// address other than 127.0.0.1 stands for another machine).
func dialFrom(t testing.TB, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// getOn sends GET / on c and returns the status, or 0 when the
// connection was closed without an answer.
func getOn(c net.Conn) int {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: gw.test\r\n\r\n"); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// sendRefused sends hdr then GET / to addr from local and returns the
// status, 0 when the connection was refused: reset before the dial
// returned, at the write, or closed before an answer.
func sendRefused(t testing.TB, local, addr string, hdr []byte) int {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return 0
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(hdr); err != nil {
		return 0
	}
	return getOn(c)
}

// logClients is the client field of each line of a JSON access log.
func logClients(t testing.TB, file string) []string {
	var out []string
	for _, line := range readLog(t, file) {
		l, err := accesslog.Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l.Client)
	}
	return out
}

// TestProxyProtocolAddressEverywhere: on every listener (cleartext and
// HTTPS, fast path and net/http), a PROXY header (v1 and v2) from a
// trusted source makes its address the client's: in the origin's
// X-Forwarded-For and the access log. The header comes before the TLS
// handshake.
func TestProxyProtocolAddressEverywhere(t *testing.T) {
	origin := startXFFOrigin(t)
	src := netip.MustParseAddrPort("203.0.113.9:40001")
	dst := netip.MustParseAddrPort("198.51.100.1:443")
	for _, kind := range listenerKinds {
		for _, v := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/v%d", kind.name, v), func(t *testing.T) {
				top := fmt.Sprintf("downstream: {fast_path: %v, proxy_protocol: {from: [127.0.0.0/8]}}\n", kind.fast)
				var tc *tls.Config
				if kind.tls {
					certFile, keyFile, roots := selfSignedFiles(t)
					top += fmt.Sprintf("tls: {cert: %q, key: %q}\n", certFile, keyFile)
					tc = &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{"http/1.1"}}
				}
				file := filepath.Join(t.TempDir(), "access.log")
				g := edgeGateway(t, top, "", origin.addr, file)
				before := len(origin.requests())
				var c net.Conn = dialFrom(t, "127.0.0.1", g.Addr())
				h := proxyproto.Header{Source: src, Dest: dst}
				hdr := proxyproto.AppendV2(nil, h, nil)
				if v == 1 {
					hdr = proxyproto.AppendV1(nil, h)
				}
				if _, err := c.Write(hdr); err != nil {
					t.Fatal(err)
				}
				if tc != nil {
					tconn := tls.Client(c, tc)
					if err := tconn.Handshake(); err != nil {
						t.Fatalf("TLS handshake after the PROXY header: %v", err)
					}
					c = tconn
				}
				if s := getOn(c); s != 200 {
					t.Fatalf("status %d, want 200", s)
				}
				if got := origin.requests()[before:]; len(got) != 1 || got[0] != "203.0.113.9" {
					t.Fatalf("the origin saw X-Forwarded-For %q, want the header's 203.0.113.9", got)
				}
				drain(t, g)
				if got := logClients(t, file); len(got) != 1 || got[0] != "203.0.113.9:40001" {
					t.Fatalf("the access log's clients %q, want the header's 203.0.113.9:40001", got)
				}
			})
		}
	}
}

// TestProxyProtocolRefusals: a header from outside from is refused (the
// connection closed, nothing reaches the origin), or with other: plain a
// connection from outside is served with its own address; from inside,
// a connection without a header is refused. Each refusal is counted.
func TestProxyProtocolRefusals(t *testing.T) {
	origin := startXFFOrigin(t)
	hdr := proxyproto.AppendV2(nil, proxyproto.Header{Source: netip.MustParseAddrPort("203.0.113.9:40001"),
		Dest: netip.MustParseAddrPort("198.51.100.1:80")}, nil)
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "access.log")
			g := edgeGateway(t, fmt.Sprintf("downstream: {fast_path: %v, proxy_protocol: {from: [127.0.0.1/32]}}", fast), "", origin.addr, file)
			before := len(origin.requests())
			if s := sendRefused(t, "127.0.0.3", g.Addr(), hdr); s != 0 {
				t.Fatalf("a PROXY header from 127.0.0.3, outside from, got %d; want the connection closed", s)
			}
			c := dialFrom(t, "127.0.0.1", g.Addr())
			if s := getOn(c); s != 0 {
				t.Fatalf("a connection from 127.0.0.1 without a header got %d; want it closed", s)
			}
			if n := len(origin.requests()) - before; n != 0 {
				t.Fatalf("%d refused requests reached the origin", n)
			}
			if n := testutil.ToFloat64(g.metrics.ProxyProtocolRefused.WithLabelValues("source")); n != 1 {
				t.Fatalf("refused for their source: %v, want 1", n)
			}
			waitfor.Until(t, "the missing header to be counted", func() bool {
				return testutil.ToFloat64(g.metrics.ProxyProtocolRefused.WithLabelValues("missing")) == 1
			})

			// other: plain, by a reload: served as it is.
			cfg := *g.Running()
			cfg.Downstream.ProxyProtocol = &*cfg.Downstream.ProxyProtocol
			pp := *cfg.Downstream.ProxyProtocol
			pp.Other = "plain"
			cfg.Downstream.ProxyProtocol = &pp
			if err := g.Reload(&cfg); err != nil {
				t.Fatal(err)
			}
			c = dialFrom(t, "127.0.0.3", g.Addr())
			if s := getOn(c); s != 200 {
				t.Fatalf("other: plain: a plain connection from 127.0.0.3 got %d, want 200", s)
			}
			if got := origin.requests()[before:]; len(got) != 1 || got[0] != "127.0.0.3" {
				t.Fatalf("other: plain: the origin saw X-Forwarded-For %q, want 127.0.0.3", got)
			}
		})
	}
}

// haproxyEnv is set by .ci/run (CI=true): there a missing haproxy fails
// the test instead of skipping it.
func needHAProxy(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("haproxy")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("haproxy is not installed, and CI is set: .ci/run installs it (apt-get install -y haproxy)")
		}
		t.Skip("haproxy is not installed: apt-get install -y haproxy (the PROXY protocol test puts a real L4 balancer in front of corput)")
	}
	return p
}

// freePort is a loopback port free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestProxyProtocolFromHAProxy: HAProxy in TCP mode with send-proxy-v2 in
// front of corput, a client connecting to HAProxy from 127.0.0.2: the
// origin's X-Forwarded-For and corput's access log show 127.0.0.2, not
// HAProxy's 127.0.0.1. The same header sent straight to corput from
// 127.0.0.3, outside from, is refused.
func TestProxyProtocolFromHAProxy(t *testing.T) {
	bin := needHAProxy(t)
	origin := startXFFOrigin(t)
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "access.log")
			g := edgeGateway(t, fmt.Sprintf("downstream: {fast_path: %v, proxy_protocol: {from: [127.0.0.1/32]}}", fast), "", origin.addr, file)
			front := freePort(t)
			cfgFile := filepath.Join(t.TempDir(), "haproxy.cfg")
			os.WriteFile(cfgFile, []byte(fmt.Sprintf(`global
  maxconn 256
defaults
  mode tcp
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend fe
  bind %s
  default_backend be
backend be
  server corput %s send-proxy-v2 source 127.0.0.1
`, front, g.Addr())), 0o600)
			cmd := exec.Command(bin, "-db", "-f", cfgFile)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				cmd.Process.Kill()
				cmd.Wait()
				if t.Failed() {
					t.Logf("haproxy:\n%s", out.String())
				}
			})
			waitfor.Until(t, "haproxy to listen", func() bool {
				c, err := net.Dial("tcp", front)
				if err == nil {
					c.Close()
				}
				return err == nil
			})
			before := len(origin.requests())
			c := dialFrom(t, "127.0.0.2", front)
			for i := range 3 {
				if s := getOn(c); s != 200 {
					t.Fatalf("request %d through haproxy: %d, want 200", i, s)
				}
			}
			got := origin.requests()[before:]
			for _, xff := range got {
				if xff != "127.0.0.2" {
					t.Fatalf("the origin saw X-Forwarded-For %q through haproxy, want the client's 127.0.0.2", got)
				}
			}
			if len(got) != 3 {
				t.Fatalf("the origin saw %d requests, want 3", len(got))
			}
			// The same header, from outside from.
			hdr := proxyproto.AppendV2(nil, proxyproto.Header{Source: netip.MustParseAddrPort("127.0.0.2:40000"),
				Dest: netip.MustParseAddrPort("127.0.0.1:80")}, nil)
			if s := sendRefused(t, "127.0.0.3", g.Addr(), hdr); s != 0 {
				t.Fatalf("the header from 127.0.0.3 got %d, want refused", s)
			}
			c.Close()
			drain(t, g)
			clients := logClients(t, file)
			if len(clients) != 3 {
				t.Fatalf("%d access log lines, want 3: %q", len(clients), clients)
			}
			for _, cl := range clients {
				if !strings.HasPrefix(cl, "127.0.0.2:") {
					t.Fatalf("the access log's clients %q, want 127.0.0.2 (the client), not haproxy's 127.0.0.1", clients)
				}
			}
			t.Logf("through haproxy: X-Forwarded-For %q, access log clients %q", got, clients)
		})
	}
}

// proxied dials the gateway from 127.0.0.1 (a trusted balancer) and sends
// a PROXY v2 header for client src.
func proxied(t testing.TB, addr string, src netip.Addr) net.Conn {
	t.Helper()
	c := dialFrom(t, "127.0.0.1", addr)
	hdr := proxyproto.AppendV2(nil, proxyproto.Header{Source: netip.AddrPortFrom(src, 40000),
		Dest: netip.MustParseAddrPort("127.0.0.1:80")}, nil)
	if _, err := c.Write(hdr); err != nil {
		t.Fatal(err)
	}
	return c
}

// getFull sends GET / on c and returns the response with its body read.
func getFull(t testing.TB, c net.Conn, br *bufio.Reader) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: gw.test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestAddressRulesRefuseBeforeUpstream: a client in the listener's deny
// list, or in the route's, gets 403 address_denied, counted by route, and
// the origin sees nothing of it; the client address is the PROXY
// header's; the rules change with a reload.
func TestAddressRulesRefuseBeforeUpstream(t *testing.T) {
	origin := startXFFOrigin(t)
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "access.log")
			g := edgeGateway(t, fmt.Sprintf(`downstream:
  fast_path: %v
  proxy_protocol: {from: [127.0.0.1/32], other: plain}
  addresses: {deny: [127.0.0.3/32, 203.0.113.0/24]}`, fast),
				", addresses: {allow: [127.0.0.0/8, 198.51.100.0/24], deny: [127.0.0.2/32]}", origin.addr, file)
			before := len(origin.requests())
			for _, tc := range []struct {
				name   string
				conn   func() net.Conn
				status int
			}{
				{"127.0.0.4, allowed", func() net.Conn { return dialFrom(t, "127.0.0.4", g.Addr()) }, 200},
				{"127.0.0.2, the route's deny", func() net.Conn { return dialFrom(t, "127.0.0.2", g.Addr()) }, 403},
				{"127.0.0.3, the listener's deny", func() net.Conn { return dialFrom(t, "127.0.0.3", g.Addr()) }, 403},
				{"PROXY 203.0.113.5, the listener's deny", func() net.Conn { return proxied(t, g.Addr(), netip.MustParseAddr("203.0.113.5")) }, 403},
				{"PROXY 192.0.2.5, outside the route's allow", func() net.Conn { return proxied(t, g.Addr(), netip.MustParseAddr("192.0.2.5")) }, 403},
				{"PROXY 198.51.100.5, allowed", func() net.Conn { return proxied(t, g.Addr(), netip.MustParseAddr("198.51.100.5")) }, 200},
			} {
				c := tc.conn()
				resp := getFull(t, c, bufio.NewReader(c))
				if resp.StatusCode != tc.status {
					t.Fatalf("%s: %d, want %d", tc.name, resp.StatusCode, tc.status)
				}
				if tc.status == 403 && resp.Header.Get("X-Corput-Error") != "address_denied" {
					t.Fatalf("%s: X-Corput-Error %q", tc.name, resp.Header.Get("X-Corput-Error"))
				}
			}
			if got := origin.requests()[before:]; len(got) != 2 {
				t.Fatalf("the origin saw %d requests (%q), want the 2 allowed ones: a denied one must do no upstream work", len(got), got)
			}
			for labels, want := range map[[2]string]float64{{"", "address_denied"}: 2, {"app", "address_denied"}: 2} {
				if n := testutil.ToFloat64(g.metrics.RequestsRefused.WithLabelValues(labels[0], labels[1])); n != want {
					t.Errorf("corput_requests_refused_total%v = %v, want %v", labels, n, want)
				}
			}
			// A reload lifts the route's deny.
			cfg := *g.Running()
			cfg.Routes = append([]config.Route(nil), cfg.Routes...)
			cfg.Routes[0].Addresses.Deny = nil
			if err := g.Reload(&cfg); err != nil {
				t.Fatal(err)
			}
			c := dialFrom(t, "127.0.0.2", g.Addr())
			if resp := getFull(t, c, bufio.NewReader(c)); resp.StatusCode != 200 {
				t.Fatalf("after the reload lifted its deny, 127.0.0.2 got %d", resp.StatusCode)
			}
		})
	}
}

// TestRateLimitKeyedByProxyAddress: a route limited to 1 request a second
// with a burst of 5, keyed by client address, sent 10 requests at once by
// each of two clients (PROXY v2 addresses on one balancer connection
// each): 5 (6 if a second passed) of each client's pass, the rest get 429
// with Retry-After: 1 and X-Corput-Error: rate_limited, and the origin
// sees only those that passed. An unchanged rate_limit keeps its buckets
// across a reload; a changed one starts full.
func TestRateLimitKeyedByProxyAddress(t *testing.T) {
	origin := startXFFOrigin(t)
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "access.log")
			g := edgeGateway(t, fmt.Sprintf("downstream: {fast_path: %v, proxy_protocol: {from: [127.0.0.1/32]}}", fast),
				", rate_limit: {requests_per_second: 1, burst: 5, key: client_address}", origin.addr, file)
			before := len(origin.requests())
			send := func(client string, n int) (passed int) {
				c := proxied(t, g.Addr(), netip.MustParseAddr(client))
				br := bufio.NewReader(c)
				for range n {
					resp := getFull(t, c, br)
					switch resp.StatusCode {
					case 200:
						passed++
					case 429:
						if resp.Header.Get("Retry-After") != "1" || resp.Header.Get("X-Corput-Error") != "rate_limited" {
							t.Fatalf("429 with Retry-After %q, X-Corput-Error %q", resp.Header.Get("Retry-After"), resp.Header.Get("X-Corput-Error"))
						}
					default:
						t.Fatalf("status %d", resp.StatusCode)
					}
				}
				return passed
			}
			start := time.Now()
			a, b := send("192.0.2.1", 10), send("192.0.2.2", 10)
			slack := int(time.Since(start) / time.Second)
			if a < 5 || a > 5+slack || b < 5 || b > 5+slack {
				t.Fatalf("passed %d and %d of 10 each in %v, want 5 each (a token a second on top)", a, b, time.Since(start))
			}
			if got := len(origin.requests()) - before; got != a+b {
				t.Fatalf("the origin saw %d requests, want the %d that passed", got, a+b)
			}
			if n := testutil.ToFloat64(g.metrics.RequestsRefused.WithLabelValues("app", "rate_limited")); int(n) != 20-a-b {
				t.Fatalf("counted %v rate_limited, want %d", n, 20-a-b)
			}
			// An unchanged rate_limit keeps its buckets across a reload: the
			// client stays limited.
			cfg := *g.Running()
			if err := g.Reload(&cfg); err != nil {
				t.Fatal(err)
			}
			if p := send("192.0.2.1", 1); p != 0 && time.Since(start) < time.Second {
				t.Fatal("an unchanged rate_limit lost its buckets in a reload")
			}
			// A changed one starts full.
			changed := *g.Running() // a new value: the running state holds &cfg
			changed.Routes = append([]config.Route(nil), changed.Routes...)
			rl := *changed.Routes[0].RateLimit
			rl.Burst = 7
			changed.Routes[0].RateLimit = &rl
			if err := g.Reload(&changed); err != nil {
				t.Fatal(err)
			}
			if p := send("192.0.2.1", 7); p != 7 {
				t.Fatalf("after a reload changed the burst to 7, %d of 7 passed", p)
			}
		})
	}
}

// TestRedirectHTTP: the redirect_http listener answers every request with
// a redirect to HTTPS, the request's host (its port dropped) and target
// kept, the status and HTTPS port from the configuration in force.
func TestRedirectHTTP(t *testing.T) {
	origin := startXFFOrigin(t)
	file := filepath.Join(t.TempDir(), "access.log")
	g := edgeGateway(t, "redirect_http: {listen: 127.0.0.1:0}", "", origin.addr, file)
	addr := g.RedirectAddr()
	if addr == "" {
		t.Fatal("no redirect listener")
	}
	for _, tc := range []struct{ raw, location string }{
		{"GET /pay/x?y=1 HTTP/1.1\r\nHost: shop.test\r\n\r\n", "https://shop.test/pay/x?y=1"},
		{"POST /a HTTP/1.1\r\nHost: shop.test:80\r\nContent-Length: 0\r\n\r\n", "https://shop.test/a"},
		{"GET http://shop.test/abs?q HTTP/1.1\r\nHost: shop.test\r\n\r\n", "https://shop.test/abs?q"},
		{"GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n", "https://[2001:db8::1]/"},
	} {
		c := dialFrom(t, "127.0.0.1", addr)
		io.WriteString(c, tc.raw)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 308 || resp.Header.Get("Location") != tc.location {
			t.Fatalf("%q: %d Location %q, want 308 %q", tc.raw, resp.StatusCode, resp.Header.Get("Location"), tc.location)
		}
	}
	cfg := *g.Running()
	rh := *cfg.RedirectHTTP
	rh.Status, rh.HTTPSPort = 301, 8443
	cfg.RedirectHTTP = &rh
	if err := g.Reload(&cfg); err != nil {
		t.Fatal(err)
	}
	c := dialFrom(t, "127.0.0.1", addr)
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: shop.test\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 301 || resp.Header.Get("Location") != "https://shop.test:8443/x" {
		t.Fatalf("after the reload: %d %q, want 301 https://shop.test:8443/x", resp.StatusCode, resp.Header.Get("Location"))
	}
	if n := len(origin.requests()); n != 0 {
		t.Fatalf("the origin saw %d requests from the redirect listener", n)
	}
}

// rss is the process's resident set size in KiB (/proc/self/status).
func rss(t testing.TB) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// TestRateLimitWallClock (CORPUT_RATE_WALLCLOCK=1): a route limited to
// 1,000 requests a second with a burst of 200, offered about 5,000 a
// second for 10 s over 16 connections: 200 + 1,000 × the elapsed seconds
// pass, within 2 %, and the rest get 429. The figures are logged.
func TestRateLimitWallClock(t *testing.T) {
	if os.Getenv("CORPUT_RATE_WALLCLOCK") == "" {
		t.Skip("set CORPUT_RATE_WALLCLOCK=1 to offer 5,000 req/s for 10 s to a route limited to 1,000 req/s (a wall-clock figure)")
	}
	origin := startXFFOrigin(t)
	g := edgeGateway(t, "downstream: {fast_path: true}", ", rate_limit: {requests_per_second: 1000, burst: 200}",
		origin.addr, filepath.Join(t.TempDir(), "access.log"))
	const conns, offered, run = 16, 5000, 10 * time.Second
	gap := time.Duration(conns) * time.Second / offered
	var mu sync.Mutex
	passed, limited, other := 0, 0, 0
	var first, last time.Time
	start := time.Now()
	var wg sync.WaitGroup
	for w := range conns {
		wg.Go(func() {
			c := dialFrom(t, "127.0.0.1", g.Addr())
			c.SetDeadline(time.Now().Add(run + 30*time.Second))
			br := bufio.NewReader(c)
			p, l, o := 0, 0, 0
			var f, z time.Time
			for at := start.Add(time.Duration(w) * gap / conns); at.Before(start.Add(run)); at = at.Add(gap) {
				time.Sleep(time.Until(at))
				sent := time.Now()
				if f.IsZero() {
					f = sent
				}
				z = sent
				switch getFull(t, c, br).StatusCode {
				case 200:
					p++
				case 429:
					l++
				default:
					o++
				}
			}
			mu.Lock()
			passed, limited, other = passed+p, limited+l, other+o
			if first.IsZero() || f.Before(first) {
				first = f
			}
			if z.After(last) {
				last = z
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := last.Sub(first)
	total := passed + limited + other
	want := 200 + 1000*elapsed.Seconds()
	t.Logf("offered %d requests in %.2f s (%.0f req/s): %d passed, %d got 429, %d other; expected 200 + 1000 × %.2f = %.0f (passed/expected %.4f)",
		total, elapsed.Seconds(), float64(total)/elapsed.Seconds(), passed, limited, other, elapsed.Seconds(), want, float64(passed)/want)
	if other != 0 {
		t.Fatalf("%d answers were neither 200 nor 429", other)
	}
	if d := float64(passed)/want - 1; d < -0.02 || d > 0.02 {
		t.Fatalf("%d passed, want %.0f ± 2 %%", passed, want)
	}
	if n := testutil.ToFloat64(g.metrics.RequestsRefused.WithLabelValues("app", "rate_limited")); int(n) != limited {
		t.Fatalf("counted %v rate_limited, the client saw %d", n, limited)
	}
}

// TestRateLimitManyAddressesBounded (CORPUT_RATE_KEYS=1): 100,000
// distinct client addresses, each a connection with its own PROXY v2
// header from the trusted balancer, on a route keyed by client address
// (max_keys 65,536), in two halves: every first request passes, the
// table stays at its slots, and the second 50,000 addresses grow the
// process's RSS (after a GC that returns freed memory) by less than
// 16 MiB. The RSS figures are logged.
func TestRateLimitManyAddressesBounded(t *testing.T) {
	if os.Getenv("CORPUT_RATE_KEYS") == "" {
		t.Skip("set CORPUT_RATE_KEYS=1 to send 100,000 distinct client addresses through PROXY v2 headers and log the RSS")
	}
	origin := startXFFOrigin(t)
	g := edgeGateway(t, "downstream: {fast_path: true, proxy_protocol: {from: [127.0.0.1/32]}}",
		", rate_limit: {requests_per_second: 1, burst: 1, key: client_address, max_keys: 65536}",
		origin.addr, filepath.Join(t.TempDir(), "access.log"))
	const clients, workers = 100_000, 8
	settled := func() int {
		debug.FreeOSMemory()
		return rss(t)
	}
	half := func(from, to int) (passed int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				p := 0
				for i := from + w; i < to; i += workers {
					src := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
					c, err := net.Dial("tcp", g.Addr())
					if err != nil {
						t.Error(err)
						return
					}
					c.SetDeadline(time.Now().Add(10 * time.Second))
					hdr := proxyproto.AppendV2(nil, proxyproto.Header{Source: netip.AddrPortFrom(src, 40000),
						Dest: netip.MustParseAddrPort("127.0.0.1:80")}, nil)
					if _, err := c.Write(hdr); err == nil && getOn(c) == 200 {
						p++
					}
					c.(*net.TCPConn).SetLinger(0) // no TIME_WAIT: 100,000 ports
					c.Close()
				}
				mu.Lock()
				passed += p
				mu.Unlock()
			})
		}
		wg.Wait()
		return passed
	}
	r0 := settled()
	start := time.Now()
	p1 := half(0, clients/2)
	r1 := settled()
	p2 := half(clients/2, clients)
	r2 := settled()
	slots := g.st().table.Edges[0].Limit.Slots()
	t.Logf("%d distinct addresses in %.1f s: %d passed their first request; table %d slots (%d KiB); RSS %d KiB at start, %d KiB after 50,000 addresses, %d KiB after 100,000 (second half %+d KiB)",
		clients, time.Since(start).Seconds(), p1+p2, slots, slots*16/1024, r0, r1, r2, r2-r1)
	if p1+p2 != clients {
		t.Fatalf("%d of %d first requests passed; each address has its own bucket", p1+p2, clients)
	}
	if slots != 65536 {
		t.Fatalf("the table has %d slots, want 65536", slots)
	}
	if r2-r1 > 16<<10 {
		t.Fatalf("the second 50,000 addresses grew RSS by %d KiB: the table must stay bounded", r2-r1)
	}
}

// TestTrustedProxiesApplyToTheProxyAddress: downstream.trusted_proxies is
// matched against the PROXY header's address, not the balancer's: a
// trusted client's X-Forwarded-For is appended to, and its last address
// is the one the address rules judge; an untrusted client's is replaced.
func TestTrustedProxiesApplyToTheProxyAddress(t *testing.T) {
	origin := startXFFOrigin(t)
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			g := edgeGateway(t, fmt.Sprintf(`downstream:
  fast_path: %v
  proxy_protocol: {from: [127.0.0.1/32]}
  trusted_proxies: [203.0.113.0/24]`, fast), ", addresses: {deny: [1.2.3.4/32]}", origin.addr, filepath.Join(t.TempDir(), "access.log"))
			before := len(origin.requests())
			do := func(src, xff string) int {
				c := proxied(t, g.Addr(), netip.MustParseAddr(src))
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: gw.test\r\nX-Forwarded-For: "+xff+"\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if s := do("203.0.113.9", "1.2.3.4"); s != 403 {
				t.Fatalf("a trusted proxy's client 1.2.3.4, denied: %d, want 403", s)
			}
			if s := do("203.0.113.9", "5.6.7.8"); s != 200 {
				t.Fatalf("a trusted proxy's client 5.6.7.8: %d", s)
			}
			if s := do("192.0.2.1", "1.2.3.4"); s != 200 {
				t.Fatalf("an untrusted client claiming 1.2.3.4: %d, want 200 (its claim is not read)", s)
			}
			got := origin.requests()[before:]
			want := []string{"5.6.7.8, 203.0.113.9", "192.0.2.1"}
			if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
				t.Fatalf("the origin saw X-Forwarded-For %q, want %q", got, want)
			}
		})
	}
}
