package gateway

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/forward"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/testcert"
	"github.com/corput/corput/internal/testlog"
)

// hostileHead is the part of every hostile request before its test bytes.
const hostileHead = "POST /hostile HTTP/1.1\r\nHost: gw.test\r\n"

// hostileCase is one malformed request and what the gateway must answer.
type hostileCase struct {
	name string
	raw  string
	// want is the status; 501 is allowed only where RFC 9112 §6.1 asks for
	// it (a transfer coding the server does not implement).
	want int
}

// smugglingCases are request-smuggling and framing attacks: each must be
// refused, never forwarded, and end its connection.
var smugglingCases = []hostileCase{
	{"CL then TE", hostileHead + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400},
	{"TE then CL", hostileHead + "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400},
	{"CL+TE zero body", hostileHead + "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
	{"duplicate equal CL", hostileHead + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400},
	{"conflicting CL", hostileHead + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400},
	{"CL list", hostileHead + "Content-Length: 5, 5\r\n\r\nhello", 400},
	{"CL plus sign", hostileHead + "Content-Length: +5\r\n\r\nhello", 400},
	{"CL negative", hostileHead + "Content-Length: -1\r\n\r\n", 400},
	{"CL hex", hostileHead + "Content-Length: 0x5\r\n\r\nhello", 400},
	{"CL empty", hostileHead + "Content-Length: \r\n\r\n", 400},
	{"CL overflow", hostileHead + "Content-Length: 99999999999999999999\r\n\r\n", 400},
	{"TE chunked, identity", hostileHead + "Transfer-Encoding: chunked, identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 501},
	{"TE identity, chunked", hostileHead + "Transfer-Encoding: identity, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 501},
	{"TE xchunked", hostileHead + "Transfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 501},
	{"TE chunked twice", hostileHead + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 501},
	{"TE space before colon", hostileHead + "Transfer-Encoding : chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400},
	{"TE vertical tab", hostileHead + "Transfer-Encoding:\x0bchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400},
	{"TE folded name line", hostileHead + "X-A: 1\r\n Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400},
	{"TE on HTTP/1.0", "POST /hostile HTTP/1.0\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400},
	{"TE+CL on HTTP/1.0", "POST /hostile HTTP/1.0\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello", 400},
	{"chunk size not hex", hostileHead + "Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400},
	{"chunk size negative", hostileHead + "Transfer-Encoding: chunked\r\n\r\n-1\r\nhello\r\n0\r\n\r\n", 400},
	{"chunk size 0x prefix", hostileHead + "Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", 400},
	{"chunk size overflow", hostileHead + "Transfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\nhello\r\n0\r\n\r\n", 400},
	{"chunk size junk", hostileHead + "Transfer-Encoding: chunked\r\n\r\n5 x\r\nhello\r\n0\r\n\r\n", 400},
	{"chunk line bare LF", hostileHead + "Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", 400},
	{"bare LF head", "POST /lf HTTP/1.1\nHost: gw.test\nContent-Length: 2\n\nok", 400},
	{"chunk data overrun", hostileHead + "Transfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n", 400},
	{"obs-fold", hostileHead + "X-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n", 400},
	{"obs-fold tab", hostileHead + "X-A: 1\r\n\t2\r\nContent-Length: 0\r\n\r\n", 400},
	{"fold before first header", "GET / HTTP/1.1\r\n Host: gw.test\r\n\r\n", 400},
	{"header without colon", "GET / HTTP/1.1\r\nHost: gw.test\r\nNo colon here\r\n\r\n", 400},
	{"NUL in header", "GET / HTTP/1.1\r\nHost: gw.test\r\nX-A: a\x00b\r\n\r\n", 400},
	{"two Host headers", "GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", 400},
	{"no Host", "GET / HTTP/1.1\r\n\r\n", 400},
	{"bad Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
}

// requestLineCases are invalid methods and targets.
var requestLineCases = []hostileCase{
	{"method with @", "G@T / HTTP/1.1\r\nHost: gw.test\r\n\r\n", 400},
	{"method with NUL", "GE\x00T / HTTP/1.1\r\nHost: gw.test\r\n\r\n", 400},
	{"empty method", " / HTTP/1.1\r\nHost: gw.test\r\n\r\n", 400},
	{"CONNECT", "CONNECT gw.test:443 HTTP/1.1\r\nHost: gw.test:443\r\n\r\n", 400},
	{"empty target", "GET  HTTP/1.1\r\nHost: gw.test\r\n\r\n", 400},
	{"space in target", "GET /a b HTTP/1.1\r\nHost: gw.test\r\n\r\n", 400},
	{"asterisk target for GET", "GET * HTTP/1.1\r\nHost: gw.test\r\n\r\n", 400},
	{"relative target", "GET a/b HTTP/1.1\r\nHost: gw.test\r\n\r\n", 400},
	{"broken absolute target", "GET http://[::1 HTTP/1.1\r\nHost: gw.test\r\n\r\n", 400},
	{"control char in target", "GET /a\x7fb HTTP/1.1\r\nHost: gw.test\r\n\r\n", 400},
	{"HTTP/0.9", "GET /\r\n\r\n", 400},
	{"HTTP/2.0 request line", "GET / HTTP/2.0\r\nHost: gw.test\r\n\r\n", 505},
	{"HTTP/1.2", "GET / HTTP/1.2\r\nHost: gw.test\r\n\r\n", 400},
	{"bogus version", "GET / HTTX/1.1\r\nHost: gw.test\r\n\r\n", 400},
	{"empty request line", "\r\n\r\n", 400},
}

// hostileGateway starts one origin and a gateway with tight downstream
// limits; the origin's request count must stay 0 through a hostile test.
func hostileGateway(t *testing.T) (*Gateway, *testorigin.Server) {
	t.Helper()
	os := startOrigins(t, 1, testorigin.Options{})
	text := "downstream: {read_header_timeout: 300ms, max_header_bytes: 4096}\n" + cfgText(1, "")
	return startGateway(t, text, os, Options{}), os[0]
}

// oneExchange writes raw on a fresh connection and reads one response. It
// reports whether the gateway closed the connection after it.
func oneExchange(t *testing.T, addr, raw string) (*http.Response, string, bool) {
	t.Helper()
	conn := sendRaw(t, addr, raw)
	defer conn.Close()
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// A closed connection reads EOF at once; an open one would hold until
	// the deadline (the gateway's idle timeout is far longer).
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = br.ReadByte()
	closed := err != nil && !isTimeout(err)
	return resp, string(body), closed
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestHostileRequestsAreRefusedAndNeverForwarded(t *testing.T) {
	g, origin := hostileGateway(t)
	for _, set := range [][]hostileCase{smugglingCases, requestLineCases} {
		for _, c := range set {
			resp, body, closed := oneExchange(t, g.Addr(), c.raw)
			if resp.StatusCode != c.want {
				t.Errorf("%s: status %d, want %d (body %q)", c.name, resp.StatusCode, c.want, body)
			}
			if !closed {
				t.Errorf("%s: connection left open after a refused request", c.name)
			}
		}
	}
	if got := origin.Stats().Total().Total(); got != 0 {
		t.Fatalf("the origin saw %d hostile requests, want 0", got)
	}
	c, closeIdle := client()
	defer closeIdle()
	if resp, _ := get(t, c, "http://"+g.Addr()+"/after"); resp.StatusCode != 200 {
		t.Fatalf("after hostile input: status %d", resp.StatusCode)
	}
}

// recorder is an origin that records every request it is given as
// "METHOD PATH BODY" and answers 200 with the body's length.
type recorder struct {
	*backend
	mu   sync.Mutex
	seen []string
	// firstBytes receives once when a request body's first byte arrived.
	firstBytes chan struct{}
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{firstBytes: make(chan struct{}, 1)}
	rec.backend = startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		buf := make([]byte, 512)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 && len(body) == 0 {
				select {
				case rec.firstBytes <- struct{}{}:
				default:
				}
			}
			body = append(body, buf[:n]...)
			if err != nil {
				if err != io.EOF {
					body = append(body, "<broken>"...)
				}
				break
			}
		}
		rec.mu.Lock()
		rec.seen = append(rec.seen, r.Method+" "+r.URL.RequestURI()+" "+string(body))
		rec.mu.Unlock()
		fmt.Fprintf(w, "%d", len(body))
	}))
	return rec
}

func (rec *recorder) requests() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.seen)
}

// readResponses reads responses from br until the connection ends and
// returns their status codes.
func readResponses(t *testing.T, br *bufio.Reader) []int {
	t.Helper()
	var codes []int
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if isTimeout(err) {
				t.Fatalf("connection neither answered nor closed: %v (codes so far %v)", err, codes)
			}
			return codes
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 200 { // not 100 Continue
			codes = append(codes, resp.StatusCode)
		}
	}
}

// pipeline writes raw on one connection at once and returns the status
// of every response until the gateway closes the connection.
func pipeline(t *testing.T, addr, raw string) []int {
	t.Helper()
	conn := sendRaw(t, addr, raw)
	defer conn.Close()
	return readResponses(t, bufio.NewReader(conn))
}

// sendRaw writes raw on a fresh connection to addr, which it returns with a
// 10s deadline.
func sendRaw(t *testing.T, addr, raw string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	return conn
}

func TestPipelinedRequestsAreEachChecked(t *testing.T) {
	rec := startRecorder(t)
	g := gatewayTo(t, 1, "", "    pool: {prewarm: 0}\n", rec.addr)
	raw := "POST /a HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" +
		"OPTIONS * HTTP/1.1\r\nHost: gw\r\n\r\n" + // answered by net/http itself
		"PUT /b HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\n\r\nabc" +
		"POST /smuggle HTTP/1.1\r\nHost: gw\r\nContent-Length: 30\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: gw\r\n\r\n"
	codes := pipeline(t, g.Addr(), raw)
	if want := []int{200, 200, 200, 400}; !slices.Equal(codes, want) {
		t.Errorf("statuses %v, want %v and the connection closed", codes, want)
	}
	if got, want := rec.requests(), []string{"POST /a hello", "PUT /b abc"}; !slices.Equal(got, want) {
		t.Fatalf("origin saw %q, want %q", got, want)
	}
}

func TestBrokenChunkMidBodyNeverSmugglesTheNextRequest(t *testing.T) {
	for _, c := range []struct {
		name  string
		split bool // the break arrives after the request was forwarded
	}{{"one write", false}, {"after forwarding", true}} {
		t.Run(c.name, func(t *testing.T) {
			rec := startRecorder(t)
			g := gatewayTo(t, 1, "", "    pool: {prewarm: 0}\n", rec.addr)
			conn, err := net.Dial("tcp", g.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			first := "POST /a HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
			rest := "ZZ\r\nGET /smuggled HTTP/1.1\r\nHost: gw\r\n\r\n"
			if c.split {
				io.WriteString(conn, first)
				<-rec.firstBytes // the origin is reading the forwarded body
				io.WriteString(conn, rest)
			} else {
				io.WriteString(conn, first+rest)
			}
			// The break is answered (400, or 502 once forwarded) and
			// anything after it refused; then the connection ends.
			codes := readResponses(t, bufio.NewReader(conn))
			if len(codes) == 0 || codes[0] < 400 || slices.ContainsFunc(codes[1:], func(c int) bool { return c != 400 }) {
				t.Errorf("statuses %v, want refusals only and the connection closed", codes)
			}
			for _, r := range rec.requests() {
				if strings.Contains(r, "smuggled") {
					t.Fatalf("the smuggled request reached the origin: %q", rec.requests())
				}
			}
			if !c.split && len(rec.requests()) != 0 {
				t.Fatalf("a request with broken framing was forwarded: %q", rec.requests())
			}
		})
	}
}

// TestValidFramingIsForwardedIntact shows the guard refuses nothing that is
// well framed, however unusual.
func TestValidFramingIsForwardedIntact(t *testing.T) {
	rec := startRecorder(t)
	g := gatewayTo(t, 1, "", "    pool: {prewarm: 0}\n", rec.addr)
	for _, c := range []struct{ name, raw, seen string }{
		{"TE with spaces", "POST /te HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding:   Chunked  \r\n\r\n5\r\nhello\r\n0\r\n\r\n", "POST /te hello"},
		{"chunk extension", "POST /ext HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5;name=\"v\"\r\nhello\r\n0;last\r\n\r\n", "POST /ext hello"},
		{"trailers", "POST /tr HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-Sum: 1\r\n\r\n", "POST /tr hi"},
		{"upper hex, many chunks", "POST /hex HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n1\r\n!\r\n0\r\n\r\n", "POST /hex 0123456789!"},
		{"zero-padded length", "POST /pad HTTP/1.1\r\nHost: gw\r\nContent-Length: 0003\r\n\r\nabc", "POST /pad abc"},
		{"HTTP/1.0 with length", "POST /v10 HTTP/1.0\r\nHost: gw\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc", "POST /v10 abc"},
		{"expect continue", "PUT /exp HTTP/1.1\r\nHost: gw\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc", "PUT /exp abc"},
		{"absolute-form target", "GET http://gw/abs?q=1 HTTP/1.1\r\nHost: gw\r\n\r\n", "GET /abs?q=1 "},
	} {
		before := len(rec.requests())
		codes := pipeline(t, g.Addr(), c.raw+"GET /last HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
		if !slices.Equal(codes, []int{200, 200}) {
			t.Errorf("%s: statuses %v, want 200 and 200 for the request after it", c.name, codes)
			continue
		}
		if got := rec.requests(); len(got) != before+2 || got[before] != c.seen {
			t.Errorf("%s: origin saw %q, want %q", c.name, got[before:], c.seen)
		}
	}
}

func TestOversizedHeadersGet431(t *testing.T) {
	g, origin := hostileGateway(t) // max_header_bytes: 4096
	big := "GET / HTTP/1.1\r\nHost: gw.test\r\nX-Big: " + strings.Repeat("a", 16<<10) + "\r\n\r\n"
	many := "GET / HTTP/1.1\r\nHost: gw.test\r\n" + strings.Repeat("X-Many: aaaaaaaaaaaaaaaa\r\n", 1000) + "\r\n"
	for name, raw := range map[string]string{"one big header": big, "many headers": many} {
		resp, _, closed := oneExchange(t, g.Addr(), raw)
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !closed {
			t.Errorf("%s: status %d (closed %v), want 431 and the connection closed", name, resp.StatusCode, closed)
		}
	}
	if got := origin.Stats().Total().Total(); got != 0 {
		t.Fatalf("the origin saw %d requests with oversized headers", got)
	}
}

// TestSlowlorisCutByReadHeaderTimeout trickles a head one header line at a
// time, never finishing it: the gateway must cut the connection once
// downstream.read_header_timeout (300ms here) passes, whatever the trickle.
func TestSlowlorisCutByReadHeaderTimeout(t *testing.T) {
	g, origin := hostileGateway(t)
	conn, err := net.Dial("tcp", g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: gw.test\r\n")
	stop := make(chan struct{})
	trickled := make(chan int)
	go func() {
		n := 0
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		defer func() { trickled <- n }()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(conn, "X-Slow: 1\r\n"); err != nil {
					return
				}
				n++
			}
		}
	}()
	// The client's own deadline is far beyond the gateway's timeout: the
	// read must end because the gateway closed the connection.
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	close(stop)
	n := <-trickled
	if err == nil || isTimeout(err) {
		t.Fatalf("slowloris connection still open after %d header lines: %v", n, err)
	}
	if got := origin.Stats().Total().Total(); got != 0 {
		t.Fatalf("the origin saw %d requests", got)
	}
}

// testCA is a certificate authority for the mTLS tests, with its
// certificate as a file.
type testCA struct {
	*testcert.Cert
	caFile string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	c, err := testcert.NewCA("corput test CA")
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{Cert: c, caFile: writePEM(t, "ca.pem", "CERTIFICATE", c.Leaf.Raw)}
}

// leaf issues a certificate for 127.0.0.1 with the given use and returns
// it loaded and as files.
func (ca *testCA) leaf(t *testing.T, name string, use x509.ExtKeyUsage) (tls.Certificate, string, string) {
	t.Helper()
	c, err := ca.Issue(name, use)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := c.WriteFiles(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return c.TLS(), certFile, keyFile
}

// gatewayWithLog is gatewayTo with the gateway's log kept.
func gatewayWithLog(t *testing.T, top, originKeys string, addrs ...string) (*Gateway, *testlog.Buffer) {
	t.Helper()
	text := top + withEndpoints(cfgText(1, originKeys), addrs...)
	logger, logs := testlog.New(slog.LevelInfo)
	g := startGateway(t, text, nil, Options{Logger: logger})
	return g, logs
}

func TestAdminListenerDefaultsToLoopback(t *testing.T) {
	cfg, err := config.Parse([]byte("routes: [{origin: a}]\norigins: [{name: a, endpoints: [{address: 127.0.0.1:1}]}]\n"), "min.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for key, addr := range map[string]string{"admin": cfg.Admin.Listen, "listen": cfg.Listen} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("%s default %q: %v", key, addr, err)
		}
		if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
			t.Errorf("%s defaults to %q, want a loopback address", key, addr)
		}
	}
}

func TestUpstreamTLSVerifiedUnlessExplicitlyOff(t *testing.T) {
	b := startBackend(t, testorigin.TLS, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secret")
	}))
	for _, c := range []struct {
		name, tls string
		status    int
		warned    bool
	}{
		{"system roots refuse a self-signed origin", "tls: {}", 502, false},
		{"the origin's CA", fmt.Sprintf("tls: {ca: %q}", b.caFile), 200, false},
		{"verification off", "tls: {insecure_skip_verify: true}", 200, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, logs := gatewayWithLog(t, "", "    pool: {prewarm: 0, acquire_timeout: 5s}\n    "+c.tls+"\n", b.addr)
			resp, body := get(t, &http.Client{Timeout: 10 * time.Second}, "http://"+g.Addr()+"/")
			if resp.StatusCode != c.status {
				t.Fatalf("status %d (%q), want %d", resp.StatusCode, body, c.status)
			}
			if c.status == 502 && (body != "Bad Gateway: connect_failed\n" || resp.Header.Get("X-Corput-Error") != forward.ConnectFailed.String()) {
				t.Errorf("unverified origin: body %q, reason %q", body, resp.Header.Get("X-Corput-Error"))
			}
			warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "insecure_skip_verify")
			if warned != c.warned {
				t.Errorf("warning logged: %v, want %v; log:\n%s", warned, c.warned, logs)
			}
		})
	}
}

func TestClientCertificatesToOrigins(t *testing.T) {
	ca := newTestCA(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	defer srv.Close()
	originCA := writePEM(t, "origin.pem", "CERTIFICATE", srv.Certificate().Raw)
	_, certFile, keyFile := ca.leaf(t, "corput-gateway", x509.ExtKeyUsageClientAuth)
	addr := srv.Listener.Addr().String()

	with, _ := gatewayWithLog(t, "", fmt.Sprintf("    pool: {prewarm: 0, acquire_timeout: 5s}\n    tls: {ca: %q, cert: %q, key: %q}\n", originCA, certFile, keyFile), addr)
	if resp, body := get(t, &http.Client{Timeout: 10 * time.Second}, "http://"+with.Addr()+"/"); resp.StatusCode != 200 || body != "corput-gateway" {
		t.Fatalf("with a client certificate: %d %q", resp.StatusCode, body)
	}
	without, _ := gatewayWithLog(t, "", fmt.Sprintf("    pool: {prewarm: 0, acquire_timeout: 5s}\n    tls: {ca: %q}\n", originCA), addr)
	if resp, body := get(t, &http.Client{Timeout: 10 * time.Second}, "http://"+without.Addr()+"/"); resp.StatusCode != 502 {
		t.Fatalf("without a client certificate: %d %q, want 502", resp.StatusCode, body)
	}
}

func TestClientCertificatesRequiredDownstream(t *testing.T) {
	ca := newTestCA(t)
	_, serverCert, serverKey := ca.leaf(t, "gateway", x509.ExtKeyUsageServerAuth)
	clientPair, _, _ := ca.leaf(t, "client", x509.ExtKeyUsageClientAuth)
	os := startOrigins(t, 1, testorigin.Options{})
	top := fmt.Sprintf("tls: {cert: %q, key: %q, client_ca: %q}\n", serverCert, serverKey, ca.caFile)
	g := startGateway(t, top+cfgText(1, ""), os, Options{})
	call := func(certs []tls.Certificate) (*http.Response, error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: certs}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + g.Addr() + "/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	if resp, err := call(nil); err == nil {
		t.Fatalf("a client without a certificate was served: %d", resp.StatusCode)
	}
	if resp, err := call([]tls.Certificate{clientPair}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a client with a certificate: %v %v", resp, err)
	}
	if got := os[0].Stats().Total().Total(); got != 1 {
		t.Fatalf("origin served %d requests, want 1 (the authenticated client's)", got)
	}
}

func TestXForwardedForTrustedOnlyFromConfiguredProxies(t *testing.T) {
	b := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Forwarded-For")+"|"+r.Header.Get("X-Forwarded-Host"))
	}))
	for _, c := range []struct{ name, top, want string }{
		{"default: untrusted", "", "127.0.0.1|gw.test"},
		{"other proxies trusted", "downstream: {trusted_proxies: [10.0.0.0/8]}\n", "127.0.0.1|gw.test"},
		{"loopback trusted", "downstream: {trusted_proxies: [127.0.0.0/8]}\n", "6.6.6.6, 127.0.0.1|evil.test"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := gatewayTo(t, 1, c.top, "    pool: {prewarm: 0}\n", b.addr)
			req, _ := http.NewRequest("GET", "http://"+g.Addr()+"/", nil)
			req.Host = "gw.test"
			req.Header.Set("X-Forwarded-For", "6.6.6.6")
			req.Header.Set("X-Forwarded-Host", "evil.test")
			resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != c.want {
				t.Fatalf("origin saw %q, want %q", body, c.want)
			}
		})
	}
}

