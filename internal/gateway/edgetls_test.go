package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/testcert"
)

// The downstream TLS policy (internal/edgetls) on running gateways: real
// TLS on 127.0.0.1, certificates chosen by server name, client
// certificates, and session tickets shared by a fleet.

// issue writes a server certificate ca signs for dns (besides localhost)
// as dir/base.pem and dir/base.key, over the ones there (a rotation in
// place), and returns it.
func (ca *testCA) issue(t *testing.T, dir, base string, dns ...string) *x509.Certificate {
	t.Helper()
	certFile, keyFile, err := ca.IssueFiles(dir, base, x509.ExtKeyUsageServerAuth, dns...)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf
}

// pairKeys is the cert and key keys of dir/base.pem and dir/base.key, for
// a YAML flow mapping.
func pairKeys(dir, base string) string {
	return fmt.Sprintf("cert: %q, key: %q", filepath.Join(dir, base+".pem"), filepath.Join(dir, base+".key"))
}

// edgeClient is an HTTPS client for one server name with its own
// connection pool, trusting roots.
func edgeClient(t *testing.T, serverName string, roots *x509.CertPool, cfg func(*tls.Config)) *http.Client {
	t.Helper()
	tc := &tls.Config{ServerName: serverName, RootCAs: roots}
	if cfg != nil {
		cfg(tc)
	}
	tr := &http.Transport{TLSClientConfig: tc, MaxConnsPerHost: 1, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// edgeGet is one request; it returns the status, the connection's TLS
// state and whether the connection was reused.
func edgeGet(c *http.Client, addr string) (int, *tls.ConnectionState, bool, error) {
	var reused bool
	req, err := http.NewRequest("GET", "https://"+addr+"/", nil)
	if err != nil {
		return 0, nil, false, err
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	}))
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, false, err
	}
	resp.Body.Close()
	return resp.StatusCode, resp.TLS, reused, nil
}

// TestSNIPerHostCertificatesReloadInPlace: three hosts with a certificate
// each and a wildcard: each client sees its own host's certificate, a
// client without a known name the default one. A reload that rotates one
// host's certificate in place serves the new one to new connections,
// while a connection opened before carries on with the old one; the other
// hosts are untouched.
func TestSNIPerHostCertificatesReloadInPlace(t *testing.T) {
	ca, dir := newTestCA(t), t.TempDir()
	certs := map[string]*x509.Certificate{
		"default":  ca.issue(t, dir, "default"),
		"a.test":   ca.issue(t, dir, "a", "a.test"),
		"b.test":   ca.issue(t, dir, "b", "b.test"),
		"c.test":   ca.issue(t, dir, "c", "c.test"),
		"x.w.test": ca.issue(t, dir, "w", "*.w.test"),
	}
	top := fmt.Sprintf("tls:\n  %s\n  certificates:\n", strings.ReplaceAll(pairKeys(dir, "default"), ", key", "\n  key"))
	for _, h := range []struct{ base, host string }{{"a", "a.test"}, {"b", "b.test"}, {"c", "c.test"}, {"w", "*.w.test"}} {
		top += fmt.Sprintf("    - {hosts: [%q], %s}\n", h.host, pairKeys(dir, h.base))
	}
	g, _ := fileGateway(t, top+cfgText(1, "    pool: {prewarm: 0}\n"), startOrigins(t, 1, testorigin.Options{Classes: fastClass}))

	sees := func(c *http.Client, host string, want *x509.Certificate) {
		t.Helper()
		code, st, _, err := edgeGet(c, g.Addr())
		if err != nil || code != 200 {
			t.Fatalf("%s: %d, %v", host, code, err)
		}
		if got := st.PeerCertificates[0]; !got.Equal(want) {
			t.Fatalf("%s: served %q (serial %x), want %q (serial %x)", host, got.Subject.CommonName, got.SerialNumber, want.Subject.CommonName, want.SerialNumber)
		}
	}
	clients := map[string]*http.Client{}
	for _, host := range []string{"a.test", "b.test", "c.test", "x.w.test", "localhost"} {
		clients[host] = edgeClient(t, host, ca.Pool(), nil)
	}
	certs["localhost"] = certs["default"]
	for host, c := range clients {
		sees(c, host, certs[host])
	}
	sees(edgeClient(t, "", ca.Pool(), func(c *tls.Config) { c.InsecureSkipVerify = true }), "no server name", certs["default"])
	sees(edgeClient(t, "other.w.test", ca.Pool(), nil), "other.w.test", certs["x.w.test"])

	oldB := certs["b.test"]
	newB := ca.issue(t, dir, "b", "b.test") // the same files, a new certificate
	if err := g.ReloadFromSource(); err != nil {
		t.Fatal(err)
	}
	sees(edgeClient(t, "b.test", ca.Pool(), nil), "b.test after the reload, a new connection", newB)
	code, st, reused, err := edgeGet(clients["b.test"], g.Addr())
	if err != nil || code != 200 || !reused {
		t.Fatalf("the connection opened before the reload: %d, %v, reused %v; want it to carry on", code, err, reused)
	}
	if !st.PeerCertificates[0].Equal(oldB) {
		t.Fatal("the connection opened before the reload changed certificate")
	}
	for _, host := range []string{"a.test", "c.test", "x.w.test"} {
		sees(edgeClient(t, host, ca.Pool(), nil), host+" after the reload", certs[host])
	}
}

