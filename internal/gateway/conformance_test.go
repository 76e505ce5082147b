package gateway

// Conformance: the gateway end to end over 127.0.0.1 with real origins —
// downstream and upstream protocols, loops per connection, trailers, gRPC,
// upgrades, streaming, cancellation, timeouts, retries and header hygiene
// (docs/gateway.md, docs/contract.md).

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/forward"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/testcert"
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
	c, err := testcert.SelfSigned("corput test gateway")
	if err != nil {
		t.Fatal(err)
	}
	if certFile, keyFile, err = c.WriteFiles(t.TempDir(), "gw"); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, c.Pool()
}

// gatewayTo starts a gateway with one origin "app" whose endpoints are
// addrs; origin holds the origin keys beyond name and endpoints (each line
// indented by four spaces), top the top-level keys beyond the base.
func gatewayTo(t testing.TB, loops int, top, origin string, addrs ...string) *Gateway {
	t.Helper()
	return startGateway(t, top+withEndpoints(cfgText(loops, origin), addrs...), nil, Options{})
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

// TestEveryProtocolSpreadsOneConnectionOverTheLoops serves HTTP/1.1, h2c
// with prior knowledge, and HTTPS with h2 or http/1.1 by ALPN, and shows
// that the requests of a single downstream connection (the streams of an
// h2 one) are placed on the loops in turn: they reach both loops' subsets,
// every endpoint of each.
func TestEveryProtocolSpreadsOneConnectionOverTheLoops(t *testing.T) {
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
			c := downstream(t, kind, roots)
			served := map[string]bool{}
			for i := 0; i < 16; i++ {
				resp, _ := get(t, c, scheme(kind)+g.Addr()+"/x")
				checkProto(t, kind, resp)
				served[idOf[resp.Header.Get(testorigin.IDHeader)]] = true
			}
			c.Transport.(*http.Transport).CloseIdleConnections()
			for l, s := range subsets {
				for a := range s {
					if !served[a] {
						t.Fatalf("one connection's 16 requests missed %s of loop %d's subset: reached %v", a, l, keys(served))
					}
				}
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
	for _, lv := range g.Origins().([]cluster.OriginView)[0].Loops {
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
			pv := g.Origins().([]cluster.OriginView)[0].Loops[0].Pools[b.addr]
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

// pairs are the (downstream, upstream) protocol combinations the
// body-level tests run over.
var pairs = []struct {
	down string
	up   testorigin.Proto
}{{dsH1, testorigin.H1}, {dsH2C, testorigin.H2C}, {dsH1, testorigin.H2C}, {dsH2C, testorigin.H1}}

func pairName(down string, up testorigin.Proto) string { return down + "-to-" + string(up) }

// eachPair runs f in a subtest per protocol pair, with a one-loop gateway
// in front of a backend serving h and a client of the pair's downstream kind.
func eachPair(t *testing.T, h http.Handler, f func(t *testing.T, g *Gateway, c *http.Client)) {
	for _, p := range pairs {
		t.Run(pairName(p.down, p.up), func(t *testing.T) {
			f(t, gatewayFor(t, p.up, startBackend(t, p.up, h), ""), downstream(t, p.down, nil))
		})
	}
}

// gatewayFor starts a one-loop gateway in front of b speaking up.
func gatewayFor(t testing.TB, up testorigin.Proto, b *backend, extra string) *Gateway {
	t.Helper()
	protocol := map[testorigin.Proto]string{testorigin.H1: "h1", testorigin.H2C: "h2c", testorigin.TLS: "h2"}[up]
	return gatewayTo(t, 1, "", upstreamKeys(protocol, b)+extra, b.addr)
}

// TestTrailersCarriedBothWays sends a request trailer and gets declared
// and undeclared response trailers back, over every protocol pair.
func TestTrailersCarriedBothWays(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Declared")
		n, err := io.Copy(io.Discard, r.Body) // trailers arrive after the body
		if err != nil {
			t.Errorf("origin: read body: %v", err)
		}
		w.Header().Set("X-Body-Bytes", fmt.Sprint(n))
		w.Header().Set("X-Req-Trailer", r.Trailer.Get("X-Checksum"))
		io.WriteString(w, "body")
		w.Header().Set("X-Declared", "declared-value")
		w.Header().Set(http.TrailerPrefix+"X-Undeclared", "undeclared-value")
	})
	eachPair(t, h, func(t *testing.T, g *Gateway, c *http.Client) {
		req, _ := http.NewRequest("POST", "http://"+g.Addr()+"/t", io.NopCloser(strings.NewReader("payload")))
		req.ContentLength = -1 // chunked on HTTP/1.1: trailers need it
		req.Trailer = http.Header{"X-Checksum": {"abc123"}}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "body" {
			t.Fatalf("body %q, %v", body, err)
		}
		if got := resp.Header.Get("X-Req-Trailer"); got != "abc123" {
			t.Errorf("origin saw request trailer %q, want abc123", got)
		}
		if got := resp.Header.Get("X-Body-Bytes"); got != "7" {
			t.Errorf("origin read %s body bytes, want 7", got)
		}
		if got := resp.Trailer.Get("X-Declared"); got != "declared-value" {
			t.Errorf("declared trailer %q (trailers %v)", got, resp.Trailer)
		}
		if got := resp.Trailer.Get("X-Undeclared"); got != "undeclared-value" {
			t.Errorf("undeclared trailer %q (trailers %v)", got, resp.Trailer)
		}
	})
}

// TestUpgradePassesThrough upgrades a connection through the gateway to an
// origin that answers 101 and echoes bytes, and checks an origin that
// declines the upgrade is answered normally.
func TestUpgradePassesThrough(t *testing.T) {
	b := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" || r.Header.Get("Connection") != "Upgrade" {
			http.Error(w, "want Connection: Upgrade, Upgrade: echo", http.StatusUpgradeRequired)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\nX-Origin: yes\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw) // echo until the client closes
	}))
	g := gatewayFor(t, testorigin.H1, b, "    pool: {prewarm: 0}\n")

	conn, err := net.Dial("tcp", g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "echo" || resp.Header.Get("X-Origin") != "yes" {
		t.Fatalf("upgrade answer: %d %v", resp.StatusCode, resp.Header)
	}
	for i := 0; i < 3; i++ {
		msg := fmt.Sprintf("frame %d\n", i)
		io.WriteString(conn, msg)
		line, err := br.ReadString('\n')
		if err != nil || line != msg {
			t.Fatalf("echo %d: %q, %v", i, line, err)
		}
	}
	conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for b.open.Load() != 0 { // the origin side closes once the client did
		select {
		case <-ctx.Done():
			t.Fatalf("upgraded origin connection still open after the client closed")
		case <-time.After(5 * time.Millisecond):
		}
	}

	// Declined: the origin's answer goes back as is, and the gateway still serves.
	resp = rawExchange(t, g.Addr(), "GET /ws HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: other\r\n\r\n")
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("declined upgrade: %d", resp.StatusCode)
	}
	if r, _ := get(t, downstream(t, dsH1, nil), "http://"+g.Addr()+"/ws"); r.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("plain request after upgrades: %d", r.StatusCode)
	}
}

