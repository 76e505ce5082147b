package proxies

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/corput/corput/bench/peers/internal/certs"
	"github.com/corput/corput/bench/peers/internal/results"
)

// Caddy is Caddy; Prior adds h2c (by prior knowledge) to its cleartext
// listener's protocols.
type Caddy struct{ Prior bool }

func (Caddy) Name() string { return results.Caddy }
func (Caddy) Bin() string  { return "caddy" }
func (p Caddy) H2C() bool  { return p.Prior }

func (Caddy) launch(dir string) (string, []string) {
	path := filepath.Join(dir, "Caddyfile")
	return path, []string{"caddy", "run", "--config", path, "--adapter", "caddyfile"}
}

func (p Caddy) Files(dir, listen string, members []string, joining string, tc *certs.Files) ([]string, error) {
	return write(p, dir, caddyConfig(listen, members, joining, p.Prior, tc))
}

// caddyH2CServers is the global servers block that adds h2c to the
// cleartext listener.
const caddyH2CServers = "\tservers {\n\t\tprotocols h1 h2c\n\t}\n"

// caddyConfig: least_conn, keep-alive with 64 idle connections per host,
// passive health (a failed request takes the host out for 2 s) and retries
// on another host for 1 s; with tc, HTTPS on listen, TLS 1.3 only (see
// caddyTLS); with h2c, HTTP/1.1 and h2c on listen. Caddy has no slow start
// and no request queue.
func caddyConfig(listen string, members []string, joining string, h2c bool, tc *certs.Files) string {
	global, site, tlsBlock := "", "http://"+listen, ""
	switch {
	case tc != nil:
		global, site, tlsBlock = caddyTLS(listen, tc)
	case h2c:
		global = caddyH2CServers
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
`, global, site, tlsBlock, strings.Join(withJoining(members, joining), " "))
}

// caddyTLS is the Caddyfile's TLS parts: HTTP/1.1 and HTTP/2 only (no
// HTTP/3 listener, as nginx and HAProxy have none here); the certificate
// for clients that send no server name (Go's client sends none for an IP
// address; wrk sends 127.0.0.1); and the site's tls block, TLS 1.3 only.
// Its ciphers line names the scenario's suite as the others are given it,
// but Go's crypto/tls ignores cipher suites for TLS 1.3: Caddy takes the
// line and negotiates what Go picks.
func caddyTLS(listen string, tc *certs.Files) (global, site, block string) {
	global = "\tdefault_sni 127.0.0.1\n\tservers {\n\t\tprotocols h1 h2\n\t}\n"
	block = fmt.Sprintf("\ttls %s %s {\n\t\tprotocols tls1.3\n\t\tciphers %s # no effect: crypto/tls has no TLS 1.3 suite setting\n\t}\n",
		tc.Cert, tc.Key, certs.Suite)
	return global, "https://" + listen, block
}
