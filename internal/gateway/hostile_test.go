package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	testorigin "github.com/corput/corput/internal/origin"
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

// exchange writes raw on a fresh connection and reads one response. It
// reports whether the gateway closed the connection after it.
func exchange(t *testing.T, addr, raw string) (*http.Response, string, bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
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
			resp, body, closed := exchange(t, g.Addr(), c.raw)
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
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	return readResponses(t, bufio.NewReader(conn))
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
		{"bare LF head", "POST /lf HTTP/1.1\nHost: gw\nContent-Length: 2\n\nok", "POST /lf ok"},
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
		resp, _, closed := exchange(t, g.Addr(), raw)
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
