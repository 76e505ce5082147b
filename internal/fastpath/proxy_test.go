package fastpath

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/proxy/proxytest"
)

// rawAnswer is an HTTP/1.1 origin that reads each request head and
// answers it with answer's bytes; close ends the connection after them.
func rawAnswer(t *testing.T, answer string, close bool) string {
	return proxytest.ServeRaw(t, func(nc net.Conn) {
		br := bufio.NewReader(nc)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if _, err := io.WriteString(nc, answer); err != nil || close {
				return
			}
		}
	})
}

// TestResponsesAsHTTP11: each response shape an origin gives is written
// to the client as HTTP/1.1 bytes by the fast path: its status line (a
// code without a text included), its fields, Date when the origin sent
// none, its framing — a length, the origin's chunks as they are, a body
// delimited by the origin's close sent chunked, none for a 204.
func TestResponsesAsHTTP11(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer string
		close  bool     // the origin closes after it
		head   []string // lines the head must have
		not    []string // field names it must not have
		body   string   // the body as it comes on the wire
	}{
		{"length, no Date", "HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nhi", false,
			[]string{"HTTP/1.1 200 OK", "X-A: 1", "Content-Length: 2", "Date: "}, nil, "hi"},
		{"the origin's Date", "HTTP/1.1 200 OK\r\nDate: Mon, 02 Jan 2006 15:04:05 GMT\r\nContent-Length: 0\r\n\r\n", false,
			[]string{"Date: Mon, 02 Jan 2006 15:04:05 GMT", "Content-Length: 0"}, nil, ""},
		{"a code without a text", "HTTP/1.1 599 Whatever\r\nContent-Length: 0\r\n\r\n", false,
			[]string{"HTTP/1.1 599 status code 599"}, nil, ""},
		{"chunks as they are", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-Sum: 3\r\n\r\n", false,
			[]string{"Transfer-Encoding: chunked", "Trailer: X-Sum"}, []string{"Content-Length"}, "3;ext=1\r\nabc\r\n0\r\nX-Sum: 3\r\n\r\n"},
		{"delimited by close", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end", true,
			[]string{"Transfer-Encoding: chunked"}, []string{"Content-Length", "Connection"}, "d\r\nuntil the end\r\n0\r\n\r\n"},
		{"204", "HTTP/1.1 204 No Content\r\nX-B: 2\r\n\r\n", false,
			[]string{"HTTP/1.1 204 No Content", "X-B: 2"}, []string{"Content-Length", "Transfer-Encoding"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := serveFront(t, fastRig(t, rawAnswer(t, tc.answer, tc.close)), downstream(), nil, false)
			c := dial(t, f.addr)
			c.send(get("/") + get("/again"))
			for range 2 {
				head := c.rawHead()
				lines := strings.Split(head, "\r\n")
				for _, want := range tc.head {
					if !slicesHasPrefix(lines, want) {
						t.Fatalf("head\n%s\nhas no line %q", head, want)
					}
				}
				for _, name := range tc.not {
					if slicesHasPrefix(lines, name+":") {
						t.Fatalf("head\n%s\nhas %s", head, name)
					}
				}
				if strings.Count(head, "Date: ") != 1 {
					t.Fatalf("head\n%s\nhas not one Date", head)
				}
				body := make([]byte, len(tc.body))
				if _, err := io.ReadFull(c.br, body); err != nil || string(body) != tc.body {
					t.Fatalf("body %q %v, want %q", body, err, tc.body)
				}
			}
			if f.Handoffs() != 0 {
				t.Fatal("handed off")
			}
		})
	}
}

func slicesHasPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// TestH2OriginAsHTTP11: an HTTP/2 origin's answer reaches the HTTP/1.1
// client with its field names in net/http's canonical form, a length when
// the origin gave one, chunked with trailers when it gave none.
func TestH2OriginAsHTTP11(t *testing.T) {
	o := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			w.WriteHeader(505)
			return
		}
		w.Header().Set("x-custom-thing", "v")
		switch r.URL.Path {
		case "/fixed":
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "hello")
		case "/stream":
			w.Header().Set("Trailer", "X-Sum")
			io.WriteString(w, "part1;")
			w.(http.Flusher).Flush()
			io.WriteString(w, "part2")
			w.Header().Set("X-Sum", "11")
		}
	}))
	rig := proxytest.New(t, proxytest.Config{FastPath: true, Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{o},
		Edit: func(oc *config.Origin) { oc.Protocol = config.ProtocolH2C }}}})
	f := serveFront(t, rig, downstream(), nil, false)
	c := dial(t, f.addr)
	c.send(get("/fixed"))
	head := c.rawHead()
	if !strings.Contains(head, "\r\nX-Custom-Thing: v\r\n") || !strings.Contains(head, "\r\nContent-Length: 5\r\n") {
		t.Fatalf("head\n%s", head)
	}
	body := make([]byte, 5)
	if _, err := io.ReadFull(c.br, body); err != nil || string(body) != "hello" {
		t.Fatalf("body %q %v", body, err)
	}
	c.send(get("/stream"))
	resp, b := c.response("GET")
	if resp.TransferEncoding == nil || b != "part1;part2" || resp.Trailer.Get("X-Sum") != "11" || resp.Header.Get("X-Custom-Thing") != "v" {
		t.Fatalf("%v %q trailer %v", resp.TransferEncoding, b, resp.Trailer)
	}
	if f.Handoffs() != 0 {
		t.Fatal("handed off")
	}
}

// TestBodyThatBreaksClosesTheConnection: a body the origin breaks after
// its head leaves the client with a head and fewer bytes than it says,
// then the connection's end: never a short whole response.
func TestBodyThatBreaksClosesTheConnection(t *testing.T) {
	o := rawAnswer(t, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345", true)
	f := serveFront(t, fastRig(t, o), downstream(), nil, false)
	c := dial(t, f.addr)
	c.send(get("/"))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil || resp.ContentLength != 10 {
		t.Fatalf("%v %v", resp, err)
	}
	b, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(b) != "12345" {
		t.Fatalf("body %q %v, want 5 bytes and the connection's end", b, err)
	}
	f.rig.WaitServed(t, "2xx", 1)
}

// TestStickyCookieOnTheFastPath: a sticky origin's new cookie goes with
// the answer's head.
func TestStickyCookieOnTheFastPath(t *testing.T) {
	rig := proxytest.New(t, proxytest.Config{FastPath: true, Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{echo(t)},
		Edit: func(oc *config.Origin) {
			oc.Balancer.Policy, oc.Balancer.HashOn = config.PolicyMaglev, "cookie sid"
			oc.Balancer.Cookie = &config.StickyCookie{TTL: time.Minute}
		}}}})
	f := serveFront(t, rig, downstream(), nil, false)
	c := dial(t, f.addr)
	c.send(get("/") + "GET / HTTP/1.1\r\nHost: a\r\nCookie: sid=abc\r\n\r\n")
	if resp, _ := c.response("GET"); !strings.HasPrefix(resp.Header.Get("Set-Cookie"), "sid=") || !strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=60") {
		t.Fatalf("Set-Cookie %q, want a new sid", resp.Header.Get("Set-Cookie"))
	}
	if resp, _ := c.response("GET"); resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("a request with its cookie got %q", resp.Header.Get("Set-Cookie"))
	}
}

// TestRequestRewrittenForTheOrigin: the fast path's request reaches the
// origin with the client's fields in order and spelling, without the
// hop-by-hop ones, with X-Forwarded-*.
func TestRequestRewrittenForTheOrigin(t *testing.T) {
	seen := make(chan string, 1)
	o := proxytest.ServeRaw(t, func(nc net.Conn) {
		br := bufio.NewReader(nc)
		var head bytes.Buffer
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			head.WriteString(line)
			if line == "\r\n" {
				break
			}
		}
		seen <- head.String()
		io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	})
	f := serveFront(t, fastRig(t, o), downstream(), nil, false)
	c := dial(t, f.addr)
	c.send("GET /p?q=1 HTTP/1.1\r\nHost: app.example\r\nx-lower: a\r\nConnection: keep-alive, X-Hop\r\nX-Hop: h\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nX-Forwarded-For: 10.9.9.9\r\n\r\n")
	c.response("GET")
	var head string
	select {
	case head = <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the origin saw nothing")
	}
	// The client's fields first, in its order and spelling, then the
	// gateway's, then TE.
	want := "GET /p?q=1 HTTP/1.1\r\nHost: app.example\r\nx-lower: a\r\n" +
		"X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: app.example\r\nTe: trailers\r\n\r\n"
	if head != want {
		t.Fatalf("the origin saw\n%q\nwant\n%q", head, want)
	}
}

