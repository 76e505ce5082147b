package fastpath

import (
	"context"
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
	"github.com/corput/corput/internal/route"
)

// TestKeepAliveAndPipelining: a connection carries request after request,
// pipelined ones answered in order, all on the fast path.
func TestKeepAliveAndPipelining(t *testing.T) {
	f := serveFront(t, fastRig(t, echo(t)), downstream(), nil, false)
	c := dial(t, f.addr)
	c.send(get("/1") + post("/2", "two") + get("/3"))
	for _, want := range []string{"HTTP/1.1 GET /1 http 0 ", "HTTP/1.1 POST /2 http 3 two", "HTTP/1.1 GET /3 http 0 "} {
		resp, body := c.response("GET")
		if resp.StatusCode != 200 || body != want || resp.Close {
			t.Fatalf("%d %q close %v, want 200 %q kept alive", resp.StatusCode, body, resp.Close, want)
		}
	}
	c.send(get("/4"))
	if _, body := c.response("GET"); body != "HTTP/1.1 GET /4 http 0 " {
		t.Fatalf("after a pause: %q", body)
	}
	if n := f.Handoffs(); n != 0 {
		t.Fatalf("%d connections handed to net/http, want 0", n)
	}
	f.rig.WaitServed(t, "2xx", 4)
}

// TestHandOff: what the fast path does not serve goes, unread, to
// net/http's server with the connection: the bytes the fast path had
// read come first and arrive intact, and net/http answers.
func TestHandOff(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", BodyLimit/16) + "!" // one byte over the limit
	o := echo(t)
	for _, tc := range []struct {
		name   string
		fast   bool   // the rig lets the fast path serve its origin
		maxHdr int    // downstream.max_header_bytes (0: the default)
		send   string // the connection's bytes
		want   []string
	}{
		{"chunked body", true, 0, "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
			[]string{"200 HTTP/1.1 POST /c http 5 hello"}},
		{"body over BodyLimit", true, 0, post("/big", big), []string{fmt.Sprintf("200 HTTP/1.1 POST /big http %d %s", len(big), big)}},
		{"HTTP/1.0", true, 0, "GET /old HTTP/1.0\r\nHost: a\r\n\r\n", []string{"200 HTTP/1.1 GET /old http 0 "}},
		{"Expect", true, 0, "POST /e HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok", []string{"200 HTTP/1.1 POST /e http 2 ok"}},
		{"an escaped path", true, 0, "GET /a%20b HTTP/1.1\r\nHost: a\r\n\r\n", []string{"200 HTTP/1.1 GET /a%20b http 0 "}},
		{"CONNECT", true, 0, "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", []string{"400 Bad Request: bad_request\n"}},
		// net/http allows 4 KiB over max_header_bytes: it decides.
		{"a head over max_header_bytes, taken", true, 1024, "GET /h HTTP/1.1\r\nHost: a\r\nX-Long: " + strings.Repeat("x", 2000) + "\r\n\r\n",
			[]string{"200 HTTP/1.1 GET /h http 0 "}},
		{"a head over max_header_bytes, refused", true, 1024, "GET /h HTTP/1.1\r\nHost: a\r\nX-Long: " + strings.Repeat("x", 6000) + "\r\n\r\n",
			[]string{"431 "}},
		{"not HTTP", true, 0, "hello\r\n", []string{"400 Bad Request: bad_request\n"}},
		{"an origin the fast path does not serve", false, 0, get("/slow"), []string{"200 HTTP/1.1 GET /slow http 0 "}},
		{"mid-connection", true, 0, get("/fast") + "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" + get("/after"),
			[]string{"200 HTTP/1.1 GET /fast http 0 ", "200 HTTP/1.1 POST /c http 3 abc", "200 HTTP/1.1 GET /after http 0 "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := proxytest.New(t, proxytest.Config{Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{o}}}, FastPath: tc.fast})
			d := downstream()
			if tc.maxHdr > 0 {
				d.MaxHeaderBytes = tc.maxHdr
			}
			f := serveFront(t, rig, d, nil, false)
			c := dial(t, f.addr)
			c.send(tc.send)
			for _, want := range tc.want {
				resp, body := c.response("GET")
				if got := fmt.Sprintf("%d %s", resp.StatusCode, body); !strings.HasPrefix(got, want) {
					t.Fatalf("got %.80q, want %.80q", got, want)
				}
			}
			if n := f.Handoffs(); n != 1 {
				t.Fatalf("%d connections handed off, want 1", n)
			}
		})
	}
}

