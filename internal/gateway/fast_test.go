package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/fastpath"
	"github.com/corput/corput/internal/forward"
)

// echoOrigin answers by path with every response shape the fast path
// relays: a dump of the request it received (/echo, /post), chunked with
// trailers, 204, 304, a close-delimited body, a head larger than the
// upstream read buffer, and a 103 before the 200.
func echoOrigin(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(echoHandler())
	t.Cleanup(srv.Close)
	return srv
}

// echoH2COrigin is echoOrigin over h2c (cleartext HTTP/2 with prior
// knowledge), where the paths that hijack the connection do not apply.
func echoH2COrigin(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(echoHandler())
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			w.Header().Set("Trailer", "X-Sum")
			w.Header().Set("Content-Type", "text/plain")
			for i := 0; i < 3; i++ {
				fmt.Fprintf(w, "part %d\n", i)
				w.(http.Flusher).Flush()
			}
			w.Header().Set("X-Sum", "3 parts")
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
		case "/notmod":
			w.Header().Set("Etag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
		case "/eof":
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			brw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Framing: eof\r\n\r\nthe body ends when the origin closes")
			brw.Flush()
			c.Close()
		case "/bighead":
			w.Header().Set("X-Big", strings.Repeat("b", 6000))
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "big head\n")
		case "/early":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "after a 103\n")
		case "/unasked101":
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: nonsense\r\nConnection: Upgrade\r\n\r\nraw bytes")
			brw.Flush()
			c.Close()
		case "/rawchunks", "/http10", "/hopresp":
			// Heads net/http's server would not write: chunk extensions
			// and a trailer, HTTP/1.0 ended by close, a field named in
			// Connection.
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			switch r.URL.Path {
			case "/rawchunks":
				brw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: v\r\n\r\n")
			case "/http10":
				brw.WriteString("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nan HTTP/1.0 body")
			case "/hopresp":
				brw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: X-Secret, close\r\nX-Secret: s\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\nok")
			}
			brw.Flush()
			c.Close()
		case "/status503":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "busy\n")
		default:
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "%s %s %s\nhost=%s\n", r.Method, r.RequestURI, r.Proto, r.Host)
			keys := make([]string, 0, len(r.Header))
			for k := range r.Header {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				fmt.Fprintf(w, "%s=%q\n", k, r.Header[k])
			}
			fmt.Fprintf(w, "cl=%d body=%q\n", r.ContentLength, body)
		}
	})
}

// clientView is what a raw client got for one request.
type clientView struct {
	Status  int
	Header  http.Header
	Body    string
	Trailer http.Header
	Err     string
}

// sendAll writes each request on one keep-alive connection and reads its
// response with http.ReadResponse.
func sendAll(t *testing.T, addr string, reqs []string) []clientView {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	var out []clientView
	for _, raw := range reqs {
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatalf("write %q: %v", raw, err)
		}
		method := raw[:strings.IndexByte(raw, ' ')]
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			out = append(out, clientView{Err: err.Error()})
			return out
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		ex := clientView{Status: resp.StatusCode, Header: resp.Header, Body: string(body), Trailer: resp.Trailer}
		if err != nil {
			ex.Err = err.Error()
		}
		ex.Header.Del("Date")
		out = append(out, ex)
	}
	return out
}

// fastYAML is a gateway on one HTTP/1.1 origin, with the fast path on or
// off.
func fastYAML(addr string, fast bool) string { return protoYAML(addr, "h1", fast) }

// protoYAML is a gateway on one origin speaking protocol, with the fast
// path on or off.
func protoYAML(addr, protocol string, fast bool) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 2
downstream: {fast_path: %v}
routes: [{origin: app}]
origins:
  - name: app
    protocol: %s
    endpoints: [{address: %q}]
