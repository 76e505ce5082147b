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
// refuse (request smuggling, RFC 9112 §6.3 and §11.2), so that net/http's
// path never accepts what the fast path's parser refused — one grammar for
// every way a request arrives:
//
//   - Content-Length together with Transfer-Encoding (net/http silently
//     drops the Content-Length);
//   - more than one Content-Length, even with equal values (net/http keeps
//     one);
//   - Transfer-Encoding on an HTTP/1.0 request (net/http ignores it);
//   - obs-fold, a header line starting with a space or tab (net/http joins
//     it to the previous header);
//   - a head line ending in a bare LF, or a bare CR in the head (net/http
//     takes a bare LF as a line's end: "Dummy: x\nContent-Length: 23"
//     would be two fields there);
//   - a second empty line before a request line (the first is taken out
//     of the bytes net/http reads, as RFC 9112 §2.2 advises);
//   - an HTTP version other than 1.0 and 1.1;
//   - chunked framing that breaks, or a chunk line or trailer outside the
//     strict grammar (h1.Chunks: "2;", "a ", an unclosed quoted
//     extension), within the bytes already received.
//
// The grammar is h1.Guard's (internal/h1/guard.go): it follows the message
// framing byte by byte, heads line by line and bodies by their
// Content-Length or chunk sizes, so pipelined requests are each checked.
// Its verdict is the index of the first request on the connection that
// must not be served; the handler counts the requests it is given (admit)
// and refuses that one and every later one with 400 and Connection: close.
// A verdict on a request already admitted (its body's chunk lines or
// trailers) ends its body with an error (checkedBody): the exchange aborts
// the upstream request, so the origin never sees the rest. A guarded
// connection keeps one fixed-size h1.Guard and allocates nothing per
// request.
//
// A connection whose first line cannot be a request (h1.NotHTTP: not an
// HTTP/1.x request line, nor the start of the HTTP/2 preface) is answered
// 400 bad_request and closed as soon as the line is complete, however
// short it is.
//
// After an HTTP/2 preface (h2c) or a request naming Upgrade the guard steps
// aside: the connection then carries frames or a tunnel, and a declined
// upgrade closes the connection (serve sets Connection: close). Every
// HTTP/1.1 connection net/http serves is under the guard: on the cleartext
// listener with the fast path off (GuardListener), and everything the
// fast path hands on, in cleartext or after its TLS handshake (Guard).

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
	for {
		n, err := c.Conn.Read(p)
		if n == 0 {
			return n, err
		}
		// The guard sees every byte before net/http does, and takes out
		// the one empty line it ignores before a request line.
		n, bad, refused := c.g.Filter(p[:n])
		if refused {
			c.badFrom.CompareAndSwap(math.MaxInt64, bad)
		}
		if n == 0 && err == nil {
			continue // all of it was the ignored line: read on
		}
		if !c.started && n > 0 {
			c.judge(p[:n])
		}
		return n, err
	}
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

// current is the index of the request being served on c (its handler
// call's); any value on a nil c.
func (c *framingConn) current() int64 {
	if c == nil {
		return 0
	}
	return c.served - 1
}

// refused reports whether the guard has refused request idx on c (false
// on a nil c): its body or trailers broke after it was admitted.
func (c *framingConn) refused(idx int64) bool {
	return c != nil && c.badFrom.Load() <= idx
}
