package httpserve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/proxy"
	"github.com/corput/corput/internal/proxy/proxytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gateway serves h with net/http's server behind the framing guard, on
// loopback, HTTP/1.1 and h2c, as the gateway does with the fast path off;
// it returns the address.
func gateway(t *testing.T, h *proxy.Handler) string {
	t.Helper()
	s := httptest.NewUnstartedServer(New(h))
	s.Listener = GuardListener(s.Listener)
	s.Config.ConnContext = ConnContext
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// counted is an origin that answers "ok N", N its requests so far.
func counted(t *testing.T) (addr string, n *atomic.Int64) {
	n = new(atomic.Int64)
	addr = proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "ok %d", n.Add(1))
	}))
	return addr, n
}

func rig(t *testing.T, edit func(*config.Origin), endpoints ...string) *proxytest.Rig {
	return proxytest.New(t, proxytest.Config{Origins: []proxytest.Origin{{Name: "app", Endpoints: endpoints, Edit: edit}}})
}

// roundTrip writes raw on a new connection to addr and reads every
// response until the connection ends (or n responses when n > 0).
func roundTrip(t *testing.T, addr, raw string, n int) []*http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []*http.Response
	for n <= 0 || len(out) < n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !isReset(err) {
				t.Fatalf("after %d responses: %v", len(out), err)
			}
			break
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		out = append(out, resp)
	}
	return out
}

func isReset(err error) bool { return strings.Contains(err.Error(), "connection reset") }