// TestStreamingNotBuffered shows both bodies stream: the client reads the
// first response chunk while the origin still holds the rest, and the
// origin reads the first request chunk while the client still holds the
// rest. A buffering gateway would deadlock both (the deadline fails it).
func TestStreamingNotBuffered(t *testing.T) {
	release := make(chan struct{}, 1)
	firstIn := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/down":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "first\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "second\n")
		case "/up":
			br := bufio.NewReader(r.Body)
			line, err := br.ReadString('\n')
			if err != nil || line != "part1\n" {
				http.Error(w, "first part: "+line, 400)
				return
			}
			firstIn <- struct{}{}
			rest, _ := io.ReadAll(br)
			fmt.Fprintf(w, "got %q then %q", line, rest)
		}
	})
	wait := func(t *testing.T, ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never arrived: the gateway buffers", what)
		}
	}
	eachPair(t, h, func(t *testing.T, g *Gateway, c *http.Client) {
		resp, err := c.Get("http://" + g.Addr() + "/down")
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		lines := make(chan string, 2)
		go func() {
			for {
				l, err := br.ReadString('\n')
				if err != nil {
					close(lines)
					return
				}
				lines <- l
			}
		}()
		select {
		case l := <-lines:
			if l != "first\n" {
				t.Fatalf("first line %q", l)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("first chunk held back while the origin was still answering: the gateway buffers")
		}
		release <- struct{}{}
		if l := <-lines; l != "second\n" {
			t.Fatalf("second line %q", l)
		}
		if _, more := <-lines; more {
			t.Fatal("more than two lines")
		}
		resp.Body.Close()

		pr, pw := io.Pipe()
		done := make(chan *http.Response, 1)
		go func() {
			resp, err := c.Post("http://"+g.Addr()+"/up", "text/plain", pr)
			if err != nil {
				t.Error(err)
				pr.CloseWithError(err)
			}
			done <- resp
		}()
		io.WriteString(pw, "part1\n")
		wait(t, firstIn, "the first request chunk")
		io.WriteString(pw, "part2\n")
		pw.Close()
		resp = <-done
		if resp == nil {
			return
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := `got "part1\n" then "part2\n"`; string(got) != want {
			t.Fatalf("origin answered %q, want %q", got, want)
		}
	})
}

// TestLargeBodiesIntact echoes an 8 MiB random body through the gateway
// over every protocol pair.
func TestLargeBodiesIntact(t *testing.T) {
	payload := make([]byte, 8<<20)
	rand.Read(payload)
	want := checksum(payload)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := echoBody(w, r); err != nil {
			t.Errorf("origin echo: %v", err)
		}
	})
	eachPair(t, h, func(t *testing.T, g *Gateway, c *http.Client) {
		for _, length := range []int64{int64(len(payload)), -1} { // Content-Length and chunked
			req, _ := http.NewRequest("PUT", "http://"+g.Addr()+"/big", io.NopCloser(bytes.NewReader(payload)))
			req.ContentLength = length
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d, %v", resp.StatusCode, err)
			}
			if len(got) != len(payload) || checksum(got) != want {
				t.Fatalf("content-length %d: echoed %d bytes (sha256 %s), want %d (%s)", length, len(got), checksum(got), len(payload), want)
			}
		}
	})
}