// TestHandOffH2C: an h2c client's connection (the HTTP/2 preface) goes to
// net/http, which serves its streams.
func TestHandOffH2C(t *testing.T) {
	f := serveFront(t, fastRig(t, echo(t)), downstream(), nil, false)
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	c := &http.Client{Transport: &http.Transport{Protocols: p}}
	defer c.CloseIdleConnections()
	for i := range 3 {
		resp, err := c.Post("http://"+f.addr+"/h2", "text/plain", strings.NewReader("abc"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || string(b) != "HTTP/1.1 POST /h2 http 3 abc" {
			t.Fatalf("%d: %s %q", i, resp.Proto, b)
		}
	}
	if n := f.Handoffs(); n != 1 {
		t.Fatalf("%d connections handed off, want 1", n)
	}
}

// TestNoRouteAnsweredOrHandedOff: a request no route takes is answered
// 404 on the fast path when it has no body; with a body it goes to
// net/http, which answers and skips the body.
func TestNoRouteAnsweredOrHandedOff(t *testing.T) {
	rig := proxytest.New(t, proxytest.Config{Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{echo(t)}}}, FastPath: true,
		Routes: []route.Route{{Host: "app.example", Origin: "app"}}})
	f := serveFront(t, rig, downstream(), nil, false)
	c := dial(t, f.addr)
	c.send("GET /x HTTP/1.1\r\nHost: nowhere\r\n\r\n" + get("/y"))
	if resp, body := c.response("GET"); resp.StatusCode != 404 || body != "Not Found: no_route\n" || resp.Header.Get("X-Corput-Error") != "no_route" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if resp, _ := c.response("GET"); resp.StatusCode != 200 || f.Handoffs() != 0 {
		t.Fatalf("the next request: %d, %d handoffs", resp.StatusCode, f.Handoffs())
	}
	c.send("POST /x HTTP/1.1\r\nHost: nowhere\r\nContent-Length: 3\r\n\r\nabc" + get("/z"))
	if resp, _ := c.response("POST"); resp.StatusCode != 404 {
		t.Fatalf("a body to no route: %d", resp.StatusCode)
	}
	if resp, body := c.response("GET"); resp.StatusCode != 200 || body != "HTTP/1.1 GET /z http 0 " || f.Handoffs() != 1 {
		t.Fatalf("after it: %d %q, %d handoffs", resp.StatusCode, body, f.Handoffs())
	}
}

