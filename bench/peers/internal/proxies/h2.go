package proxies

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/corput/corput/bench/peers/internal/certs"
)

// H2Upstream is a proxy set up for the h2 scenarios: HTTP/2 upstream to
// TLS origins that offer h2 by ALPN, verified with their certificate CA,
// and a cleartext listener, h2c by prior knowledge when Prior is set (the
// h2_streams client). corput, HAProxy and Caddy have one; nginx's proxy
// module speaks HTTP/1.x upstream only, and its Files is an error.
type H2Upstream struct {
	Proxy
	CA      string
	Prior   bool
	Timeout time.Duration // the proxies' upstream request / server timeouts
	Pool    string        // corput's pool: flow mapping; "" for none
}

func (p H2Upstream) H2C() bool { return p.Prior }

func (p H2Upstream) Files(dir, listen string, members []string, _ string, _ *certs.Files) ([]string, error) {
	var text string
	var l launcher
	switch v := p.Proxy.(type) {
	case Corput:
		var err error
		if text, err = v.h2Config(listen, members, p.CA, p.Pool, p.Timeout); err != nil {
			return nil, err
		}
		l = v
	case HAProxy:
		text, l = haproxyH2Config(dir, listen, members, p.CA, p.Prior, v.Fwd, p.Timeout), v
	case Caddy:
		text, l = caddyH2Config(listen, members, p.CA, p.Prior), v
	default:
		return nil, fmt.Errorf("%s does not speak HTTP/2 upstream", p.Name())
	}
	return write(l, dir, text)
}

// h2Config is corput at its defaults but for the origin's protocol (auto:
// ALPN picks h2), its TLS (verified with ca) and a request timeout above
// the hold; pool, when set, is its pool: line (--h2-corput-pool).
func (p Corput) h2Config(listen string, members []string, ca, pool string, timeout time.Duration) (string, error) {
	var b strings.Builder
	if err := corputHead(&b, listen); err != nil {
		return "", err
	}
	b.WriteString("routes:\n  - {path_prefix: /, origin: " + corputOrigin + "}\n")
	b.WriteString("origins:\n  - name: " + corputOrigin + "\n    protocol: auto\n")
	fmt.Fprintf(&b, "    tls: {ca: %q}\n", ca)
	b.WriteString(endpointsYAML(members, "    "))
	b.WriteString("    balancer: " + p.balancer() + "\n")
	if pool != "" {
		b.WriteString("    pool: " + pool + "\n")
	}
	fmt.Fprintf(&b, "    timeouts: {connect: 1s, request: %v}\n", timeout)
	return b.String(), nil
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
		global = caddyH2CServers
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
