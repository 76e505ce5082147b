package upstream

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// h1Conn states. Ownership of the read side moves with the state: the
// RoundTrip caller (busy), a prober (probing), nobody (idle, broken).
const (
	h1Idle int32 = iota
	h1Busy
	h1Probing
	h1Broken
)

const (
	// drainLimit bounds how much of an unread response body Close drains
	// to keep the connection; only bytes already buffered are drained.
	drainLimit = 64 << 10
	// writeWait is how long a finished response waits for the request
	// body writer to report before the connection is given up (the body
	// may have been fully read by the origin a moment ago).
	writeWait = 50 * time.Millisecond
	// max1xx bounds informational responses before the final one.
	max1xx    = 8
	h1BufSize = 4 << 10
)

// h1Conn is an HTTP/1.1 client connection: one request at a time,
// written with Request.Write and read with http.ReadResponse.
type h1Conn struct {
	addr     string
	sock     *sockConn
	tls      *tls.Conn            // nil for cleartext
	tlsState *tls.ConnectionState // Response.TLS; nil for cleartext
	br       *bufio.Reader
	bw       *bufio.Writer
	bound    headBound // between the socket and br: bounds response heads
	maxHead  int       // Options.MaxResponseHeaderBytes
	state    atomic.Int32

	closeOnce   sync.Once
	probeBuf    [1]byte
	justChecked atomic.Bool // the last exchange ended checked (alive() at EOF) or clean (Raw.End); see Usable
	unprobed    atomic.Bool // handed out on Trusted, not probed since; Begin takes it
	endedAt     time.Time   // when the last Raw exchange ended cleanly (Trusted); zero: never
	// The Raw exchange in progress began unprobed (exUnprobed) with the
	// socket's read count at exGot: see Stale. Read side's owner only.
	exUnprobed bool
	exGot      int64
	// Deadlines a Raw exchange set, touched by the read side's owner only:
	// rdl stays set after End (see Begin), wdl is cleared by End.
	rdl time.Time
	wdl bool
}

func newH1Conn(addr string, sock *sockConn, tc *tls.Conn, maxHead int) *h1Conn {
	c := &h1Conn{addr: addr, sock: sock, tls: tc, maxHead: maxHead}
	var rw io.ReadWriter = sock
	if tc != nil {
		rw = tc
		st := tc.ConnectionState()
		c.tlsState = &st
	}
	c.bound.r = rw
	c.br = bufio.NewReaderSize(&c.bound, h1BufSize)
	c.bw = bufio.NewWriterSize(rw, h1BufSize)
	return c
}

func (c *h1Conn) Protocol() string { return ProtoH1 }
func (c *h1Conn) Streams() int     { return 1 }

// Usable reports false once the connection broke or either side asked to
// close it. On an idle connection it also reads once without blocking: a
// peer that closed the connection, or sent anything unasked, makes it
// unusable (and closed) before it is handed out. The one exception is the
// first call after an exchange ended (the pool's check at release): the
// same read was just done as the response body reached EOF, or (Raw.End)
// the exchange ended cleanly at its framing, so it is trusted. Every
// later call reads, so a connection that sat idle is checked before it is
// handed out, at one syscall per request under load — except to a request
// that can be sent again, which the pool may hand a Trusted connection
// without calling Usable (pool.AcquireTrusting).
func (c *h1Conn) Usable() bool {
	switch c.state.Load() {
	case h1Broken:
		return false
	case h1Idle:
		if c.justChecked.CompareAndSwap(true, false) {
			return true
		}
		return c.probe()
	}
	return true
}

// TrustWindow is how long after an exchange ended an idle HTTP/1.1
// connection may be handed out without the probe read (Trusted). Under
// load a connection is reused within milliseconds; one idle for longer is
// probed, because what an origin does to an idle connection — close it at
// its keep-alive timeout, or send something unasked, which the probe
// catches and the next response must never be mistaken for — grows with
// the time it sits.
const TrustWindow = 100 * time.Millisecond

// Trusted implements pool.Trusting: an idle connection whose last
// exchange ended cleanly less than TrustWindow ago is handed out without
// the probe read to a request that can be sent again
// (pool.AcquireTrusting). If the origin closed it meanwhile, the Raw
// exchange that follows says so (Stale) and the request goes again on
// another connection.
func (c *h1Conn) Trusted() bool {
	if c.state.Load() != h1Idle || time.Since(c.endedAt) >= TrustWindow {
		return false
	}
	c.unprobed.Store(true)
	return true
}

// Ping checks an idle HTTP/1.1 connection the way Usable does, always
// reading; it has no request of its own to send. A silently blackholed
// origin is found by the TCP keepalive the Dialer sets, which makes this
// read fail.
func (c *h1Conn) Ping(_ time.Duration, done func(error)) {
	switch st := c.state.Load(); {
	case st == h1Broken, st == h1Idle && !c.probe():
		done(fmt.Errorf("upstream %s: h1 liveness probe: %w", c.addr, ErrConnUnusable))
	default:
		done(nil)
	}
}

// probe checks an idle connection, taking its read side for the time.
func (c *h1Conn) probe() bool {
	if !c.state.CompareAndSwap(h1Idle, h1Probing) {
		return c.state.Load() != h1Broken
	}
	if !c.alive() {
		c.state.Store(h1Broken)
		c.closeSocket()
		return false
	}
	c.unprobed.Store(false)
	c.state.Store(h1Idle)
	return true
}

// alive reads once without blocking; the caller owns the read side. Any
// byte buffered or readable, EOF or an error means the connection is not
// fit for another request.
func (c *h1Conn) alive() bool {
	if c.br.Buffered() > 0 {
		return false
	}
	c.settleDeadline(false)
	var r interface{ Read([]byte) (int, error) } = c.sock
	if c.tls != nil {
		r = c.tls
	}
	return c.sock.probeRead(r, c.probeBuf[:])
}

// Close closes the connection at once; an in-flight exchange fails.
func (c *h1Conn) Close() error {
	c.state.Store(h1Broken)
	c.closeSocket()
	return nil
}

func (c *h1Conn) closeSocket() {
	c.closeOnce.Do(func() { c.sock.Close() })
}

// abort breaks the connection from outside the exchange (context
// cancelled, request body failed): pending reads and writes return.
func (c *h1Conn) abort() { c.Close() }

type upgradedBody struct {
	r     io.Reader
	w     io.Writer
	close func()
}

func (b *upgradedBody) Read(p []byte) (int, error)  { return b.r.Read(p) }
func (b *upgradedBody) Write(p []byte) (int, error) { return b.w.Write(p) }
func (b *upgradedBody) Close() error                { b.close(); return nil }
