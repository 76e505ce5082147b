package gateway

// Conformance: the gateway end to end over 127.0.0.1 with real origins —
// downstream and upstream protocols, loops per connection, trailers, gRPC,
// upgrades, streaming, cancellation, timeouts, retries and header hygiene
// (issue 5, DESIGN.md §1 and §7).

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/workload"
)

// backend is an origin running a handler of the test's own, for what
// internal/origin does not play: trailers, streaming, upgrades, echoes.
type backend struct {
	*httptest.Server
	addr   string
	caFile string       // the certificate as a PEM file (TLS only)
	open   atomic.Int64 // connections open now
}

// startBackend serves h on loopback over proto: H1, H2C (HTTP/1.1 and
// prior-knowledge HTTP/2) or TLS (h2 and http/1.1 by ALPN).
func startBackend(t testing.TB, proto testorigin.Proto, h http.Handler) *backend {
	t.Helper()
	b := &backend{Server: httptest.NewUnstartedServer(h)}
	b.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			b.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			b.open.Add(-1)
		}
	}
	switch proto {
	case testorigin.H1:
		b.Start()
	case testorigin.H2C:
		b.Config.Protocols = new(http.Protocols)
		b.Config.Protocols.SetHTTP1(true)
		b.Config.Protocols.SetUnencryptedHTTP2(true)
		b.Start()
	case testorigin.TLS:
		b.EnableHTTP2 = true
		b.StartTLS()
		b.caFile = writePEM(t, "backend-ca.pem", "CERTIFICATE", b.Certificate().Raw)
	default:
		t.Fatalf("backend proto %q", proto)
	}
	b.addr = b.Listener.Addr().String()
	t.Cleanup(b.Close)
	return b
}

func writePEM(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// selfSignedFiles writes a certificate for 127.0.0.1 and its key, and
// returns the files and a pool that trusts the certificate.
func selfSignedFiles(t testing.TB) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "corput test gateway"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return writePEM(t, "gw.pem", "CERTIFICATE", der), writePEM(t, "gw.key", "EC PRIVATE KEY", kder), roots
}

// gatewayTo starts a gateway with one origin "app" whose endpoints are
// addrs; origin holds the origin keys beyond name and endpoints (each line
// indented by four spaces), top the top-level keys beyond the base.
func gatewayTo(t testing.TB, loops int, top, origin string, addrs ...string) *Gateway {
	t.Helper()
	eps := make([]string, len(addrs))
	for i, a := range addrs {
		eps[i] = fmt.Sprintf("{address: %q}", a)
	}
	text := top + strings.ReplaceAll(cfgText(loops, origin), "ENDPOINTS", "["+strings.Join(eps, ", ")+"]")
	return startGateway(t, text, nil, Options{})
}

// upstreamKeys is the origin's protocol and TLS keys for a backend.
func upstreamKeys(protocol string, b *backend) string {
	s := "    protocol: " + protocol + "\n"
	if b.caFile != "" {
		s += fmt.Sprintf("    tls: {ca: %q}\n", b.caFile)
	}
	return s
}

// Downstream client kinds.
const (
	dsH1    = "h1"     // HTTP/1.1 over TCP
	dsH2C   = "h2c"    // HTTP/2 over TCP with prior knowledge
	dsTLSH2 = "tls-h2" // HTTPS, h2 by ALPN
	dsTLSH1 = "tls-h1" // HTTPS, http/1.1 by ALPN
)

// downstream is an HTTP client of one kind that keeps at most one
// connection to the gateway, so all its requests share one loop.
func downstream(t testing.TB, kind string, roots *x509.CertPool) *http.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, Protocols: new(http.Protocols)}
	switch kind {
	case dsH1:
		tr.Protocols.SetHTTP1(true)
	case dsH2C:
		tr.Protocols.SetUnencryptedHTTP2(true)
	case dsTLSH2:
		tr.Protocols.SetHTTP2(true)
		tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	case dsTLSH1:
		tr.Protocols.SetHTTP1(true)
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, NextProtos: []string{"http/1.1"}}
	default:
		t.Fatalf("downstream kind %q", kind)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func scheme(kind string) string {
	if strings.HasPrefix(kind, "tls") {
		return "https://"
	}
	return "http://"
}

// TestDownstreamProtocolsPinEachConnectionToItsLoop serves HTTP/1.1, h2c
// with prior knowledge, and HTTPS with h2 or http/1.1 by ALPN, and shows
// that every request of one downstream connection uses that connection's
// loop (its subset), while successive connections go round the loops.
func TestDownstreamProtocolsPinEachConnectionToItsLoop(t *testing.T) {
	origins := startOrigins(t, 8, testorigin.Options{Classes: fastClass})
	certFile, keyFile, roots := selfSignedFiles(t)
	plain := startGateway(t, cfgText(2, roundRobinSubsetOf4), origins, Options{})
	tlsGW := startGateway(t, fmt.Sprintf("tls: {cert: %q, key: %q}\n", certFile, keyFile)+cfgText(2, roundRobinSubsetOf4), origins, Options{})
	idOf := map[string]string{}
	for _, o := range origins {
		idOf[o.Options().ID] = o.Addr()
	}
	for _, kind := range []string{dsH1, dsH2C, dsTLSH2, dsTLSH1} {
		t.Run(kind, func(t *testing.T) {
			g := plain
			if strings.HasPrefix(kind, "tls") {
				g = tlsGW
			}
			subsets := loopSubsets(t, g)
			prevLoop := -1
			for conn := 0; conn < 3; conn++ {
				c := downstream(t, kind, roots)
				served := map[string]bool{}
				for i := 0; i < 8; i++ {
					resp, _ := get(t, c, scheme(kind)+g.Addr()+"/x")
					checkProto(t, kind, resp)
					served[idOf[resp.Header.Get(testorigin.IDHeader)]] = true
				}
				c.Transport.(*http.Transport).CloseIdleConnections()
				loop := -1
				for l, s := range subsets {
					if mapKeysEqual(served, s) {
						loop = l
					}
				}
				if loop < 0 {
					t.Fatalf("connection %d reached %v: not exactly one loop's subset %v", conn, keys(served), subsets)
				}
				if loop == prevLoop {
					t.Fatalf("connections %d and %d both on loop %d: want round-robin", conn-1, conn, loop)
				}
				prevLoop = loop
			}
		})
	}
}

