package httpserve

import (
	"bytes"
	"math"
	"net"
	"sync/atomic"

	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
)

// The framing guard checks every HTTP/1.x request head on the raw bytes,
// before net/http parses it, for what net/http accepts but a gateway must
// refuse (request smuggling, RFC 9112 §6.3 and §11.2):
//
//   - Content-Length together with Transfer-Encoding (net/http silently
//     drops the Content-Length);
//   - more than one Content-Length, even with equal values (net/http keeps
//     one);
//   - Transfer-Encoding on an HTTP/1.0 request (net/http ignores it);
//   - obs-fold, a header line starting with a space or tab (net/http joins
//     it to the previous header);
//   - an HTTP version other than 1.0 and 1.1;
//   - chunked framing that breaks (bad size line, data overrunning its size)
//     within the bytes already received.
//
// The grammar is h1.Guard's (internal/h1/guard.go): it follows the message
// framing byte by byte, heads line by line and bodies by their
// Content-Length or chunk sizes, so pipelined requests are each checked.
// Its verdict is the index of the first request on the connection that
// must not be served; the handler counts the requests it is given (admit)
// and refuses that one and every later one with 400 and Connection: close.
// A guarded connection keeps one fixed-size h1.Guard and allocates nothing
// per request.
//
// A connection whose first line cannot be a request (h1.NotHTTP: not an
// HTTP/1.x request line, nor the start of the HTTP/2 preface) is answered
// 400 bad_request and closed as soon as the line is complete, however
// short it is.
//
// After an HTTP/2 preface (h2c) or a request naming Upgrade the guard steps
// aside: the connection then carries frames or a tunnel, and a declined
// upgrade closes the connection (serve sets Connection: close). The guard
// runs on the cleartext listener only: under TLS net/http reads the
// plaintext itself, so CL+TE over HTTPS/1.1 is handled as net/http does
// (Content-Length dropped, the body forwarded chunked).

// GuardListener wraps every connection ln accepts in the framing guard.
func GuardListener(ln net.Listener) net.Listener { return guardListener{ln} }

type guardListener struct{ net.Listener }

func (l guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return guard(c), nil
}

// Guard puts c under the framing guard: a connection the fast path hands
// to net/http.
func Guard(c net.Conn) net.Conn { return guard(c) }

// guard puts c under the framing guard.
func guard(c net.Conn) *framingConn {
	fc := &framingConn{Conn: c}
	fc.badFrom.Store(math.MaxInt64)
	return fc
}

// framingConn is a downstream connection under the framing guard.
type framingConn struct {
	net.Conn
	g       h1.Guard     // touched only by Read: net/http never reads a connection concurrently
	badFrom atomic.Int64 // index of the first request to refuse; MaxInt64 while none
	served  int64        // requests handed to the handler; touched only by its (sequential) calls

	// The connection's first bytes, until they are judged (h1.NotHTTP).
	// Touched only by Read.
	start   [16]byte
	startN  int
	started bool
}

func (c *framingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if bad, refused := c.g.Scan(p[:n]); refused {
			c.badFrom.CompareAndSwap(math.MaxInt64, bad)
		}
		if !c.started {
			c.judge(p[:n])
		}
	}
	return n, err
}

// judge looks at the connection's first bytes. A first line that cannot
// be a request (h1.NotHTTP) is answered 400 and the connection closed at
// once: net/http's server, which also speaks h2c, would wait for the
// HTTP/2 preface's 14 bytes before it judged a shorter line. net/http
// then reads a closed connection and lets it go without a word.
func (c *framingConn) judge(b []byte) {
	c.startN += copy(c.start[c.startN:], b)
	first := c.start[:c.startN]
	switch {
	case h1.NotHTTP(first):
		c.started = true
		_, _ = c.Conn.Write(forward.BadRequest.Raw())
		c.Conn.Close()
	case c.startN == len(c.start) || bytes.IndexByte(first, '\n') >= 0:
		c.started = true // a line net/http judges at once, or a request
	}
}

// CloseWrite keeps net/http's graceful half-close working.
func (c *framingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// admit is called once per HTTP/1.x request the handler receives on c, in
// order; false means the request's framing was refused.
func (c *framingConn) admit() bool {
	i := c.served
	c.served++
	return i < c.badFrom.Load()
}
