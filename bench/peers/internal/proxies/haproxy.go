package proxies

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/corput/corput/bench/peers/internal/certs"
	"github.com/corput/corput/bench/peers/internal/results"
)

// HAProxy is HAProxy; Fwd adds the X-Forwarded-* fields; Prior makes its
// listener h2c by prior knowledge (bind … proto h2: h2 only).
type HAProxy struct{ Fwd, Prior bool }

func (HAProxy) Name() string { return results.HAProxy }
func (HAProxy) Bin() string  { return "haproxy" }
func (p HAProxy) H2C() bool  { return p.Prior }

func (HAProxy) launch(dir string) (string, []string) {
	path := filepath.Join(dir, "haproxy.cfg")
	return path, []string{"haproxy", "-db", "-f", path}
}

func (p HAProxy) Files(dir, listen string, members []string, joining string, tc *certs.Files) ([]string, error) {
	return write(p, dir, haproxyConfig(dir, listen, members, joining, p.Fwd, p.Prior, tc))
}

// haproxyConfig: leastconn, http-reuse always, at most 50 requests per
// server with the rest queued up to 1 s (HAProxy's bounded queue),
// slowstart 60s, a refused connection redispatched to another server, and
// with fwd the X-Forwarded-For, -Proto and -Host fields corput sends; with
// tc, HTTPS on listen, TLS 1.3 only with TLS_AES_128_GCM_SHA256 only; with
// h2c, HTTP/2 by prior knowledge only on listen.
func haproxyConfig(dir, listen string, members []string, joining string, fwd, h2c bool, tc *certs.Files) string {
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
func haproxyTLS(tc *certs.Files) string {
	if tc == nil {
		return ""
	}
	return fmt.Sprintf(" ssl crt %s ssl-min-ver TLSv1.3 ciphersuites %s", tc.Both, certs.Suite)
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
