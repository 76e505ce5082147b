package edgetls

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"

	"github.com/corput/corput/internal/testcert"
)

// TestSNIChoosesTheCertificate: an exact name, then a one-label wildcard,
// then the default certificate; no server name, or an unknown one, gets
// the default. Case and a trailing dot do not matter.
func TestSNIChoosesTheCertificate(t *testing.T) {
	p := newPKI(t, "sni")
	def, defCert, defKey := p.server(t, "default", "default.test")
	a, aCert, aKey := p.server(t, "a", "a.test")
	b, bCert, bKey := p.server(t, "b", "b.test", "bee.test")
	w, wCert, wKey := p.server(t, "w", "*.w.test")
	var cur current
	cur.Store(mustNew(t, &Settings{Cert: defCert, Key: defKey, Certificates: []Host{
		{Hosts: []string{"a.test"}, Cert: aCert, Key: aKey},
		{Hosts: []string{"b.test", "Bee.Test"}, Cert: bCert, Key: bKey},
		{Hosts: []string{"*.w.test"}, Cert: wCert, Key: wKey},
	}}, nil))
	addr := serve(t, &cur, nil)
	for _, c := range []struct {
		sni  string
		want *testcert.Cert
	}{
		{"a.test", a}, {"B.TEST", b}, {"bee.test.", b}, {"x.w.test", w},
		{"y.x.w.test", def}, {"w.test", def}, {"", def}, {"unknown.test", def},
	} {
		st, err := handshake(addr, &tls.Config{ServerName: c.sni, InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("SNI %q: %v", c.sni, err)
		}
		if got := st.PeerCertificates[0]; !got.Equal(c.want.Leaf) {
			t.Errorf("SNI %q: served %q, want %q", c.sni, got.Subject.CommonName, c.want.Leaf.Subject.CommonName)
		}
	}
	// A verifying client accepts each host's certificate for its name.
	for _, host := range []string{"a.test", "bee.test", "any.w.test", "default.test"} {
		if _, err := handshake(addr, &tls.Config{ServerName: host, RootCAs: p.ca.Pool()}); err != nil {
			t.Errorf("a client verifying %s: %v", host, err)
		}
	}
}

// TestPolicyVersionsSuitesCurvesALPN: nothing below TLS 1.2, no CBC suite
// unless listed, min_version 1.3 refuses 1.2, curves and ALPN as set.
func TestPolicyVersionsSuitesCurvesALPN(t *testing.T) {
	p := newPKI(t, "policy")
	_, certFile, keyFile := p.server(t, "gw", "gw.test")
	cbc := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA}
	client := func(mod func(*tls.Config)) *tls.Config {
		c := &tls.Config{ServerName: "gw.test", RootCAs: p.ca.Pool(), NextProtos: []string{"h2", "http/1.1"}}
		if mod != nil {
			mod(c)
		}
		return c
	}
	cases := []struct {
		name     string
		settings func(*Settings)
		client   func(*tls.Config)
		fails    bool
		version  uint16
		suite    uint16
		alpn     string
	}{
		{name: "default: TLS 1.3, h2", version: tls.VersionTLS13, alpn: "h2"},
		{name: "default: TLS 1.2 with an AEAD suite", client: func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 },
			version: tls.VersionTLS12, alpn: "h2"},
		{name: "default: TLS 1.1 refused", client: func(c *tls.Config) { c.MinVersion, c.MaxVersion = tls.VersionTLS10, tls.VersionTLS11 }, fails: true},
		{name: "default: CBC suites only refused", client: func(c *tls.Config) { c.MaxVersion, c.CipherSuites = tls.VersionTLS12, cbc }, fails: true},
		{name: "listed CBC suite served", settings: func(s *Settings) {
			s.CipherSuites = []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"}
		}, client: func(c *tls.Config) { c.MaxVersion, c.CipherSuites = tls.VersionTLS12, cbc },
			version: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, alpn: "h2"},
		{name: "min_version 1.3 refuses 1.2", settings: func(s *Settings) { s.MinVersion = "1.3" },
			client: func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 }, fails: true},
		{name: "min_version 1.3 serves 1.3", settings: func(s *Settings) { s.MinVersion = "1.3" }, version: tls.VersionTLS13, alpn: "h2"},
		{name: "alpn http/1.1 only", settings: func(s *Settings) { s.ALPN = []string{"http/1.1"} }, version: tls.VersionTLS13, alpn: "http/1.1"},
		{name: "curves P-256 refuses an X25519-only client", settings: func(s *Settings) { s.Curves = []string{"P-256"} },
			client: func(c *tls.Config) { c.CurvePreferences = []tls.CurveID{tls.X25519} }, fails: true},
		{name: "curves P-256 serves a P-256 client", settings: func(s *Settings) { s.Curves = []string{"P-256"} },
			client: func(c *tls.Config) { c.CurvePreferences = []tls.CurveID{tls.CurveP256} }, version: tls.VersionTLS13, alpn: "h2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &Settings{Cert: certFile, Key: keyFile}
			if c.settings != nil {
				c.settings(s)
			}
			var cur current
			cur.Store(mustNew(t, s, nil))
			addr := serve(t, &cur, nil)
			st, err := handshake(addr, client(c.client))
			if c.fails {
				if err == nil {
					t.Fatalf("handshake succeeded: version %x, suite %s", st.Version, tls.CipherSuiteName(st.CipherSuite))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Version != c.version || st.NegotiatedProtocol != c.alpn || (c.suite != 0 && st.CipherSuite != c.suite) {
				t.Fatalf("version %x, suite %s, ALPN %q; want %x, %s, %q", st.Version, tls.CipherSuiteName(st.CipherSuite),
					st.NegotiatedProtocol, c.version, tls.CipherSuiteName(c.suite), c.alpn)
			}
		})
	}
}

