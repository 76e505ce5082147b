package gateway

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	testorigin "github.com/corput/corput/internal/origin"
)

// listenerKind is one way a client reaches the gateway: cleartext or
// HTTPS, served by the fast path or by net/http's server alone.
type listenerKind struct {
	name      string
	tls, fast bool
}

var listenerKinds = []listenerKind{
	{"cleartext fast path", false, true},
	{"cleartext net/http", false, false},
	{"https fast path", true, true},
	{"https net/http", true, false},
}

// listenerGateway starts a gateway of kind in front of origins, with the
// downstream keys given.
func listenerGateway(t *testing.T, kind listenerKind, downstreamKeys string, origins []*testorigin.Server) (g *Gateway, dial func() net.Conn) {
	t.Helper()
	top := fmt.Sprintf("downstream: {fast_path: %v%s}\n", kind.fast, downstreamKeys)
	var tc *tls.Config
	if kind.tls {
		certFile, keyFile, roots := selfSignedFiles(t)
		top += fmt.Sprintf("tls: {cert: %q, key: %q}\n", certFile, keyFile)
		tc = &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{"http/1.1"}}
	}
	g = startGateway(t, top+cfgText(1, ""), origins, Options{})
	return g, func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", g.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if tc != nil {
			tconn := tls.Client(c, tc)
			tconn.SetDeadline(time.Now().Add(10 * time.Second))
			if err := tconn.Handshake(); err != nil {
				t.Fatalf("TLS handshake: %v", err)
			}
			c = tconn
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
}

// answer sends raw on a new connection and reads one response: its
// status, and whether the gateway then closed the connection.
func answer(t *testing.T, dial func() net.Conn, raw string) (status int, closed bool) {
	t.Helper()
	c := dial()
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response to %q: %v", raw, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = br.ReadByte()
	return resp.StatusCode, err != nil && !isTimeout(err)
}

// The reliability suite's malformed inputs get the same answer on the
// cleartext and the HTTPS listener, served by the fast path or by net/http:
// the status the suite asks for, the connection closed, nothing forwarded.
func TestHostileInputAlikeOnEveryListener(t *testing.T) {
	for _, kind := range listenerKinds {
		t.Run(kind.name, func(t *testing.T) {
			origins := startOrigins(t, 1, testorigin.Options{})
			_, dial := listenerGateway(t, kind, ", read_header_timeout: 300ms, max_header_bytes: 4096", origins)
			for _, set := range [][]hostileCase{smugglingCases, requestLineCases} {
				for _, c := range set {
					status, closed := answer(t, dial, c.raw)
					if status != c.want || !closed {
						t.Errorf("%s: %d, closed %v; want %d and the connection closed", c.name, status, closed, c.want)
					}
				}
			}
			if got := origins[0].Stats().Total().Total(); got != 0 {
				t.Fatalf("the origin saw %d hostile requests, want 0", got)
			}
			if status, _ := answer(t, dial, "GET /after HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n"); status != 200 {
				t.Fatalf("after the hostile input: %d", status)
			}
		})
	}
}

// A short line that cannot be HTTP/1.x is answered 400 at once, though
// read_header_timeout is an hour: the listener does not wait for the
// HTTP/2 preface's 14 bytes once the line rules it out.
func TestGarbageIsAnsweredAtOnce(t *testing.T) {
	for _, kind := range listenerKinds {
		t.Run(kind.name, func(t *testing.T) {
			_, dial := listenerGateway(t, kind, ", read_header_timeout: 1h", startOrigins(t, 1, testorigin.Options{}))
			for _, raw := range []string{"GARBAGE\r\n\r\n", "GET /\r\n\r\n", "X\n"} {
				done := make(chan [2]any, 1)
				go func() {
					status, closed := answer(t, dial, raw)
					done <- [2]any{status, closed}
				}()
				select {
				case got := <-done:
					if got[0] != 400 || got[1] != true {
						t.Errorf("%q: %v, closed %v; want 400 and the connection closed", raw, got[0], got[1])
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%q: no answer within 5 s", raw)
				}
			}
		})
	}
}

// Over HTTPS the fast path serves HTTP/1.1 clients itself (nothing is
// handed to net/http) and tells the origin X-Forwarded-Proto: https; an h2
// client is served by net/http and says https too.
func TestHTTPSServedByTheFastPath(t *testing.T) {
	b := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Forwarded-Proto"))
	}))
	certFile, keyFile, roots := selfSignedFiles(t)
	g := gatewayTo(t, 1, fmt.Sprintf("tls: {cert: %q, key: %q}\n", certFile, keyFile), upstreamKeys("h1", b), b.addr)
	for _, kind := range []string{dsTLSH1, dsTLSH2} {
		c := downstream(t, kind, roots)
		for range 3 {
			resp, body := get(t, c, scheme(kind)+g.Addr()+"/p")
			checkProto(t, kind, resp)
			if resp.StatusCode != 200 || body != "https" {
				t.Fatalf("%s: %d %q, want 200 https", kind, resp.StatusCode, body)
			}
		}
		if h := g.handoffs(); kind == dsTLSH1 && h != 0 {
			t.Fatalf("%d HTTPS/1.1 connections handed to net/http: the fast path did not serve them", h)
		}
	}
}