`, fast, protocol, addr)
}

func startFastGateway(t *testing.T, addr string, fast bool) *Gateway {
	t.Helper()
	return startProtoGateway(t, addr, "h1", fast)
}

func startProtoGateway(t *testing.T, addr, protocol string, fast bool) *Gateway {
	t.Helper()
	g := newGateway(t, protoYAML(addr, protocol, fast), Options{})
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, g)
	return g
}

// handoffs is how many connections the fast path gave to net/http.
func (g *Gateway) handoffs() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if fs, ok := g.srv.(*fastpath.Server); ok {
		return fs.Handoffs()
	}
	return -1
}

// fastReqs are the requests TestFastPathMatchesNetHTTP sends: every
// shape the fast path takes, and every response shape echoOrigin has.
var fastReqs = []string{
	"GET /echo?a=1&b=%2F HTTP/1.1\r\nHost: gw.test\r\nx-lower: v\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\nProxy-Connection: x\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil\r\nUser-Agent: t/1\r\nAccept: */*\r\nAccept: text/plain\r\n\r\n",
	"HEAD /echo HTTP/1.1\r\nHost: gw.test\r\n\r\n",
	"GET /echo HTTP/1.1\r\nHost: gw.test\r\nTE: trailers, deflate;q=0.5\r\nConnection: TE\r\n\r\n",
	"POST /post HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 5\r\n\r\nhello",
	"POST /post HTTP/1.1\r\nHost: gw.test\r\n\r\n",
	"PUT /post HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 0\r\n\r\n",
	"GET /chunked HTTP/1.1\r\nHost: gw.test\r\nTE: trailers\r\n\r\n",
	"GET /nocontent HTTP/1.1\r\nHost: gw.test\r\n\r\n",
	"GET /notmod HTTP/1.1\r\nHost: gw.test\r\n\r\n",
	"GET /bighead HTTP/1.1\r\nHost: gw.test\r\n\r\n",
	"GET /early HTTP/1.1\r\nHost: gw.test\r\n\r\n",
	"GET /status503 HTTP/1.1\r\nHost: gw.test\r\n\r\n",
	"GET /unasked101 HTTP/1.1\r\nHost: gw.test\r\n\r\n",
	"GET /rawchunks HTTP/1.1\r\nHost: gw.test\r\n\r\n",
	"GET /echo;p=1/x@y:z!$&'()*+,=?q=a%20b&x=[1]&y=? HTTP/1.1\r\nHost: gw.test\r\nProxy-Authorization: Basic eA==\r\n\r\n",
	"OPTIONS /echo HTTP/1.1\r\nHost: gw.test\r\n\r\n",
	"PATCH /post HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}",
	"GET /echo HTTP/1.1\r\nHost: gw.test\r\n" + strings.Repeat("X-Many: v\r\n", 40) + "\r\n",
	"GET /http10 HTTP/1.1\r\nHost: gw.test\r\n\r\n",
	"GET /hopresp HTTP/1.1\r\nHost: gw.test\r\n\r\n",
	"DELETE /echo HTTP/1.1\r\nHost: GW.test:80\r\n\r\n",
	"GET /eof HTTP/1.1\r\nHost: gw.test\r\n\r\n",
	"GET /echo HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n",
}

// TestFastPathMatchesNetHTTP sends the same requests through a gateway
// with the fast path and one without, and requires what the client gets
// (status, fields but Date, body, trailers) and what the origin saw (the
// echoed method, target, Host and fields) to be the same — while the fast
// gateway hands nothing off.
func TestFastPathMatchesNetHTTP(t *testing.T) {
	origin := echoOrigin(t)
	addr := strings.TrimPrefix(origin.URL, "http://")
	reqs := fastReqs
	got := sameThroughBothPaths(t, addr, "h1", reqs)
	for i, r := range reqs {
		if strings.HasPrefix(r, "GET /unasked101 ") && (got[i].Status != http.StatusBadGateway || got[i].Header.Get("X-Corput-Error") != forward.UpstreamReset.String()) {
			t.Errorf("a 101 nobody asked for: %d %v, want 502 %s", got[i].Status, got[i].Header, forward.UpstreamReset.String())
		}
	}
	for i, r := range reqs {
		if strings.HasPrefix(r, "GET /hopresp ") && (got[i].Header.Get("X-Secret") != "" || got[i].Header.Get("Keep-Alive") != "") {
			t.Errorf("hop-by-hop response fields reached the client: %v", got[i].Header)
		}
		if strings.HasPrefix(r, "GET /rawchunks ") && (got[i].Body != "hello world" || got[i].Trailer.Get("X-T") != "v") {
			t.Errorf("chunked with an extension and a trailer: %+v", got[i])
		}
	}
	// A compliant client's "Connection: TE" does not cost gRPC its TE.
	if !strings.Contains(got[2].Body, `Te=["trailers"]`) {
		t.Errorf("TE: trailers with Connection: TE did not reach the origin:\n%s", got[2].Body)
	}
}

// sameThroughBothPaths sends reqs through a gateway with the fast path
// and one without, to the origin at addr speaking protocol, requires what
// the client gets to be the same while the fast gateway hands nothing off,
// and returns the fast path's answers.
func sameThroughBothPaths(t *testing.T, addr, protocol string, reqs []string) []clientView {
	t.Helper()
	fast := startProtoGateway(t, addr, protocol, true)
	slow := startProtoGateway(t, addr, protocol, false)
	got := sendAll(t, fast.Addr(), reqs)
	want := sendAll(t, slow.Addr(), reqs)
	if len(got) != len(reqs) || len(want) != len(reqs) {
		t.Fatalf("answered %d (fast) and %d (net/http) of %d requests: %+v", len(got), len(want), len(reqs), got)
	}
	for i := range reqs {
		g, w := got[i], want[i]
		// net/http's server sniffs a Content-Type the origin did not set;
		// every response above sets one but 204 and 304.
		if !reflect.DeepEqual(g, w) {
			t.Errorf("request %d %q:\n fast:     %+v\n net/http: %+v", i, strings.SplitN(reqs[i], "\r\n", 2)[0], g, w)
		}
	}
	if n := fast.handoffs(); n != 0 {
		t.Errorf("the fast path handed off %d connections, want 0: every request above is simple", n)
	}
	return got
}

// TestFastPathMatchesNetHTTPToH2Origins: the same comparison to an h2c
// origin, which the fast path serves on its own HTTP/2 streams (package
// h2) and net/http's path through RoundTrip: the origin sees the same
// request and the client the same response, trailers included.
func TestFastPathMatchesNetHTTPToH2Origins(t *testing.T) {
	origin := echoH2COrigin(t)
	// The paths that hijack the connection have no HTTP/2 form.
	hijacks := []string{"/eof", "/unasked101", "/rawchunks", "/http10", "/hopresp"}
	var reqs []string
	for _, r := range fastReqs {
		if !slices.ContainsFunc(hijacks, func(p string) bool { return strings.Contains(r, " "+p+" ") }) {
			reqs = append(reqs, r)
		}
	}
	reqs = append(reqs, "POST /post HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 40000\r\n\r\n"+strings.Repeat("p", 40000))
	got := sameThroughBothPaths(t, strings.TrimPrefix(origin.URL, "http://"), "h2c", reqs)
	for i, r := range reqs {
		if strings.HasPrefix(r, "GET /echo?a=1") && !strings.Contains(got[i].Body, "HTTP/2.0") {
			t.Errorf("not HTTP/2 to the origin: %+v", got[i])
		}
		if strings.HasPrefix(r, "GET /chunked ") && got[i].Trailer.Get("X-Sum") != "3 parts" {
			t.Errorf("the trailer lost: %+v", got[i])
		}
	}
}

// TestFastPathPipelinesAndHandsOffMidConnection writes requests back to
// back in one segment — a POST with its body among them — and then one the
// fast path does not take (chunked): every response comes back in order,
// and the connection is handed to net/http only at that last request.
func TestFastPathPipelinesAndHandsOffMidConnection(t *testing.T) {
	origin := echoOrigin(t)
	g := startFastGateway(t, strings.TrimPrefix(origin.URL, "http://"), true)
	c, err := net.Dial("tcp", g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "GET /echo?n=1 HTTP/1.1\r\nHost: gw.test\r\n\r\n"+
		"POST /post?n=2 HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 3\r\n\r\nabc"+
		"GET /echo?n=3 HTTP/1.1\r\nHost: gw.test\r\n\r\n")
	br := bufio.NewReader(c)
	for i, want := range []string{"GET /echo?n=1 ", "POST /post?n=2 ", "GET /echo?n=3 "} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i+1, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.HasPrefix(string(body), want) {
			t.Fatalf("response %d: %d %q, want 200 %q…", i+1, resp.StatusCode, body, want)
		}
		if i == 1 && !strings.Contains(string(body), `body="abc"`) {
			t.Errorf("the POST body did not arrive whole: %q", body)
		}
	}
	if n := g.handoffs(); n != 0 {
		t.Fatalf("handed off %d connections before any unusual request", n)
	}
	io.WriteString(c, "POST /post?n=4 HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n0\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `body="xyz"`) {
		t.Fatalf("chunked request after the hand-off: %d %q", resp.StatusCode, body)
	}
	if n := g.handoffs(); n != 1 {
		t.Errorf("handed off %d connections, want 1 (at the chunked request)", n)
	}
}

// TestFastPathLargeBodyAndNoRoute: a body above fastpath.BodyLimit goes to
// net/http; a request no route matches is answered 404 no_route on the
// fast path and the connection carries on.
func TestFastPathLargeBodyAndNoRoute(t *testing.T) {
	origin := echoOrigin(t)
	text := strings.Replace(fastYAML(strings.TrimPrefix(origin.URL, "http://"), true),
		"routes: [{origin: app}]", "routes: [{host: gw.test, origin: app}]", 1)
	g := newGateway(t, text, Options{})
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, g)
	big := strings.Repeat("z", fastpath.BodyLimit+1)
	got := sendAll(t, g.Addr(), []string{
		"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n",
		"GET /echo HTTP/1.1\r\nHost: gw.test\r\n\r\n",
		fmt.Sprintf("PUT /post HTTP/1.1\r\nHost: gw.test\r\nContent-Length: %d\r\n\r\n%s", len(big), big),
	})
	if len(got) != 3 {
		t.Fatalf("got %d responses: %+v", len(got), got)
	}
	if got[0].Status != 404 || got[0].Header.Get("X-Corput-Error") != forward.NoRoute.String() {
		t.Errorf("unrouted: %d %v", got[0].Status, got[0].Header)
	}
	if got[1].Status != 200 {
		t.Errorf("after a 404 the connection should carry on: %+v", got[1])
	}
	if got[2].Status != 200 || !strings.Contains(got[2].Body, fmt.Sprintf("cl=%d", len(big))) {
		t.Errorf("large body: %d %.200q", got[2].Status, got[2].Body)
	}
	if n := g.handoffs(); n != 1 {
		t.Errorf("handed off %d connections, want 1 (the large body)", n)
	}
}

// TestFastServeAfterShutdown: a Shutdown that runs before Serve (the
// gateway's serve goroutine had not started yet) must still stop it: Serve
// returns at once and closes its listener, or a later Shutdown waits for
// it forever.
func TestFastServeAfterShutdown(t *testing.T) {
	g := newGateway(t, fastYAML("127.0.0.1:1", true), Options{})
	fs := fastpath.New(g.fastConfig(), g.newServer())
	if err := fs.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown before Serve: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fs.Serve(ln) }()
	select {
	case err := <-done:
		if err != http.ErrServerClosed {
			t.Fatalf("Serve after Shutdown: %v, want http.ErrServerClosed", err)
		}
	case <-time.After(10 * time.Second):
		ln.Close()
		t.Fatal("Serve after Shutdown kept accepting")
	}
	if _, err := ln.Accept(); err == nil {
		t.Fatal("Serve left its listener open")
	}
}