func text(r *http.Response) string {
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

const good = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"

// TestFramingGuardVerdicts: behind the guard, a pipelined request that
// net/http would take but a gateway must not is answered 400 bad_request
// with Connection: close, and never reaches the origin; the request
// before it is served.
func TestFramingGuardVerdicts(t *testing.T) {
	o, hits := counted(t)
	addr := gateway(t, rig(t, nil, o).Handler)
	for _, tc := range []struct {
		name string
		bad  string // "" for none: both requests are served
	}{
		{"two good requests", ""},
		{"Content-Length and Transfer-Encoding", "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"two equal Content-Lengths", "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"},
		{"obs-fold", "GET /b HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n"},
		{"Transfer-Encoding on HTTP/1.0", "POST /b HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"HTTP/1.2", "GET /b HTTP/1.2\r\nHost: x\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := hits.Load()
			second := tc.bad
			if second == "" {
				second = good
			}
			rs := roundTrip(t, addr, good+second, 2)
			if len(rs) != 2 || rs[0].StatusCode != 200 {
				t.Fatalf("%d responses, want 2, the first 200", len(rs))
			}
			if tc.bad == "" {
				if rs[1].StatusCode != 200 || hits.Load() != before+2 {
					t.Fatalf("second: %d; origin hits %d", rs[1].StatusCode, hits.Load()-before)
				}
				return
			}
			if rs[1].StatusCode != 400 || rs[1].Header.Get("X-Corput-Error") != "bad_request" || !rs[1].Close {
				t.Fatalf("second: %d %v close %v, want 400 bad_request and Connection: close", rs[1].StatusCode, rs[1].Header, rs[1].Close)
			}
			if got := hits.Load() - before; got != 1 {
				t.Fatalf("the origin saw %d requests, want only the good one", got)
			}
		})
	}
}

// TestNotHTTPIsAnsweredAtOnce: a first line that cannot be a request is
// answered 400 and the connection closed, however short it is.
func TestNotHTTPIsAnsweredAtOnce(t *testing.T) {
	o, hits := counted(t)
	addr := gateway(t, rig(t, nil, o).Handler)
	rs := roundTrip(t, addr, "hi\n", 0)
	if len(rs) != 1 || rs[0].StatusCode != 400 || rs[0].Header.Get("X-Corput-Error") != "bad_request" || hits.Load() != 0 {
		t.Fatalf("%d responses (%v), origin hits %d; want one 400", len(rs), rs, hits.Load())
	}
}

// TestBadRequest: what the handler refuses whatever net/http let
// through, request by request.
func TestBadRequest(t *testing.T) {
	refused := guard(nil)
	refused.badFrom.Store(0)
	for _, tc := range []struct {
		name string
		req  func() *http.Request
		want string
	}{
		{"plain GET", func() *http.Request { return httptest.NewRequest("GET", "/", nil) }, ""},
		{"CONNECT", func() *http.Request { return httptest.NewRequest("CONNECT", "example.com:443", nil) }, "CONNECT is not proxied"},
		{"asterisk GET", func() *http.Request { return httptest.NewRequest("GET", "*", nil) }, "asterisk-form target is for OPTIONS only"},
		{"asterisk OPTIONS", func() *http.Request { return httptest.NewRequest("OPTIONS", "*", nil) }, ""},
		{"TE and CL", func() *http.Request {
			r := httptest.NewRequest("POST", "/", strings.NewReader("x"))
			r.TransferEncoding = []string{"chunked"}
			r.Header.Set("Content-Length", "1")
			return r
		}, "both Transfer-Encoding and Content-Length"},
		{"the guard's verdict", func() *http.Request {
			r := httptest.NewRequest("GET", "/", nil)
			return r.WithContext(context.WithValue(r.Context(), framingKey{}, refused))
		}, "framing refused"},
		{"the guard's verdict, HTTP/2", func() *http.Request {
			r := httptest.NewRequest("GET", "/", nil)
			r.ProtoMajor = 2
			return r.WithContext(context.WithValue(r.Context(), framingKey{}, refused))
		}, ""},
	} {
		if got := badRequest(tc.req(), forward.Forwarding{}); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestBadRequestNames: the field-name rules, per downstream.underscore_headers.
func TestBadRequestNames(t *testing.T) {
	const disguised = "a protected field name written with '_' or a run of separators"
	for _, tc := range []struct {
		action config.UnderscoreHeaders
		name   string
		want   string
		kept   bool
	}{
		{config.UnderscoreDrop, "X_Api_Key", "", false},
		{"", "X_Api_Key", "", false},
		{config.UnderscoreAllow, "X_Api_Key", "", true},
		{config.UnderscoreReject, "X_Api_Key", "a field name with '_' (downstream.underscore_headers: reject)", true},
		{config.UnderscoreReject, "X-Api--Key", "", true},
		{config.UnderscoreAllow, "Transfer_Encoding", disguised, true},
		{config.UnderscoreAllow, "Transfer---Encoding", disguised, true},
		{config.UnderscoreDrop, "Content_Length", disguised, true},
		{config.UnderscoreAllow, "X_Forwarded_For", disguised, true},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header[tc.name] = []string{"v"}
		got := badRequest(r, forward.Forwarding{Underscores: tc.action})
		if _, kept := r.Header[tc.name]; got != tc.want || kept != tc.kept {
			t.Errorf("%q under %q: %q, kept %v; want %q, kept %v", tc.name, tc.action, got, kept, tc.want, tc.kept)
		}
	}
}

// TestPrefetchBody: the start of a chunked body is read ahead, and given
// back in one read (not its first byte alone); the body then reads whole,
// an empty one is no body, and a malformed first chunk is refused.
func TestPrefetchBody(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		ok        bool
		body      string
		noBody    bool
		first     string // the first read
	}{
		{"a chunked body", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n", true, "helloabc", false, "helloabc"},
		{"an empty chunked body", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", true, "", true, ""},
		{"a malformed first chunk", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n", false, "", false, ""},
		{"a body cut short", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", false, "", false, ""},
		{"a fixed length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", true, "abc", false, "abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(tc.raw)))
			if err != nil {
				t.Fatal(err)
			}
			if ok := prefetchBody(r); ok != tc.ok {
				t.Fatalf("prefetchBody = %v, want %v", ok, tc.ok)
			}
			if !tc.ok {
				return
			}
			if (r.Body == http.NoBody) != tc.noBody {
				t.Fatalf("body %T, no body %v", r.Body, tc.noBody)
			}
			buf := make([]byte, 64)
			n, _ := r.Body.Read(buf)
			if string(buf[:n]) != tc.first {
				t.Fatalf("first read %q, want %q", buf[:n], tc.first)
			}
			b, err := io.ReadAll(io.MultiReader(bytes.NewReader(buf[:n]), r.Body))
			if err != nil || string(b) != tc.body {
				t.Fatalf("body %q %v, want %q", b, err, tc.body)
			}
			r.Body.Close()
		})
	}
}

// TestMalformedFirstChunkNeverReachesTheOrigin: through the server, a
// chunked request whose first chunk is malformed is answered 400 and
// the connection closed; the origin sees nothing.
func TestMalformedFirstChunkNeverReachesTheOrigin(t *testing.T) {
	o, hits := counted(t)
	addr := gateway(t, rig(t, nil, o).Handler)
	rs := roundTrip(t, addr, "POST /u HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX", 0)
	if len(rs) != 1 || rs[0].StatusCode != 400 || !rs[0].Close || hits.Load() != 0 {
		t.Fatalf("%d responses, origin hits %d; want one 400 closing the connection and no hit", len(rs), hits.Load())
	}
}

// clients are the two downstream protocols net/http's path serves in
// cleartext.
var clients = []struct {
	name string
	c    func() *http.Client
}{
	{"h1", func() *http.Client { return &http.Client{Transport: &http.Transport{}} }},
	{"h2c", func() *http.Client {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		return &http.Client{Transport: &http.Transport{Protocols: p}}
	}},
}

func get(t *testing.T, c *http.Client, url string, h http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vv := range h {
		req.Header[k] = vv
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestResponsesThroughNetHTTP: the netClient adapter writes each
// response shape through net/http — length, a stream flushed as it
// comes, trailers, a HEAD's length, a 204 — over HTTP/1.1 and h2c.
func TestResponsesThroughNetHTTP(t *testing.T) {
	proceed := make(chan struct{})
	o := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fixed":
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "hello")
		case "/stream":
			io.WriteString(w, "part1;")
			w.(http.Flusher).Flush()
			select { // the client must see part1 before part2 is written
			case <-proceed:
			case <-time.After(10 * time.Second):
			}
			io.WriteString(w, "part2")
		case "/trailers":
			w.Header().Set("Trailer", "X-Sum")
			io.WriteString(w, "body")
			w.Header().Set("X-Sum", "4")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	r := rig(t, nil, o)
	addr := gateway(t, r.Handler)
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			c := cl.c()
			defer c.CloseIdleConnections()
			resp := get(t, c, "http://"+addr+"/fixed", nil)
			if text(resp) != "hello" || resp.ContentLength != 5 {
				t.Fatalf("/fixed: %q, length %d", text(resp), resp.ContentLength)
			}
			resp = get(t, c, "http://"+addr+"/stream", nil)
			buf := make([]byte, 6)
			if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "part1;" {
				t.Fatalf("/stream's first part: %q %v (held back?)", buf, err)
			}
			proceed <- struct{}{}
			if rest := text(resp); rest != "part2" {
				t.Fatalf("/stream's rest: %q", rest)
			}
			resp = get(t, c, "http://"+addr+"/trailers", nil)
			if body := text(resp); body != "body" || resp.Trailer.Get("X-Sum") != "4" {
				t.Fatalf("/trailers: %q trailer %v", body, resp.Trailer)
			}
			req, _ := http.NewRequest("HEAD", "http://"+addr+"/fixed", nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.ContentLength != 5 {
				t.Fatalf("HEAD /fixed: %d length %d, want 200 and 5", resp.StatusCode, resp.ContentLength)
			}
			resp = get(t, c, "http://"+addr+"/empty", nil)
			if resp.StatusCode != 204 || resp.Header.Get("Content-Length") != "" {
				t.Fatalf("/empty: %d %v", resp.StatusCode, resp.Header)
			}
		})
	}
	r.WaitServed(t, "2xx", 2*5)
}

// TestRequestRewrittenForTheOrigin: the request reaches the origin
// without its hop-by-hop fields, with X-Forwarded-*, TE: trailers kept,
// and its body.
func TestRequestRewrittenForTheOrigin(t *testing.T) {
	o := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "xff=%s proto=%s host=%s te=%q foo=%q keep=%q conn=%q body=%s trailer=%q",
			r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"),
			r.Header.Get("Te"), r.Header.Get("X-Foo"), r.Header.Get("X-Keep"), r.Header.Get("Connection"), b, r.Trailer.Get("X-T"))
	}))
	addr := gateway(t, rig(t, nil, o).Handler)
	raw := "POST /p HTTP/1.1\r\nHost: app.example\r\nConnection: X-Foo\r\nX-Foo: hop\r\nX-Keep: end\r\nTe: trailers\r\n" +
		"Transfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n3\r\nabc\r\n0\r\nX-T: t1\r\n\r\n"
	rs := roundTrip(t, addr, raw, 1)
	want := `xff=127.0.0.1 proto=http host=app.example te="trailers" foo="" keep="end" conn="" body=abc trailer="t1"`
	if len(rs) != 1 || text(rs[0]) != want {
		t.Fatalf("the origin saw\n%s\nwant\n%s", text(rs[0]), want)
	}
}