// TestDefaultPolicyOffersOnlyAEADWithForwardSecrecy reads the policy the
// handshakes get: no CBC suite, no RSA key exchange, nothing below 1.2.
func TestDefaultPolicyOffersOnlyAEADWithForwardSecrecy(t *testing.T) {
	p := newPKI(t, "default")
	_, certFile, keyFile := p.server(t, "gw", "gw.test")
	cfg := mustNew(t, &Settings{Cert: certFile, Key: keyFile}, nil).Config("")
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion %x", cfg.MinVersion)
	}
	if len(cfg.CipherSuites) != len(DefaultCipherSuites) {
		t.Errorf("%d suites, want the %d defaults", len(cfg.CipherSuites), len(DefaultCipherSuites))
	}
	for _, id := range cfg.CipherSuites {
		name := tls.CipherSuiteName(id)
		if !strings.HasPrefix(name, "TLS_ECDHE_") || !(strings.Contains(name, "_GCM_") || strings.Contains(name, "CHACHA20_POLY1305")) {
			t.Errorf("default suite %s is not ECDHE with an AEAD", name)
		}
	}
	if !slices.Equal(cfg.NextProtos, []string{"h2", "http/1.1"}) {
		t.Errorf("ALPN %q", cfg.NextProtos)
	}
	if !slices.Equal(cfg.CurvePreferences, []tls.CurveID{tls.X25519MLKEM768, tls.X25519, tls.CurveP256, tls.CurveP384}) {
		t.Errorf("curves %v", cfg.CurvePreferences)
	}
}

// TestMisdirected: a request for a host under another client policy than
// its connection's handshake is misdirected; the same policy is not,
// whatever the certificate.
func TestMisdirected(t *testing.T) {
	p := newPKI(t, "misdirected")
	_, defCert, defKey := p.server(t, "default", "default.test")
	_, aCert, aKey := p.server(t, "a", "a.test")
	_, mCert, mKey := p.server(t, "m", "*.mtls.test")
	pol := mustNew(t, &Settings{Cert: defCert, Key: defKey, Certificates: []Host{
		{Hosts: []string{"a.test"}, Cert: aCert, Key: aKey},
		{Hosts: []string{"*.mtls.test"}, Cert: mCert, Key: mKey, ClientCA: p.caFile, ClientAuth: ClientAuthRequire},
	}}, nil)
	for _, c := range []struct {
		sni, host string
		want      bool
	}{
		{"a.test", "a.test", false},
		{"a.test", "default.test:8443", false}, // both ask for no certificate
		{"a.test", "x.mtls.test", true},
		{"", "X.MTLS.TEST:443", true},
		{"x.mtls.test", "y.mtls.test", false},
		{"x.mtls.test", "a.test", true},
		{"", "[::1]:8443", false},
	} {
		if got := pol.Misdirected(c.sni, c.host); got != c.want {
			t.Errorf("Misdirected(%q, %q) = %v, want %v", c.sni, c.host, got, c.want)
		}
	}
}