// TestBodyBookkeeping: a request body forwarded (part of it read from the
// socket after the head), or skipped while wholly in the buffer, leaves
// the connection usable; one left partly in the socket closes it, and the
// answer says so.
func TestBodyBookkeeping(t *testing.T) {
	live := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d %s", len(b), b)
	}))
	rig := proxytest.New(t, proxytest.Config{FastPath: true,
		Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{live}}, {Name: "down", Endpoints: []string{proxytest.Dead(t)},
			Edit: func(oc *config.Origin) { oc.Retry.On = nil }}},
		Routes: []route.Route{{Host: "down.example", Origin: "down"}, {Origin: "app"}}})
	f := serveFront(t, rig, downstream(), nil, false)

	t.Run("forwarded, read from the socket", func(t *testing.T) {
		c := dial(t, f.addr)
		c.send("POST /slowbody HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n01234")
		time.Sleep(50 * time.Millisecond) // the fast path has read the head and waits for the rest
		c.send("56789")
		if resp, body := c.response("POST"); resp.StatusCode != 200 || body != "10 0123456789" || resp.Close {
			t.Fatalf("%d %q close %v", resp.StatusCode, body, resp.Close)
		}
		c.send(get("/next"))
		if _, body := c.response("GET"); body != "0 " {
			t.Fatalf("the next request: %q", body)
		}
	})
	t.Run("skipped, wholly buffered", func(t *testing.T) {
		c := dial(t, f.addr)
		c.send("POST /x HTTP/1.1\r\nHost: down.example\r\nContent-Length: 3\r\n\r\nabc" + get("/next"))
		if resp, _ := c.response("POST"); resp.StatusCode != 502 || resp.Close {
			t.Fatalf("%d close %v, want 502 kept alive", resp.StatusCode, resp.Close)
		}
		if resp, body := c.response("GET"); resp.StatusCode != 200 || body != "0 " {
			t.Fatalf("the next request: %d %q", resp.StatusCode, body)
		}
	})
	t.Run("left in the socket", func(t *testing.T) {
		c := dial(t, f.addr)
		c.send("POST /x HTTP/1.1\r\nHost: down.example\r\nContent-Length: 10\r\n\r\n01234")
		resp, _ := c.response("POST")
		if resp.StatusCode != 502 || !resp.Close {
			t.Fatalf("%d close %v, want 502 with Connection: close", resp.StatusCode, resp.Close)
		}
		if !c.closed() {
			t.Fatal("the connection stays open with a body half read")
		}
	})
	t.Run("the client leaves mid-body", func(t *testing.T) {
		before := f.rig.Served("4xx")
		c := dial(t, f.addr)
		c.send("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n01234")
		time.Sleep(50 * time.Millisecond) // the fast path waits for the rest
		c.Close()
		f.rig.WaitServed(t, "4xx", before+1) // counted as 499
		// The 3 answered before: the broken one was not answered.
		f.rig.WaitServed(t, "2xx", 3)
	})
	if f.Handoffs() != 0 {
		t.Fatalf("%d handoffs", f.Handoffs())
	}
}

// TestConnectionClose: a request that says Connection: close is answered
// with it, and the connection closes.
func TestConnectionClose(t *testing.T) {
	f := serveFront(t, fastRig(t, echo(t)), downstream(), nil, false)
	c := dial(t, f.addr)
	c.send("GET /bye HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n" + get("/never"))
	if resp, body := c.response("GET"); !resp.Close || body != "HTTP/1.1 GET /bye http 0 " {
		t.Fatalf("close %v %q", resp.Close, body)
	}
	if !c.closed() {
		t.Fatal("the connection stays open")
	}
}

// waiting is a front with one connection whose request waits at an origin
// that does not answer.
func waiting(t *testing.T) (*front, *conn, *proxytest.Thinker) {
	o := proxytest.Think(t)
	f := serveFront(t, fastRig(t, o.Addr), downstream(), nil, false)
	c := dial(t, f.addr)
	c.send(get("/think"))
	wait(t, o.Arrived)
	return f, c, o
}

// TestClientLeavesWhileTheOriginThinks: a client that leaves once its
// exchange has waited past watchAfter cuts it: the origin's request is
// cancelled.
func TestClientLeavesWhileTheOriginThinks(t *testing.T) {
	f, c, o := waiting(t)
	c.Close()
	wait(t, o.Cancelled)
	f.rig.WaitServed(t, "4xx", 1) // 499
}