// rawCodec carries gRPC messages as plain bytes, so the test's echo
// service needs no generated code.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *(v.(*[]byte)) = slices.Clone(data); return nil }
func (rawCodec) Name() string                       { return "corput-raw" }

func init() { encoding.RegisterCodec(rawCodec{}) }

// echoService is a bidirectional-streaming gRPC service: every message
// comes back, and the count is sent as a trailer at the end.
var echoService = grpc.ServiceDesc{
	ServiceName: "corput.test.Echo",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName: "Chat", ServerStreams: true, ClientStreams: true,
		Handler: func(_ any, s grpc.ServerStream) error {
			n := 0
			for {
				var m []byte
				err := s.RecvMsg(&m)
				if err == io.EOF {
					s.SetTrailer(metadata.Pairs("x-echo-count", fmt.Sprint(n)))
					return nil
				}
				if err != nil {
					return err
				}
				n++
				if err := s.SendMsg(&m); err != nil {
					return err
				}
			}
		},
	}},
}

// TestGRPCThroughGateway makes real gRPC calls through the gateway: a grpc-go
// server behind it over h2c and a grpc-go client in front of it over h2c.
// Unary calls carry their status in trailers (OK and NotFound); a
// bidirectional stream interleaves sends and receives (each echo arrives
// before the next message is sent) and ends with a trailer.
func TestGRPCThroughGateway(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("corput.test.Echo", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	srv.RegisterService(&echoService, nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-served })

	g := gatewayTo(t, 2, "", "    protocol: h2c\n", lis.Addr().String())
	cc, err := grpc.NewClient(g.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	hc := healthpb.NewHealthClient(cc)
	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "corput.test.Echo"})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("unary Check: %v, %v", resp, err)
	}
	_, err = hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"})
	if st, _ := status.FromError(err); st.Code() != codes.NotFound || !strings.Contains(st.Message(), "unknown service") {
		t.Fatalf("unary Check of an unknown service: %v, want NotFound from the origin's trailers", err)
	}

	stream, err := cc.NewStream(ctx, &echoService.Streams[0], "/corput.test.Echo/Chat", grpc.CallContentSubtype("corput-raw"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		out := []byte(fmt.Sprintf("message %d", i))
		if err := stream.SendMsg(&out); err != nil {
			t.Fatal(err)
		}
		var in []byte
		if err := stream.RecvMsg(&in); err != nil || !bytes.Equal(in, out) {
			t.Fatalf("echo %d: %q, %v", i, in, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var in []byte
	if err := stream.RecvMsg(&in); err != io.EOF {
		t.Fatalf("end of stream: %v, want io.EOF (status OK)", err)
	}
	if got := stream.Trailer().Get("x-echo-count"); len(got) != 1 || got[0] != "5" {
		t.Fatalf("stream trailer x-echo-count %v, want [5]", got)
	}
}

// TestClientCancellationReachesOrigin cancels a request while the origin
// holds it: the origin's request context ends, over every protocol pair.
func TestClientCancellationReachesOrigin(t *testing.T) {
	arrived := make(chan struct{}, 1)
	ended := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-time.After(10 * time.Second):
			ended <- fmt.Errorf("origin request still running 10s after the client cancelled")
		}
	})
	eachPair(t, h, func(t *testing.T, g *Gateway, c *http.Client) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+g.Addr()+"/hold", nil)
		errc := make(chan error, 1)
		go func() {
			resp, err := c.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		<-arrived
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("cancelled request succeeded")
		}
		if err := <-ended; err != context.Canceled {
			t.Fatalf("origin: %v, want its request context cancelled", err)
		}
	})
}