// TestAbortedBodyAbortsTheStream: a body the origin breaks after its head
// never reaches the client as a whole response: the client's request or
// its body read fails (HTTP/1.1: the connection closes, with or without
// the head, which net/http may still hold in its buffer; h2c: the stream
// is reset). The request is counted all the same.
func TestAbortedBodyAbortsTheStream(t *testing.T) {
	o := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "12345")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	r := rig(t, nil, o)
	addr := gateway(t, r.Handler)
	for _, cl := range clients {
		c := cl.c()
		resp, err := c.Get("http://" + addr + "/")
		var b []byte
		if err == nil {
			b, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err == nil {
			t.Fatalf("%s: a whole response %q, want the client to see it broken", cl.name, b)
		}
		c.CloseIdleConnections()
	}
	r.WaitServed(t, "2xx", 2)
}

// TestClientLeavingCutsTheExchange: a client that leaves while the origin
// thinks cancels the origin's request.
func TestClientLeavingCutsTheExchange(t *testing.T) {
	o := proxytest.Think(t)
	r := rig(t, nil, o.Addr)
	addr := gateway(t, r.Handler)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, good)
	select {
	case <-o.Arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not reach the origin")
	}
	c.Close()
	select {
	case <-o.Cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the origin's request was not cancelled when the client left")
	}
	r.WaitServed(t, "4xx", 1) // 499
}

