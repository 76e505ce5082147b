package fastpath

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/httpserve"
	"github.com/corput/corput/internal/proxy/proxytest"
	"github.com/corput/corput/internal/testcert"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// front is a fast-path Server on a loopback listener, handing off to
// net/http's server with the gateway's handler, as Gateway.Start wires
// them.
type front struct {
	*Server
	addr string
	rig  *proxytest.Rig
	done chan error // Serve's return
}

// downstream is the listener's settings the tests serve with: the
// defaults, read_header_timeout and idle_timeout short enough to wait for.
func downstream() config.Downstream {
	d := config.Default().Downstream
	d.ReadHeaderTimeout, d.IdleTimeout = 2*time.Second, 2*time.Second
	return d
}

// serveFront starts the fast path over rig; tlsConf (nil: cleartext)
// makes the listener HTTPS. It is closed when the test ends.
func serveFront(t *testing.T, rig *proxytest.Rig, d config.Downstream, tlsConf *tls.Config, handOffAll bool) *front {
	t.Helper()
	slow := &http.Server{
		Handler: httpserve.New(rig.Handler), ConnContext: httpserve.ConnContext,
		ReadHeaderTimeout: d.ReadHeaderTimeout, IdleTimeout: d.IdleTimeout, MaxHeaderBytes: d.MaxHeaderBytes,
		Protocols: new(http.Protocols), TLSConfig: tlsConf,
	}
	slow.Protocols.SetHTTP1(true)
	if tlsConf == nil {
		slow.Protocols.SetUnencryptedHTTP2(true)
	} else {
		slow.Protocols.SetHTTP2(true)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &front{Server: New(Config{Handler: rig.Handler, Downstream: d, TLS: tlsConf, HandOffAll: handOffAll}, slow),
		addr: ln.Addr().String(), rig: rig, done: make(chan error, 1)}
	go func() { f.done <- f.Serve(ln) }()
	t.Cleanup(func() {
		f.Close()
		if err := <-f.done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return f
}

// fastRig is a rig whose every request goes to one origin at addr, the
// fast path on.
func fastRig(t *testing.T, addr string) *proxytest.Rig {
	return proxytest.New(t, proxytest.Config{Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{addr}}}, FastPath: true})
}

// echo is an origin that answers each request with what it saw of it:
// method, target, X-Forwarded-Proto, the body's length and its bytes.
func echo(t *testing.T) string {
	return proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(599)
			return
		}
		fmt.Fprintf(w, "%s %s %s %s %d %s", r.Proto, r.Method, r.URL.RequestURI(), r.Header.Get("X-Forwarded-Proto"), len(b), b)
	}))
}

// conn is a raw client connection to a front.
type conn struct {
	t *testing.T
	net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, addr string) *conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &conn{t: t, Conn: c, br: bufio.NewReader(c)}
}

func (c *conn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.Conn, s); err != nil {
		c.t.Fatal(err)
	}
}

// response reads one final response (past any 1xx) and its whole body.
func (c *conn) response(method string) (*http.Response, string) {
	c.t.Helper()
	resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
	for err == nil && resp.StatusCode < 200 {
		resp, err = http.ReadResponse(c.br, &http.Request{Method: method})
	}
	if err != nil {
		c.t.Fatalf("reading a response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("reading a response's body: %v", err)
	}
	return resp, string(b)
}

// closed reports whether the server closed the connection: the next read
// ends without a byte.
func (c *conn) closed() bool {
	c.t.Helper()
	b, err := c.br.ReadByte()
	if err == nil {
		c.t.Fatalf("read %q, want the connection closed", b)
	}
	return errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset")
}

// rawHead is a response head as it came on the wire.
func (c *conn) rawHead() string {
	c.t.Helper()
	var b bytes.Buffer
	for {
		line, err := c.br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			c.t.Fatalf("head so far %q: %v", b.String(), err)
		}
		if line == "\r\n" {
			return b.String()
		}
	}
}

func get(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: app.example\r\n\r\n" }

func post(path, body string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: app.example\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
}

// serverTLS is an HTTPS listener's TLS with a fresh self-signed
// certificate for localhost, and a client's that trusts it and offers
// protos by ALPN.
func serverTLS(t *testing.T) (srv *tls.Config, client func(protos ...string) *tls.Config) {
	t.Helper()
	cert, err := testcert.SelfSigned("localhost")
	if err != nil {
		t.Fatal(err)
	}
	srv = &tls.Config{Certificates: []tls.Certificate{cert.TLS()}, NextProtos: []string{"h2", "http/1.1"}}
	return srv, func(protos ...string) *tls.Config {
		return &tls.Config{RootCAs: cert.Pool(), ServerName: "localhost", NextProtos: protos}
	}
}

// wait waits for ch to be closed or sent to, at most 10 s.
func wait(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("waited 10 s for the origin")
	}
}

// trackedConns is how many connections the server tracks.
func (s *Server) trackedConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