// TestRequestTimeoutAnswers504 holds the origin past timeouts.request: the
// client gets 504 upstream_timeout and the origin's request is cancelled,
// to an HTTP/1.1 origin and to an h2c one (the fast path's own stream: the
// stream is reset), and the gateway answers the next request.
func TestRequestTimeoutAnswers504(t *testing.T) {
	for _, up := range []testorigin.Proto{testorigin.H1, testorigin.H2C} {
		t.Run(string(up), func(t *testing.T) {
			ended := make(chan error, 1)
			b := startBackend(t, up, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/hold" {
					io.WriteString(w, "ok")
					return
				}
				select {
				case <-r.Context().Done():
					ended <- r.Context().Err()
				case <-time.After(10 * time.Second):
					ended <- fmt.Errorf("origin request not cancelled by the gateway's timeout")
				}
			}))
			g := gatewayFor(t, up, b, "    timeouts: {connect: 100ms, request: 300ms}\n")
			c := downstream(t, dsH1, nil)
			resp, body := get(t, c, "http://"+g.Addr()+"/hold")
			if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("X-Corput-Error") != forward.UpstreamTimeout.String() {
				t.Fatalf("status %d, X-Corput-Error %q; want 504 %s", resp.StatusCode, resp.Header.Get("X-Corput-Error"), forward.UpstreamTimeout.String())
			}
			if strings.Contains(body, "context") || strings.Contains(body, "127.0.0.1") {
				t.Fatalf("error body leaks internals: %q", body)
			}
			if err := <-ended; err != context.Canceled {
				t.Fatalf("origin: %v, want its request cancelled", err)
			}
			if resp, body := get(t, c, "http://"+g.Addr()+"/next"); resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("the next request: %d %q", resp.StatusCode, body)
			}
		})
	}
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestRetryAfterConnectFailureToAnotherEndpoint puts a dead endpoint in the
// subset next to a live one: every GET succeeds (a connect failure is
// retried on the other endpoint), and so does a POST with a body that meets
// the dead endpoint: its failed dial sent nothing.
func TestRetryAfterConnectFailureToAnotherEndpoint(t *testing.T) {
	var gets, posts atomic.Int64
	live := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Method == "POST" {
			posts.Add(1)
		} else {
			gets.Add(1)
		}
	}))
	dead := deadAddr(t)
	keys := "    balancer: {policy: round_robin}\n    pool: {prewarm: 0}\n    slow_start: {window: 0s}\n"
	g := gatewayTo(t, 1, "", keys, dead, live.addr)
	c := downstream(t, dsH1, nil)
	for i := 0; i < 6; i++ {
		if resp, body := get(t, c, "http://"+g.Addr()+"/get"); resp.StatusCode != 200 {
			t.Fatalf("GET %d: %d %q", i, resp.StatusCode, body)
		}
	}
	if gets.Load() != 6 {
		t.Fatalf("live endpoint got %d GETs, want 6", gets.Load())
	}
	if f := g.Origins().([]cluster.OriginView)[0].Loops[0].Pools[dead].Failures; f == 0 {
		t.Fatal("no GET ever met the dead endpoint: the retry was not exercised")
	}

	g = gatewayTo(t, 1, "", keys, dead, live.addr) // fresh balancer state
	refused := 0
	for i := 0; i < 2; i++ { // round robin over two: one POST meets the dead endpoint
		resp, err := c.Post("http://"+g.Addr()+"/post", "text/plain", strings.NewReader("not replayable"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusBadGateway && resp.Header.Get("X-Corput-Error") == forward.ConnectFailed.String():
			refused++
		case resp.StatusCode != 200:
			t.Fatalf("POST %d: %d %s", i, resp.StatusCode, resp.Header.Get("X-Corput-Error"))
		}
	}
	// A refused dial sent nothing: the POST goes to the live endpoint too.
	if refused != 0 || posts.Load() != 2 {
		t.Fatalf("%d POSTs answered 502 connect_failed, live endpoint got %d; want 0 and 2 (a POST that sent nothing goes again)", refused, posts.Load())
	}
}