// TestClientCertificatesVerifyIfGivenDownstream: client_auth
// verify_if_given serves a client without a certificate and one with a
// certificate client_ca signed, and fails the handshake of one whose
// certificate another CA signed.
func TestClientCertificatesVerifyIfGivenDownstream(t *testing.T) {
	ca, dir := newTestCA(t), t.TempDir()
	ca.issue(t, dir, "gw")
	top := fmt.Sprintf("tls: {%s, client_ca: %q, client_auth: verify_if_given, forward_client_cert: true}\n", pairKeys(dir, "gw"), ca.caFile)
	g, _ := fileGateway(t, top+cfgText(1, "    pool: {prewarm: 0}\n"), startOrigins(t, 1, testorigin.Options{Classes: fastClass}))
	good, err := ca.Issue("alice", x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	other, err := testcert.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	bad, err := other.Issue("mallory", x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	with := func(c *testcert.Cert) func(*tls.Config) {
		return func(tc *tls.Config) {
			tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if c == nil {
					return &tls.Certificate{}, nil
				}
				pair := c.TLS()
				return &pair, nil
			}
		}
	}
	if code, st, _, err := edgeGet(edgeClient(t, "localhost", ca.Pool(), with(nil)), g.Addr()); err != nil || code != 200 || st == nil {
		t.Fatalf("no certificate: %d, %v; want 200", code, err)
	}
	if code, _, _, err := edgeGet(edgeClient(t, "localhost", ca.Pool(), with(good)), g.Addr()); err != nil || code != 200 {
		t.Fatalf("a certificate client_ca signed: %d, %v; want 200", code, err)
	}
	if code, _, _, err := edgeGet(edgeClient(t, "localhost", ca.Pool(), with(bad)), g.Addr()); err == nil {
		t.Fatalf("a certificate of another CA: %d; want the handshake to fail", code)
	}
}

// TestSessionResumptionAcrossTheFleet: four gateways share a session
// ticket key file. A client with one session cache and one server name
// that connects to each in turn makes one full handshake and resumes on
// the three others. A rotation staged as docs/gateway.md says (the new key
// added to decrypt on every gateway, then made the one that encrypts, then
// the old one dropped), with the gateways reloaded one by one, keeps every
// connection resumed; a gateway with another key file resumes none.
func TestSessionResumptionAcrossTheFleet(t *testing.T) {
	ca, dir := newTestCA(t), t.TempDir()
	ca.issue(t, dir, "gw")
	keys := filepath.Join(dir, "tickets")
	writeKeys := func(file string, seeds ...byte) {
		var b strings.Builder
		for _, s := range seeds {
			b.WriteString(base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(rune('a'+s)), 32))) + "\n")
		}
		writeFileAtomic(t, file, b.String())
	}
	writeKeys(keys, 1)
	origins := startOrigins(t, 1, testorigin.Options{Classes: fastClass})
	fleet := make([]*Gateway, 4)
	for i := range fleet {
		top := fmt.Sprintf("fleet: {instance: %d, size: 4}\ntls: {%s, session_ticket_keys: %q}\n", i, pairKeys(dir, "gw"), keys)
		fleet[i], _ = fileGateway(t, top+cfgText(1, "    pool: {prewarm: 0}\n"), origins)
	}
	tr := &http.Transport{DisableKeepAlives: true, ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{
		ServerName: "localhost", RootCAs: ca.Pool(), ClientSessionCache: tls.NewLRUClientSessionCache(8),
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	// round connects to each gateway in turn, a new connection each, and
	// returns which resumed.
	round := func(gs ...*Gateway) []bool {
		t.Helper()
		var out []bool
		for _, g := range gs {
			code, st, _, err := edgeGet(c, g.Addr())
			if err != nil || code != 200 {
				t.Fatalf("%s: %d, %v", g.Addr(), code, err)
			}
			out = append(out, st.DidResume)
		}
		return out
	}
	count := func(resumed []bool) (full, res int) {
		for _, r := range resumed {
			if r {
				res++
			} else {
				full++
			}
		}
		return full, res
	}
	if full, res := count(round(fleet...)); full != 1 || res != 3 {
		t.Fatalf("first round: %d full handshakes and %d resumed, want 1 and 3", full, res)
	}
	t.Logf("first round: 1 full handshake, 3 resumed")

	reloadAll := func(step string) {
		t.Helper()
		for i, g := range fleet {
			if err := g.ReloadFromSource(); err != nil {
				t.Fatalf("%s: gateway %d: %v", step, i, err)
			}
			if full, _ := count(round(fleet...)); full != 0 {
				t.Fatalf("%s, %d of 4 gateways reloaded: %d full handshakes in a round, want 0", step, i+1, full)
			}
		}
	}
	writeKeys(keys, 1, 2)
	reloadAll("the new key added to decrypt")
	writeKeys(keys, 2, 1)
	reloadAll("the new key made the one that encrypts")
	writeKeys(keys, 2)
	reloadAll("the old key dropped")

	outsider := filepath.Join(dir, "other-tickets")
	writeKeys(outsider, 9)
	g, _ := fileGateway(t, fmt.Sprintf("tls: {%s, session_ticket_keys: %q}\n", pairKeys(dir, "gw"), outsider)+cfgText(1, "    pool: {prewarm: 0}\n"), origins)
	if full, _ := count(round(g)); full != 1 {
		t.Fatal("a gateway with another key file resumed a session")
	}
}
