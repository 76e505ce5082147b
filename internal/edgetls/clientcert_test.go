package edgetls

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// xfcc parses one element of the x-forwarded-client-cert format into its
// pairs, in order, unquoting quoted values.
func xfcc(t *testing.T, v string) [][2]string {
	t.Helper()
	var pairs [][2]string
	for v != "" {
		k, rest, ok := strings.Cut(v, "=")
		if !ok {
			t.Fatalf("no = in %q", v)
		}
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				t.Fatalf("value of %s: %v in %q", k, err, rest)
			}
			if val, err = strconv.Unquote(q); err != nil {
				t.Fatal(err)
			}
			rest = rest[len(q):]
		} else {
			end := strings.IndexByte(rest, ';')
			if end < 0 {
				end = len(rest)
			}
			val, rest = rest[:end], rest[end:]
		}
		pairs = append(pairs, [2]string{k, val})
		if rest != "" && rest[0] != ';' {
			t.Fatalf("after %s: %q does not start a pair", k, rest)
		}
		v = strings.TrimPrefix(rest, ";")
	}
	return pairs
}

// TestClientCertificateVerifyIfGiven: with client_auth verify_if_given a
// client without a certificate is served and nothing is forwarded; one
// with a certificate the CA signed is served and its certificate is
// formatted for the origin; one with a certificate of another CA fails the
// handshake. request asks but never forwards; require refuses a client
// without one.
func TestClientCertificateVerifyIfGiven(t *testing.T) {
	p := newPKI(t, "clients")
	_, certFile, keyFile := p.server(t, "gw", "gw.test")
	good := p.client(t, "alice")
	bad := newPKI(t, "elsewhere").client(t, "mallory")
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := ClientCertValue(r.TLS)
		fmt.Fprintf(w, "%v|%s", ok, v)
	})
	server := func(mode ClientAuth) string {
		var cur current
		cur.Store(mustNew(t, &Settings{Cert: certFile, Key: keyFile, ClientCA: p.caFile, ClientAuth: mode, ForwardClientCert: true}, nil))
		return serve(t, &cur, echo)
	}
	// The client sends the certificate it is given whatever CAs the server
	// names (crypto/tls's own choice would send none of another CA's).
	client := func(certs ...tls.Certificate) *tls.Config {
		return &tls.Config{ServerName: "gw.test", RootCAs: p.ca.Pool(), GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if len(certs) == 0 {
				return &tls.Certificate{}, nil
			}
			return &certs[0], nil
		}}
	}

	addr := server(ClientAuthVerifyIfGiven)
	if _, body, err := get(addr, client()); err != nil || body != "false|" {
		t.Fatalf("no certificate: %q, %v; want served, nothing forwarded", body, err)
	}
	_, body, err := get(addr, client(good))
	if err != nil {
		t.Fatalf("a good certificate: %v", err)
	}
	value, ok := strings.CutPrefix(body, "true|")
	if !ok {
		t.Fatalf("a good certificate: %q; want it forwarded", body)
	}
	sum := sha256.Sum256(good.Leaf.Raw)
	pairs := xfcc(t, value)
	keys := make([]string, len(pairs))
	for i, kv := range pairs {
		keys[i] = kv[0]
	}
	if got := strings.Join(keys, ","); got != "Hash,Cert,Subject,DNS" {
		t.Fatalf("pairs %s in %q", got, value)
	}
	if pairs[0][1] != hex.EncodeToString(sum[:]) {
		t.Errorf("Hash=%s, want the SHA-256 of the certificate", pairs[0][1])
	}
	pemText, err := url.QueryUnescape(pairs[1][1])
	if err != nil {
		t.Fatal(err)
	}
	if block, _ := pem.Decode([]byte(pemText)); block == nil || !good.Leaf.Equal(mustParse(t, block.Bytes)) {
		t.Errorf("Cert= does not decode to the client's certificate: %q", pairs[1][1])
	}
	if pairs[2][1] != "CN=alice" || pairs[3][1] != "localhost" {
		t.Errorf("Subject=%q DNS=%q", pairs[2][1], pairs[3][1])
	}
	if _, _, err := get(addr, client(bad)); err == nil {
		t.Fatal("a certificate of another CA was accepted")
	}

	addr = server(ClientAuthRequest)
	if _, body, err := get(addr, client(bad)); err != nil || body != "false|" {
		t.Fatalf("request, any certificate: %q, %v; want served, nothing forwarded", body, err)
	}
	addr = server(ClientAuthRequire)
	if _, _, err := get(addr, client()); err == nil {
		t.Fatal("require: a client without a certificate was served")
	}
	if _, body, err := get(addr, client(good)); err != nil || !strings.HasPrefix(body, "true|Hash=") {
		t.Fatalf("require, a good certificate: %q, %v", body, err)
	}
}

func mustParse(t *testing.T, der []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClientCertValueCannotBeSteered: names with quotes, separators,
// control and non-ASCII characters are quoted as visible ASCII, so a
// certificate cannot end the header, forge a pair or add an element.
func TestClientCertValueCannotBeSteered(t *testing.T) {
	u, _ := url.Parse("spiffe://corp.test/ns/a;b=c")
	leaf := &x509.Certificate{
		Raw:      []byte("not a real certificate"),
		Subject:  pkix.Name{CommonName: "evil\";Hash=00\r\nX-Injected: 1,é"},
		URIs:     []*url.URL{u},
		DNSNames: []string{"a.test", "b.test"},
	}
	cs := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}
	v, ok := ClientCertValue(cs)
	if !ok {
		t.Fatal("not forwarded")
	}
	if i := strings.IndexFunc(v, func(r rune) bool { return r < ' ' || r > '~' }); i >= 0 {
		t.Fatalf("a character that is not visible ASCII at %d: %q", i, v)
	}
	pairs := xfcc(t, v)
	var got []string
	for _, kv := range pairs {
		got = append(got, kv[0])
	}
	if strings.Join(got, ",") != "Hash,Cert,Subject,URI,DNS,DNS" {
		t.Fatalf("pairs %q in %q", got, v)
	}
	if pairs[2][1] != leaf.Subject.String() || pairs[3][1] != u.String() || pairs[5][1] != "b.test" {
		t.Fatalf("values do not read back: %q", pairs)
	}

	for _, cs := range []*tls.ConnectionState{nil, {}, {PeerCertificates: []*x509.Certificate{leaf}}} {
		if v, ok := ClientCertValue(cs); ok || v != "" {
			t.Errorf("an unverified state forwarded %q", v)
		}
	}
}