// TestRetryBudgetBoundsRetries sends 20 concurrent GETs at an origin of two
// endpoints: one answers 503 at once (overloaded), the other holds every
// request. A GET that met the 503 may retry on the holding endpoint only
// while retries in flight stay within the budget: at budget_percent 0 that
// is the floor of 3; at 100 % every one of them retries.
func TestRetryBudgetBoundsRetries(t *testing.T) {
	for _, c := range []struct {
		budget    int
		unbounded bool
	}{{0, false}, {100, true}} {
		t.Run(fmt.Sprintf("budget_%d", c.budget), func(t *testing.T) {
			var mu sync.Mutex
			at503, atSlow := map[string]bool{}, map[string]bool{}
			arrived, release := make(chan struct{}, 64), make(chan struct{})
			overloaded := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				at503[r.Header.Get("X-Req")] = true
				mu.Unlock()
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
			}))
			holding := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				atSlow[r.Header.Get("X-Req")] = true
				mu.Unlock()
				arrived <- struct{}{}
				select {
				case <-release:
				case <-r.Context().Done(): // the test failed and the gateway closed
				}
			}))
			keys := fmt.Sprintf("    balancer: {policy: round_robin}\n    pool: {prewarm: 0}\n    slow_start: {window: 0s}\n"+
				"    outlier: {consecutive_5xx: 1000}\n    retry: {attempts: 1, budget_percent: %d}\n", c.budget)
			g := gatewayTo(t, 1, "", keys, overloaded.addr, holding.addr)
			const n = 20
			codes := make(chan int, n)
			cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}, Timeout: 10 * time.Second}
			defer cl.Transport.(*http.Transport).CloseIdleConnections()
			for i := 0; i < n; i++ {
				go func() {
					req, _ := http.NewRequest("GET", "http://"+g.Addr()+"/", nil)
					req.Header.Set("X-Req", fmt.Sprint(i))
					resp, err := cl.Do(req)
					if err != nil {
						t.Error(err)
						codes <- 0
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					codes <- resp.StatusCode
				}()
			}
			// Every request ends up held by the slow endpoint or answered.
			held, answered503 := 0, 0
			for held+answered503 < n {
				select {
				case <-arrived:
					held++
				case code := <-codes:
					if code != http.StatusServiceUnavailable {
						t.Fatalf("a GET was answered %d while the slow endpoint held", code)
					}
					answered503++
				case <-time.After(10 * time.Second):
					t.Fatalf("stuck: %d held, %d answered", held, answered503)
				}
			}
			mu.Lock()
			retried := 0
			for id := range at503 {
				if atSlow[id] {
					retried++
				}
			}
			met503 := len(at503)
			mu.Unlock()
			close(release)
			for i := 0; i < held; i++ {
				if code := <-codes; code != 200 {
					t.Fatalf("held request answered %d", code)
				}
			}
			if met503 < 4 {
				t.Fatalf("only %d GETs met the 503 endpoint: the budget is not exercised", met503)
			}
			if retried+answered503 != met503 {
				t.Fatalf("%d met the 503, %d retried, %d answered 503", met503, retried, answered503)
			}
			if c.unbounded && retried != met503 {
				t.Fatalf("budget 100%%: %d of %d retried", retried, met503)
			}
			if !c.unbounded && retried != 3 {
				t.Fatalf("budget 0%%: %d retries in flight, want the floor of 3 (%d met the 503)", retried, met503)
			}
		})
	}
}