// TestPipelinedDuringTheWatch: a request the client pipelines while the
// watch reads its connection is kept, and served next.
func TestPipelinedDuringTheWatch(t *testing.T) {
	arrived, proceed := make(chan struct{}, 2), make(chan struct{})
	o := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-proceed
		}
		io.WriteString(w, r.URL.Path)
	}))
	f := serveFront(t, fastRig(t, o), downstream(), nil, false)
	c := dial(t, f.addr)
	c.send(get("/slow"))
	wait(t, arrived)
	time.Sleep(3 * watchAfter) // the watch is reading the connection
	c.send(get("/second"))
	time.Sleep(watchAfter) // and reads the second request
	close(proceed)
	for _, want := range []string{"/slow", "/second"} {
		if resp, body := c.response("GET"); resp.StatusCode != 200 || body != want {
			t.Fatalf("%d %q, want %q", resp.StatusCode, body, want)
		}
	}
}

// TestTimeouts: read_header_timeout closes a connection that has not sent
// a whole head in time, new or started; idle_timeout one that sends no
// next request.
func TestTimeouts(t *testing.T) {
	d := downstream()
	d.ReadHeaderTimeout, d.IdleTimeout = 100*time.Millisecond, 150*time.Millisecond
	f := serveFront(t, fastRig(t, echo(t)), d, nil, false)
	for _, tc := range []struct {
		name, send string
		answers    int
	}{
		{"silent", "", 0},
		{"a head started", "GET / HTTP/1.1\r\nHost: a\r\n", 0},
		{"idle after a request", get("/1"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, f.addr)
			if tc.send != "" {
				c.send(tc.send)
			}
			for range tc.answers {
				c.response("GET")
			}
			if !c.closed() {
				t.Fatal("the connection stays open")
			}
		})
	}
}

// TestShutdown: Shutdown closes idle connections at once, lets an active
// request finish (its connection then closes), shuts down the handed-off
// connections alongside, and makes Serve return http.ErrServerClosed.
func TestShutdown(t *testing.T) {
	arrived, proceed := make(chan struct{}), make(chan struct{})
	o := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			close(arrived)
			<-proceed
		}
		io.WriteString(w, "done")
	}))
	f := serveFront(t, fastRig(t, o), downstream(), nil, false)
	idle, busy, handed := dial(t, f.addr), dial(t, f.addr), dial(t, f.addr)
	idle.send(get("/warm"))
	idle.response("GET")
	handed.send("GET /h HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n")
	handed.response("GET")
	busy.send(get("/busy"))
	wait(t, arrived)
	shut := make(chan error, 1)
	go func() { shut <- f.Shutdown(context.Background()) }()
	if !idle.closed() {
		t.Fatal("an idle connection stays open during Shutdown")
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a request in flight", err)
	case <-time.After(20 * time.Millisecond):
	}
	for !f.closing.Load() {
		time.Sleep(time.Millisecond)
	}
	close(proceed)
	// The answer says the connection ends, as net/http's does during
	// Shutdown: a keep-alive client must not send another request on it.
	if resp, body := busy.response("GET"); resp.StatusCode != 200 || body != "done" || !resp.Close {
		t.Fatalf("the request in flight: %d %q close %v, want 200 done with Connection: close", resp.StatusCode, body, resp.Close)
	}
	if !busy.closed() {
		t.Fatal("the busy connection stays open after its request")
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if !handed.closed() {
		t.Fatal("a handed-off connection stays open after Shutdown")
	}
	if _, err := net.Dial("tcp", f.addr); err == nil {
		t.Fatal("the listener still accepts")
	}
}

