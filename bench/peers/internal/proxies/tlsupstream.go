package proxies

import (
	"fmt"
	"strings"

	"github.com/corput/corput/bench/peers/internal/certs"
)

// TLSUpstream is a proxy in front of origins that serve TLS 1.3 only and
// require a client certificate (the tls_origins and many_endpoints
// scenarios): its usual config, with the origins reached over TLS with
// the run's client certificate, verified against the run's CA. HTTP/2
// upstream where the proxy speaks it: corput (CorputProtocol, "" for
// auto: ALPN), HAProxy (alpn h2,http/1.1), Caddy (its default over TLS);
// nginx speaks HTTP/1.1 to origins.
type TLSUpstream struct {
	Proxy
	Up             *certs.Upstream
	CorputProtocol string // corput's origins[].protocol (--tls-corput-protocol); "" for auto
}

func (v TLSUpstream) Files(dir, listen string, members []string, _ string, tc *certs.Files) ([]string, error) {
	u := v.Up
	var text string
	var l launcher
	switch p := v.Proxy.(type) {
	case Corput:
		base, err := p.config(listen, members, false, tc)
		if err != nil {
			return nil, err
		}
		text = strings.Replace(base, "    protocol: h1\n", fmt.Sprintf("    protocol: %s\n    tls: {ca: %q, cert: %q, key: %q}\n", v.corputProtocol(), u.CA, u.ClientCert, u.ClientKey), 1)
		l = p
	case Nginx:
		text = strings.Replace(nginxConfig(dir, listen, members, "", p.Fwd, false, tc), "      proxy_pass http://origins;\n",
			"      proxy_pass https://origins;\n"+nginxUpstreamTLS(u), 1)
		l = p
	case HAProxy:
		text = strings.Replace(haproxyConfig(dir, listen, members, "", p.Fwd, false, tc), "  default-server maxconn 50 slowstart 60s\n",
			"  default-server maxconn 50 slowstart 60s"+haproxyUpstreamTLS(u)+"\n", 1)
		l = p
	case Caddy:
		text = strings.Replace(caddyConfig(listen, members, "", false, tc), "\t\ttransport http {\n",
			"\t\ttransport http {\n"+caddyUpstreamTLS(u), 1)
		l = p
	default:
		return nil, fmt.Errorf("%s has no TLS upstream configuration", v.Name())
	}
	return write(l, dir, text)
}

func (v TLSUpstream) corputProtocol() string {
	if v.CorputProtocol == "" {
		return "auto"
	}
	return v.CorputProtocol
}

// nginxUpstreamTLS is nginx's location lines for the origins: the client
// certificate, the origin verified against the CA by the name its
// certificate carries, TLS 1.3 with the one suite, sessions reused (its
// default, written out). nginx speaks HTTP/1.1 to origins.
func nginxUpstreamTLS(u *certs.Upstream) string {
	return fmt.Sprintf("      proxy_ssl_certificate %s;\n      proxy_ssl_certificate_key %s;\n"+
		"      proxy_ssl_trusted_certificate %s;\n      proxy_ssl_verify on;\n      proxy_ssl_name %s;\n"+
		"      proxy_ssl_protocols TLSv1.3;\n      proxy_ssl_conf_command Ciphersuites %s;\n      proxy_ssl_session_reuse on;\n",
		u.ClientCert, u.ClientKey, u.CA, u.ServerName, certs.Suite)
}

// haproxyUpstreamTLS is HAProxy's server options: TLS verified against
// the CA, the client certificate (crt takes certificate and key in one
// file), ALPN h2 then http/1.1, TLS 1.3 with the one suite. HAProxy
// reuses TLS sessions to servers by default.
func haproxyUpstreamTLS(u *certs.Upstream) string {
	return fmt.Sprintf(" ssl verify required ca-file %s crt %s alpn h2,http/1.1 ssl-min-ver TLSv1.3 ciphersuites %s",
		u.CA, u.ClientBoth, certs.Suite)
}

// caddyUpstreamTLS is Caddy's transport lines: TLS with the client
// certificate, the CA and the certificate's name; over TLS Caddy offers
// HTTP/2 and HTTP/1.1 by ALPN. Go's crypto/tls takes no TLS 1.3 suite.
func caddyUpstreamTLS(u *certs.Upstream) string {
	return fmt.Sprintf("\t\t\ttls\n\t\t\ttls_client_auth %s %s\n\t\t\ttls_trusted_ca_certs %s\n\t\t\ttls_server_name %s\n",
		u.ClientCert, u.ClientKey, u.CA, u.ServerName)
}