// TestGatewayErrorsNameOnlyTheReason provokes each kind of gateway-made
// error with real failures and checks the client learns the status and
// the reason, never an internal error text (addresses, dial errors, EOF).
func TestGatewayErrorsNameOnlyTheReason(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	hang := make(chan struct{})
	defer close(hang)
	slow := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-hang:
		}
	}))
	reset := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // no response at all
		}
	}))
	keys := "    pool: {prewarm: 0, acquire_timeout: 150ms}\n    retry: {attempts: 0}\n    timeouts: {connect: 100ms, request: 200ms}\n"
	routed := "routes: [{path_prefix: /app, origin: app}]\n"
	for _, c := range []struct {
		name, top, addr, method, path string
		status                        int
		reason                        string
	}{
		{"dead origin", "", deadAddr, "GET", "/", 502, forward.ConnectFailed.String()},
		{"origin hangs", "", slow.addr, "GET", "/", 504, forward.UpstreamTimeout.String()},
		{"origin drops the connection", "", reset.addr, "GET", "/", 502, forward.UpstreamReset.String()},
		{"no route", routed, slow.addr, "GET", "/elsewhere", 404, forward.NoRoute.String()},
		{"CONNECT", "", slow.addr, "CONNECT", "", 400, forward.BadRequest.String()},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := withEndpoints(cfgText(1, keys), c.addr)
			if c.top != "" {
				text = strings.Replace(text, "routes: [{path_prefix: /, origin: app}]\n", c.top, 1)
			}
			g := startGateway(t, text, nil, Options{})
			raw := c.method + " " + c.path + " HTTP/1.1\r\nHost: gw.test\r\n\r\n"
			if c.method == "CONNECT" {
				raw = "CONNECT gw.test:443 HTTP/1.1\r\nHost: gw.test:443\r\n\r\n"
			}
			resp := rawExchange(t, g.Addr(), raw)
			body, _ := io.ReadAll(resp.Body)
			want := http.StatusText(c.status) + ": " + c.reason + "\n"
			if resp.StatusCode != c.status || string(body) != want || resp.Header.Get("X-Corput-Error") != c.reason {
				t.Fatalf("got %d %q (X-Corput-Error %q), want %d %q", resp.StatusCode, body, resp.Header.Get("X-Corput-Error"), c.status, want)
			}
		})
	}
}

// TestIdempotentRequestRetriedWhenTheOriginDropsIt: an origin that closes
// the connection before answering (it crashed with the request in flight,
// or closed a kept-alive connection as it was reused) costs a GET nothing:
// it is replayed on another endpoint. Found by the crash drill.
func TestIdempotentRequestRetriedWhenTheOriginDropsIt(t *testing.T) {
	var dropped atomic.Int64
	drop := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dropped.Add(1)
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}))
	ok := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	g := gatewayTo(t, 1, "", "    pool: {prewarm: 0}\n    balancer: {policy: round_robin}\n    slow_start: {window: 0s}\n", drop.addr, ok.addr)
	c, closeIdle := client()
	defer closeIdle()
	for i := 0; i < 6; i++ {
		if resp, body := get(t, c, "http://"+g.Addr()+"/"); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("GET %d: %d %q (%s), want the retry's 200", i, resp.StatusCode, body, resp.Header.Get("X-Corput-Error"))
		}
	}
	if dropped.Load() == 0 {
		t.Fatal("the dropping origin was never tried: the test proves nothing")
	}
}