// TestHopByHopAndForwardedHeaders checks header hygiene both ways: hop-by-
// hop headers (and those named in Connection) never cross, "TE: trailers"
// does, the Host is preserved, and X-Forwarded-For/-Proto/-Host are set from
// the connection, replacing what an untrusted client sent.
func TestHopByHopAndForwardedHeaders(t *testing.T) {
	seen := make(chan *http.Request, 2)
	b := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
		h := w.Header()
		h.Set("Connection", "X-Resp-Secret")
		h.Set("X-Resp-Secret", "s")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Proxy-Authenticate", "Basic")
		h.Set("X-End-To-End", "kept")
	}))
	g := gatewayFor(t, testorigin.H1, b, "")
	resp := rawExchange(t, g.Addr(), "GET /h HTTP/1.1\r\nHost: shop.example\r\n"+
		"Connection: keep-alive, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\n"+
		"Proxy-Authorization: Basic Zm9vOmJhcg==\r\nTE: trailers\r\nUpgrade: bogus\r\n"+
		"X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example\r\nX-End-To-End: yes\r\n\r\n")
	r := <-seen
	for _, k := range []string{"Connection", "X-Secret", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Upgrade"} {
		if v, ok := r.Header[k]; ok {
			t.Errorf("origin received hop-by-hop %s: %q", k, v)
		}
	}
	want := map[string]string{"Te": "trailers", "X-End-To-End": "yes", "X-Forwarded-For": "127.0.0.1",
		"X-Forwarded-Proto": "http", "X-Forwarded-Host": "shop.example"}
	for k, v := range want {
		if got := r.Header.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("origin received %s %q, want %q", k, got, v)
		}
	}
	if r.Host != "shop.example" {
		t.Errorf("origin received Host %q, want shop.example", r.Host)
	}
	for _, k := range []string{"Connection", "X-Resp-Secret", "Keep-Alive", "Proxy-Authenticate"} {
		if v, ok := resp.Header[k]; ok {
			t.Errorf("client received hop-by-hop %s: %q", k, v)
		}
	}
	if resp.Header.Get("X-End-To-End") != "kept" {
		t.Errorf("client lost X-End-To-End: %v", resp.Header)
	}

	// Over HTTPS the origin learns the client's scheme.
	certFile, keyFile, roots := selfSignedFiles(t)
	tg := gatewayTo(t, 1, fmt.Sprintf("tls: {cert: %q, key: %q}\n", certFile, keyFile), "    protocol: h1\n", b.addr)
	get(t, downstream(t, dsTLSH2, roots), "https://"+tg.Addr()+"/h")
	if r := <-seen; r.Header.Get("X-Forwarded-Proto") != "https" || r.Header.Get("X-Forwarded-Host") != tg.Addr() {
		t.Errorf("over TLS: X-Forwarded-Proto %q, -Host %q", r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"))
	}
}