var fastClass = []workload.Class{{Name: "x", Percent: 100, Latency: time.Millisecond}}

const roundRobinSubsetOf4 = "    subset: {size: 4}\n    balancer: {policy: round_robin}\n    pool: {prewarm: 0}\n"

// loopSubsets returns each loop's subset from /admin/origins' source, and
// fails unless they are disjoint (so a served set names its loop).
func loopSubsets(t testing.TB, g *Gateway) []map[string]bool {
	t.Helper()
	var out []map[string]bool
	seen := map[string]bool{}
	for _, lv := range g.Origins().([]OriginView)[0].Loops {
		s := map[string]bool{}
		for _, a := range lv.Subset {
			if seen[a] {
				t.Fatalf("loop subsets overlap at %s", a)
			}
			seen[a], s[a] = true, true
		}
		out = append(out, s)
	}
	return out
}

func checkProto(t testing.TB, kind string, resp *http.Response) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d", kind, resp.StatusCode)
	}
	want := map[string]int{dsH1: 1, dsH2C: 2, dsTLSH2: 2, dsTLSH1: 1}[kind]
	if resp.ProtoMajor != want {
		t.Fatalf("%s: served over %s", kind, resp.Proto)
	}
	if strings.HasPrefix(kind, "tls") {
		alpn := map[int]string{1: "http/1.1", 2: "h2"}[want]
		if resp.TLS == nil || resp.TLS.NegotiatedProtocol != alpn {
			t.Fatalf("%s: TLS state %+v, want ALPN %s", kind, resp.TLS, alpn)
		}
	}
}

func mapKeysEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestH2CUpgradeRequestIsServedAsHTTP1 sends the RFC 7540 "Upgrade: h2c"
// dance. The gateway's server does not switch (RFC 9113 deprecates it): it
// answers over HTTP/1.1, and the h2c upgrade is never forwarded upstream.
func TestH2CUpgradeRequestIsServedAsHTTP1(t *testing.T) {
	seen := make(chan http.Header, 1)
	b := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		io.WriteString(w, "hello")
	}))
	g := gatewayTo(t, 1, "", "    pool: {prewarm: 0}\n", b.addr)
	resp := rawExchange(t, g.Addr(), "GET /u HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings\r\n"+
		"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 1 || string(body) != "hello" {
		t.Fatalf("h2c upgrade request: %s %d %q", resp.Proto, resp.StatusCode, body)
	}
	h := <-seen
	for _, k := range []string{"Upgrade", "Connection", "Http2-Settings"} {
		if v, ok := h[k]; ok {
			t.Errorf("origin received hop-by-hop %s: %q", k, v)
		}
	}
}

// rawExchange writes raw to a new connection to addr and reads one
// response (body included, so the connection may close).
func rawExchange(t testing.TB, addr, raw string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp
}

// TestUpstreamProtocols forwards to origins speaking HTTP/1.1, h2c, h2
// over TLS, and TLS with "auto" (ALPN picks h2), and checks the origin saw
// the protocol, the pool reports it, and a request body arrives intact.
func TestUpstreamProtocols(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Proto", r.Proto)
		echoBody(w, r)
	})
	for _, c := range []struct {
		name, protocol string
		proto          testorigin.Proto
		wantProto      string
	}{
		{"h1", "h1", testorigin.H1, "HTTP/1.1"},
		{"h2c", "h2c", testorigin.H2C, "HTTP/2.0"},
		{"h2-tls", "h2", testorigin.TLS, "HTTP/2.0"},
		{"auto-tls", "auto", testorigin.TLS, "HTTP/2.0"},
		{"h1-tls", "h1", testorigin.TLS, "HTTP/1.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := startBackend(t, c.proto, echo)
			g := gatewayTo(t, 1, "", upstreamKeys(c.protocol, b), b.addr)
			cl := downstream(t, dsH1, nil)
			for i := 0; i < 3; i++ {
				body := strings.Repeat(fmt.Sprint(i), 1000+i)
				resp, err := cl.Post("http://"+g.Addr()+"/echo", "text/plain", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(got) != body {
					t.Fatalf("status %d, echoed %d bytes, want %d", resp.StatusCode, len(got), len(body))
				}
				if p := resp.Header.Get("X-Seen-Proto"); p != c.wantProto {
					t.Fatalf("origin saw %s, want %s", p, c.wantProto)
				}
			}
			pv := g.Origins().([]OriginView)[0].Loops[0].Pools[b.addr]
			wantPool := map[string]string{"HTTP/1.1": "h1", "HTTP/2.0": "h2"}[c.wantProto]
			if pv.Protocol != wantPool || pv.Open != 1 {
				t.Fatalf("pool %+v: want one %s connection", pv, wantPool)
			}
		})
	}
}

// echoBody copies r's body to w as it arrives. An HTTP/1.1 handler needs
// full duplex for that: net/http otherwise discards the unread body once
// the response headers go out.
func echoBody(w http.ResponseWriter, r *http.Request) (int64, error) {
	if r.ProtoMajor == 1 {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			return 0, err
		}
	}
	return io.Copy(w, r.Body)
}

// checksum is the hex SHA-256 of b.
func checksum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