// TestClientLeavesAfterQuickRequests: a watch timer left set by earlier,
// quick exchanges still watches a later one: its client leaving cuts it.
func TestClientLeavesAfterQuickRequests(t *testing.T) {
	arrived, cancelled := make(chan struct{}), make(chan struct{})
	o := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(arrived)
			<-r.Context().Done()
			close(cancelled)
		}
	}))
	f := serveFront(t, fastRig(t, o), downstream(), nil, false)
	c := dial(t, f.addr)
	for i := range 20 {
		c.send(get(fmt.Sprintf("/quick%d", i)))
		c.response("GET")
	}
	c.send(get("/slow"))
	wait(t, arrived)
	c.Close()
	wait(t, cancelled)
}

func TestStatusLine(t *testing.T) {
	for code, want := range map[int]string{
		200: "HTTP/1.1 200 OK\r\n",
		404: "HTTP/1.1 404 Not Found\r\n",
		299: "HTTP/1.1 299 status code 299\r\n",
		999: "HTTP/1.1 999 status code 999\r\n",
	} {
		if got := statusLine(code); got != want {
			t.Errorf("statusLine(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestWriteCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"content-type":     "Content-Type",
		"x-b3-traceid":     "X-B3-Traceid",
		"www-authenticate": "Www-Authenticate",
		"a":                "A",
		"-x":               "-X",
	} {
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		writeCanonical(w, in)
		w.Flush()
		if b.String() != want {
			t.Errorf("writeCanonical(%q) = %q, want %q", in, b.String(), want)
		}
	}
}

func TestChunkWriter(t *testing.T) {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	cw := chunkWriter{w: w}
	for _, p := range []string{"", "abc", strings.Repeat("x", 26)} {
		if n, err := cw.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
		}
	}
	w.Flush()
	if want := "3\r\nabc\r\n1a\r\n" + strings.Repeat("x", 26) + "\r\n"; b.String() != want {
		t.Fatalf("%q, want %q (an empty write is no chunk: it would end the body)", b.String(), want)
	}
}

// TestHandedConn: a handed-off connection reads the bytes the fast path
// had read first, then the socket's, and half-closes like the socket.
func TestHandedConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	h := &HandedConn{Conn: server, pre: []byte("already ")}
	defer h.Close()
	io.WriteString(client, "read")
	if err := h.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 12)
	if _, err := io.ReadFull(h, b); err != nil || string(b) != "already read" {
		t.Fatalf("%q %v", b, err)
	}
	if n, err := client.Read(b); n != 0 || err != io.EOF {
		t.Fatalf("after CloseWrite the client reads %d, %v; want EOF", n, err)
	}
	if h.TLS() != nil {
		t.Fatal("a cleartext connection has a TLS state")
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if err := (&HandedConn{Conn: p1}).CloseWrite(); err != nil {
		t.Fatalf("CloseWrite on a connection that cannot half-close: %v", err)
	}
}

func TestHandoffListenerClose(t *testing.T) {
	l := newHandoffListener()
	if l.Addr().String() != (&net.TCPAddr{}).String() {
		t.Fatalf("Addr before Serve: %v", l.Addr())
	}
	l.Close()
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if l.give(p1) {
		t.Fatal("a closed listener took a connection")
	}
}

// TestTraceContextOnTheFastPath: with tracing on, the origin gets the
// gateway's trace context, never the client's.
func TestTraceContextOnTheFastPath(t *testing.T) {
	tr, _ := proxytest.Tracer(t)
	o := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%v %v", r.Header["Traceparent"], r.Header["Tracestate"])
	}))
	rig := proxytest.New(t, proxytest.Config{FastPath: true, Tracer: tr, Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{o}}}})
	f := serveFront(t, rig, downstream(), nil, false)
	c := dial(t, f.addr)
	c.send("GET / HTTP/1.1\r\nHost: a\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nTracestate: a=b\r\n\r\n")
	_, seen := c.response("GET")
	if !strings.HasPrefix(seen, "[00-") || strings.Contains(seen, "4bf92f3577b34da6a3ce929d0e0e4736") || strings.Contains(seen, "a=b") {
		t.Fatalf("the origin saw trace context %q, want the gateway's own only", seen)
	}
}