// TestShutdownTimesOut: a Shutdown whose context ends first closes every
// connection and says so.
// TestShutdownServesANewConnectionsFirstRequest: a connection accepted
// just before Shutdown, whose first request arrives after Shutdown began,
// is served (within newConnGrace, as net/http's Shutdown treats a new
// connection), and Shutdown returns once it is.
func TestShutdownServesANewConnectionsFirstRequest(t *testing.T) {
	o := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "done") }))
	f := serveFront(t, fastRig(t, o), downstream(), nil, false)
	fresh := dial(t, f.addr)
	for f.trackedConns() < 1 {
		time.Sleep(time.Millisecond)
	}
	shut := make(chan error, 1)
	go func() { shut <- f.Shutdown(context.Background()) }()
	for !f.closing.Load() {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // Shutdown has looked at the connections at least once
	fresh.send(get("/late"))
	if resp, body := fresh.response("GET"); resp.StatusCode != 200 || body != "done" || !resp.Close {
		t.Fatalf("the new connection's first request: %d %q close %v, want 200 done with Connection: close", resp.StatusCode, body, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func TestShutdownTimesOut(t *testing.T) {
	f, c, _ := waiting(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := f.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want the context's deadline", err)
	}
	if !c.closed() {
		t.Fatal("the busy connection stays open after a Shutdown that timed out")
	}
}

// TestCloseCutsActiveConnections: Close closes every connection at once.
func TestCloseCutsActiveConnections(t *testing.T) {
	f, c, _ := waiting(t)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if !c.closed() {
		t.Fatal("an active connection stays open after Close")
	}
}

// TestShutdownBeforeServe: a Server shut down before it served returns
// http.ErrServerClosed from Serve at once, and closes the listener.
func TestShutdownBeforeServe(t *testing.T) {
	rig := fastRig(t, proxytest.Dead(t))
	s := New(Config{Handler: rig.Handler, Downstream: downstream()}, &http.Server{})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Fatal("the listener is still open")
	}
}

// TestHTTPS: TLS ends in the fast path. HTTPS/1.1 is served by the fast
// path's loop (the origin told https); a request it does not serve is
// handed on with the connection's TLS state; h2 by ALPN goes to net/http
// as the *tls.Conn; a client that does not speak TLS is dropped. With
// HandOffAll every connection goes to net/http after the handshake.
func TestHTTPS(t *testing.T) {
	srvTLS, clientTLS := serverTLS(t)
	o := echo(t)
	for _, tc := range []struct {
		name     string
		all      bool
		protos   []string
		chunked  bool
		proto    int // the client's protocol's major version
		handoffs int64
	}{
		{"HTTPS/1.1 on the fast path", false, []string{"http/1.1"}, false, 1, 0},
		{"HTTPS/1.1 handed on", false, []string{"http/1.1"}, true, 1, 1},
		{"h2 by ALPN", false, []string{"h2", "http/1.1"}, false, 2, 1},
		{"HandOffAll", true, []string{"http/1.1"}, false, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := serveFront(t, fastRig(t, o), downstream(), srvTLS, tc.all)
			tr := &http.Transport{TLSClientConfig: clientTLS(tc.protos...), ForceAttemptHTTP2: tc.proto == 2}
			c := &http.Client{Transport: tr}
			defer c.CloseIdleConnections()
			for i := range 2 {
				var body io.Reader = strings.NewReader("abc")
				if tc.chunked {
					body = io.MultiReader(strings.NewReader("abc")) // no length: sent chunked
				}
				resp, err := c.Post("https://"+f.addr+"/s", "text/plain", body)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.ProtoMajor != tc.proto || string(b) != "HTTP/1.1 POST /s https 3 abc" {
					t.Fatalf("%d: %s %q", i, resp.Proto, b)
				}
			}
			if n := f.Handoffs(); n != tc.handoffs {
				t.Fatalf("%d connections handed off, want %d", n, tc.handoffs)
			}
		})
	}
	t.Run("not TLS", func(t *testing.T) {
		f := serveFront(t, fastRig(t, o), downstream(), srvTLS, false)
		c := dial(t, f.addr)
		c.send(get("/plain"))
		for {
			// The handshake fails: whatever TLS alert the server sends,
			// the connection then ends.
			if _, err := c.br.ReadByte(); err != nil {
				break
			}
		}
	})
	t.Run("a handshake that never comes", func(t *testing.T) {
		d := downstream()
		d.ReadHeaderTimeout = 100 * time.Millisecond
		f := serveFront(t, fastRig(t, o), d, srvTLS, false)
		c := dial(t, f.addr)
		if !c.closed() {
			t.Fatal("a connection that never starts its handshake stays open")
		}
	})
}