// TestOrigin503PassesThroughWhenNoRetryFollows: an origin's own 503 is
// swallowed only to retry on another endpoint. When no retry can follow —
// a POST with a body, or retries off — the client gets the origin's answer
// as it was: its status, headers and body, not a gateway-made 503.
func TestOrigin503PassesThroughWhenNoRetryFollows(t *testing.T) {
	b := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Retry-After", "7")
		http.Error(w, "origin busy", http.StatusServiceUnavailable)
	}))
	for _, c := range []struct{ name, keys, method string }{
		{"post-with-body", "", "POST"},
		{"retries-off", "    retry: {attempts: 0}\n", "GET"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := gatewayFor(t, testorigin.H1, b, c.keys)
			var body io.Reader
			if c.method == "POST" {
				body = strings.NewReader("payload")
			}
			req, _ := http.NewRequest(c.method, "http://"+g.Addr()+"/", body)
			resp, err := downstream(t, dsH1, nil).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 503 || string(got) != "origin busy\n" || resp.Header.Get("Retry-After") != "7" || resp.Header.Get("X-Corput-Error") != "" {
				t.Fatalf("got %d %q Retry-After %q X-Corput-Error %q; want the origin's own 503",
					resp.StatusCode, got, resp.Header.Get("Retry-After"), resp.Header.Get("X-Corput-Error"))
			}
		})
	}
}

// TestSilentOriginBoundedByConnectTimeout points the gateway at an origin
// that accepts TCP connections and then says nothing, so neither the TLS
// handshake nor the first HTTP/2 SETTINGS ever completes: the client gets
// 502 connect_failed once timeouts.connect passes, never a hang.
func TestSilentOriginBoundedByConnectTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepted
		for _, c := range held {
			c.Close()
		}
	})
	for _, keys := range []string{"    protocol: h2c\n", "    protocol: h1\n    tls: {insecure_skip_verify: true}\n"} {
		g := gatewayTo(t, 1, "", keys+"    pool: {prewarm: 0, acquire_timeout: 1s}\n    timeouts: {connect: 200ms, request: 5s}\n", ln.Addr().String())
		resp, body := get(t, downstream(t, dsH1, nil), "http://"+g.Addr()+"/")
		if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Corput-Error") != forward.ConnectFailed.String() {
			t.Fatalf("%s silent origin: %d %q %q, want 502 %s", keys, resp.StatusCode, resp.Header.Get("X-Corput-Error"), body, forward.ConnectFailed.String())
		}
	}
}

// TestResponseHeadIsBounded: an origin's response head above
// pool.max_response_header_bytes (64 KiB) gets the client a 502
// upstream_header_too_large, over every protocol pair (the fast path and
// net/http's, HTTP/1.1 and HTTP/2 origins); a 10 KiB one (larger than the
// fast path's parse buffer) is relayed, and the gateway serves on.
func TestResponseHeadIsBounded(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		size := map[string]int{"/big": 100 << 10, "/mid": 10 << 10}[r.URL.Path]
		if size > 0 {
			w.Header().Set("X-Pad", strings.Repeat("p", size))
		}
		io.WriteString(w, "ok")
	})
	eachPair(t, h, func(t *testing.T, g *Gateway, c *http.Client) {
		for _, c2 := range []struct {
			path   string
			status int
			reason string
		}{
			{"/big", 502, forward.UpstreamHeadTooLarge.String()},
			{"/mid", 200, ""},
			{"/small", 200, ""},
			{"/big", 502, forward.UpstreamHeadTooLarge.String()},
			{"/small", 200, ""},
		} {
			resp, err := c.Get("http://" + g.Addr() + c2.path)
			if err != nil {
				t.Fatalf("%s: %v", c2.path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c2.status || resp.Header.Get("X-Corput-Error") != c2.reason {
				t.Fatalf("%s: %d %q (%d body bytes), want %d %q", c2.path, resp.StatusCode,
					resp.Header.Get("X-Corput-Error"), len(body), c2.status, c2.reason)
			}
			if c2.path == "/mid" && len(resp.Header.Get("X-Pad")) != 10<<10 {
				t.Fatalf("/mid: the 10 KiB field arrived as %d bytes", len(resp.Header.Get("X-Pad")))
			}
		}
	})
}
