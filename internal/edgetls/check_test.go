package edgetls

import (
	"fmt"
	"strings"
	"testing"
)

// TestCheckFindings: every bad setting is reported under its key with what
// to do, warnings apart; a good block has no finding.
func TestCheckFindings(t *testing.T) {
	p := newPKI(t, "check")
	_, certFile, keyFile := p.server(t, "gw", "gw.test", "*.w.test")
	_, otherCert, otherKey := p.server(t, "other", "other.test")
	type want struct {
		key, text string
		warning   bool
	}
	host := func(h Host) []Host {
		if h.Cert == "" {
			h.Cert, h.Key = certFile, keyFile
		}
		return []Host{h}
	}
	cases := []struct {
		name  string
		s     Settings
		wants []want
	}{
		{"defaults", Settings{}, nil},
		{"written defaults", func() Settings { var s Settings; s.SetDefaults(); return s }(), nil},
		{"no key", Settings{Key: "-"}, []want{{"", "HTTPS needs both cert and key", false}, {"key", "missing: cert is set", false}}},
		{"TLS 1.1", Settings{MinVersion: "1.1"}, []want{{"min_version", "deprecated (RFC 8996)", false}}},
		{"not a version", Settings{MinVersion: "1.20"}, []want{{"min_version", "is not a TLS version", false}}},
		{"empty suites", Settings{CipherSuites: []string{}}, []want{{"cipher_suites", "an empty list", false}}},
		{"RSA key exchange", Settings{CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_128_GCM_SHA256"}},
			[]want{{"cipher_suites[1]", "no forward secrecy", false}}},
		{"CBC", Settings{CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"}},
			[]want{{"cipher_suites[1]", "a CBC suite", true}}},
		{"a TLS 1.3 suite", Settings{CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"}},
			[]want{{"cipher_suites[1]", "TLS 1.3 suite", false}}},
		{"unknown suite", Settings{CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "AES128"}},
			[]want{{"cipher_suites[1]", "not a cipher suite crypto/tls knows", false}}},
		{"twice", Settings{CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}},
			[]want{{"cipher_suites[1]", "listed twice", false}}},
		{"no suite for the key", Settings{CipherSuites: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}},
			[]want{{"cipher_suites", "no suite listed signs with the ECDSA key of cert", false}}},
		{"h2 without its suite", Settings{CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}},
			[]want{{"cipher_suites", "RFC 9113", false}}},
		{"h2 without its suite, h2 off", Settings{CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}, ALPN: []string{"http/1.1"}}, nil},
		{"suites under 1.3", Settings{MinVersion: "1.3", CipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}},
			[]want{{"cipher_suites", "ignored: min_version is 1.3", true}}},
		{"curves", Settings{Curves: []string{"X448", "x25519", "X25519"}},
			[]want{{"curves[0]", "not a key exchange", false}, {"curves[2]", "listed twice", false}}},
		{"alpn", Settings{ALPN: []string{"h3"}}, []want{{"alpn[0]", "not a protocol corput serves", false}}},
		{"client_auth", Settings{ClientAuth: "optional"}, []want{{"client_auth", "is not one of: none, request, require, verify_if_given", false}}},
		{"verify without a CA", Settings{ClientAuth: ClientAuthVerifyIfGiven}, []want{{"client_auth", "client_ca, which is not set", false}}},
		{"a CA unused", Settings{ClientAuth: ClientAuthNone, ClientCA: p.caFile}, []want{{"client_ca", "not used", true}}},
		{"a CA that is not one", Settings{ClientCA: keyFile}, []want{{"client_ca", "holds no PEM certificate", false}}},
		{"forwarding nothing", Settings{ForwardClientCert: true}, []want{{"forward_client_cert", "none is forwarded", true}}},
		{"forwarding", Settings{ForwardClientCert: true, ClientCA: p.caFile}, []want{{"forward_client_cert", "does not send X-Forwarded-Client-Cert yet", true}}},
		{"a host's own client policy", Settings{Certificates: host(Host{Hosts: []string{"gw.test"}, ClientCA: p.caFile})},
			[]want{{"certificates[0].client_auth", "does not yet refuse (421)", true}}},
		{"no hosts", Settings{Certificates: host(Host{})}, []want{{"certificates[0].hosts", "missing", false}}},
		{"no certificate", Settings{Certificates: []Host{{Hosts: []string{"gw.test"}}}}, []want{{"certificates[0]", "no certificate", false}}},
		{"host names", Settings{Certificates: host(Host{Hosts: []string{"*.*.w.test", "a*.w.test", "10.0.0.1", "x.test:443", "*"}})},
			[]want{
				{"certificates[0].hosts[0]", "not a server name", false}, {"certificates[0].hosts[1]", "not a server name", false},
				{"certificates[0].hosts[2]", "an address", false}, {"certificates[0].hosts[3]", "not a server name", false},
				{"certificates[0].hosts[4]", "not a server name", false},
			}},
		{"a host twice", Settings{Certificates: append(host(Host{Hosts: []string{"GW.test"}}), Host{Hosts: []string{"gw.test."}, Cert: certFile, Key: keyFile})},
			[]want{{"certificates[1].hosts[0]", "also listed at certificates[0].hosts[0]", false}}},
		{"a host the certificate does not name", Settings{Certificates: host(Host{Hosts: []string{"x.w.test", "*.w.test", "gw.test", "*.test"}, Cert: otherCert, Key: otherKey})},
			[]want{
				{"certificates[0].hosts[0]", "does not name x.w.test", true}, {"certificates[0].hosts[1]", "does not name *.w.test", true},
				{"certificates[0].hosts[2]", "does not name gw.test", true}, {"certificates[0].hosts[3]", "does not name *.test", true},
			}},
		{"a host's client_auth", Settings{Certificates: host(Host{Hosts: []string{"gw.test"}, ClientAuth: ClientAuthRequire})},
			[]want{{"certificates[0].client_auth", "client_ca, which is not set", false}, {"certificates[0].client_auth", "does not yet refuse (421)", true}}},
		{"a host's client_auth inherits the CA", Settings{ClientCA: p.caFile, ClientAuth: ClientAuthNone,
			Certificates: host(Host{Hosts: []string{"gw.test"}, ClientAuth: ClientAuthRequire})},
			[]want{{"client_ca", "not used", true}, {"certificates[0].client_auth", "does not yet refuse (421)", true}}},
		{"missing files", Settings{Cert: "/nonexistent/c.pem", Key: "/nonexistent/k.pem", OCSP: "/nonexistent/o.der", SessionTicketKeys: "/nonexistent/t"},
			[]want{{"cert", "cannot read", false}, {"key", "cannot read", false}, {"ocsp", "cannot read", false}, {"session_ticket_keys", "cannot read", false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.s
			if s.Cert == "" && s.Key == "" {
				s.Cert, s.Key = certFile, keyFile
			} else if s.Key == "-" { // the certificate without its key
				s.Cert, s.Key = certFile, ""
			}
			got := s.Check()
			var lines []string
			for _, f := range got {
				lines = append(lines, fmt.Sprintf("%s: %v: %s", f.Key, f.Warning, f.Message))
			}
			if len(got) != len(c.wants) {
				t.Fatalf("%d findings, want %d:\n%s", len(got), len(c.wants), strings.Join(lines, "\n"))
			}
			for i, w := range c.wants {
				if got[i].Key != w.key || got[i].Warning != w.warning || !strings.Contains(got[i].Message, w.text) {
					t.Errorf("finding %d = %s\nwant %s: %v: …%s…", i, lines[i], w.key, w.warning, w.text)
				}
			}
			_, err := New(&s, nil)
			if hasError := strings.Contains(strings.Join(lines, "\n"), ": false: "); hasError != (err != nil) {
				t.Errorf("New: %v; an error among the findings: %v", err, hasError)
			}
		})
	}
}