// TestUpgradeTunnels: a 101 to a request that asked for it hands the
// client's connection over to the origin's: bytes flow both ways. An
// upgrade the origin declines closes the connection after the answer.
func TestUpgradeTunnels(t *testing.T) {
	o := proxytest.ServeRaw(t, func(nc net.Conn) {
		br := bufio.NewReader(nc)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if req.URL.Path == "/decline" {
			io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno")
			return
		}
		fmt.Fprintf(nc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", req.Header.Get("Upgrade"))
		io.Copy(nc, br) // echo
	})
	addr := gateway(t, rig(t, nil, o).Handler)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "echo" {
		t.Fatalf("%v %v", resp, err)
	}
	io.WriteString(c, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("through the tunnel: %q %v", buf, err)
	}
	rs := roundTrip(t, addr, "GET /decline HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"+good, 0)
	if len(rs) != 1 || text(rs[0]) != "no" || !rs[0].Close {
		t.Fatalf("%d responses, want the origin's one answer with Connection: close", len(rs))
	}
}

// TestConnContextKeepsTheHandedOnTLSState: a connection under the guard
// that carries a TLS state (the fast path's hand-off over HTTPS) gives it
// to its requests.
func TestConnContextKeepsTheHandedOnTLSState(t *testing.T) {
	st := &tls.ConnectionState{Version: tls.VersionTLS13, ServerName: "app.example"}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ctx := ConnContext(context.Background(), Guard(tlsConn{a, st}))
	if got, _ := ctx.Value(tlsKey{}).(*tls.ConnectionState); got != st {
		t.Fatalf("the request's TLS state %v, want the handed-on connection's", got)
	}
	if _, ok := ctx.Value(framingKey{}).(*framingConn); !ok {
		t.Fatal("the guard's verdicts are not in the context")
	}
	ctx = ConnContext(context.Background(), Guard(a))
	if ctx.Value(tlsKey{}) != nil {
		t.Fatal("a cleartext connection has a TLS state")
	}
	if ctx := ConnContext(context.Background(), a); ctx.Value(framingKey{}) != nil {
		t.Fatal("an unguarded connection has verdicts")
	}
}

// tlsConn is a connection that tells its TLS state, as a connection the
// fast path hands on after its handshake does.
type tlsConn struct {
	net.Conn
	st *tls.ConnectionState
}

func (c tlsConn) TLS() *tls.ConnectionState { return c.st }

// TestCookieAndTraceContext: a sticky origin's new cookie reaches the
// client with the origin's answer; with tracing on, the origin gets the
// gateway's trace context, never the client's.
func TestCookieAndTraceContext(t *testing.T) {
	tr, _ := proxytest.Tracer(t)
	o := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %v", r.Header.Get("Traceparent"), r.Header["Tracestate"])
	}))
	r := proxytest.New(t, proxytest.Config{Tracer: tr, Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{o}, Edit: func(oc *config.Origin) {
		oc.Balancer.Policy, oc.Balancer.HashOn = config.PolicyMaglev, "cookie sid"
		oc.Balancer.Cookie = &config.StickyCookie{}
	}}}})
	addr := gateway(t, r.Handler)
	const theirs = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	rs := roundTrip(t, addr, "GET / HTTP/1.1\r\nHost: x\r\nTraceparent: "+theirs+"\r\nTracestate: a=b\r\n\r\n", 1)
	if len(rs) != 1 || !strings.HasPrefix(rs[0].Header.Get("Set-Cookie"), "sid=") {
		t.Fatalf("%d responses, Set-Cookie %q; want a new sid", len(rs), rs[0].Header.Get("Set-Cookie"))
	}
	seen := text(rs[0])
	if !strings.HasPrefix(seen, "00-") || strings.Contains(seen, "4bf92f3577b34da6a3ce929d0e0e4736") || strings.Contains(seen, "a=b") {
		t.Fatalf("the origin saw trace context %q, want the gateway's own", seen)
	}
}
