// Package fastpath is corput's own HTTP/1.1 server loop. On the cleartext
// listener corput reads HTTP/1.1 itself:
// a connection's request heads are parsed on the raw bytes (package h1),
// and a simple request to an HTTP/1.1 origin is forwarded byte for byte —
// head rewritten, body and response streamed through fixed buffers —
// without net/http's request and response objects, its per-request
// background reader or a context per request (docs/performance.md).
//
// Anything else is handed off, unread, to net/http's server behind the
// framing guard, exactly as when the fast path is off
// (downstream.fast_path: false): an h2c preface, a request h1.ParseRequest
// calls not simple (Transfer-Encoding, Upgrade, Expect, HTTP/1.0, an
// asterisk or absolute target, an escaped path, obs-fold, bare LF, an
// empty line before the request line, a field name disguising a protected
// one, an oversized head, ...), a field name with '_' under
// downstream.underscore_headers: reject, a body above BodyLimit, CONNECT,
// a route to an origin the fast path does not serve (HTTP/2 or TLS
// with ALPN), or a request with a body and no route or a route that
// answers itself (routes[].redirect, routes[].answer; without a body the
// fast path serves those). Under drop (the default) the fields whose names have '_'
// are not forwarded. The
// hand-off is for the rest of the connection. So every rule the hostile-input and conformance suites check is
// applied either by the strict parser (which refuses to call anything
// doubtful simple) or by net/http as before.
//
// Invariants:
//   - A request is served by package proxy, like net/http's: the fast path
//     only reads it (its head parsed in place, its body from the read
//     buffer and the socket) and writes its answer as HTTP/1.1 (fastConn is
//     its proxy.Client).
//   - A request is placed on a loop of its own (package dispatch) and
//     touches only that loop's picker and pools; a connection's buffers
//     and client watch stay the connection's.
//   - A connection from a PROXY protocol balancer (a *proxyproto.Conn) has
//     its header read before the TLS handshake and any raw read of the
//     socket; its address is the client's from then on.
//   - A proxied request allocates nothing (bench/hotpath), with the access
//     log off or on, and tracing off: a sampled request's line is a fixed-size entry copied
//     into the log's ring, formatted by the log's writer.
package fastpath

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/httpserve"
	"github.com/corput/corput/internal/proxy"
	"github.com/corput/corput/internal/sockio"
)

// BodyLimit is the largest request body the fast path forwards. The
// body is written before the response is read, so it must fit the sockets'
// buffers even when an origin answers early without reading it.
const BodyLimit = 64 << 10

// fastReadBuf is a fast connection's read buffer: the largest request
// head it parses (larger heads go to net/http, which applies
// downstream.max_header_bytes).
const fastReadBuf = 8 << 10

// Config is what the fast path serves with.
type Config struct {
	// Handler serves each request the fast path reads (package proxy),
	// with the configuration in force.
	Handler *proxy.Handler
	// Downstream is the downstream listener's settings
	// (max_header_bytes, read_header_timeout, idle_timeout).
	Downstream config.Downstream
	// TLS, when set, makes the listener HTTPS: each connection's TLS ends
	// here (crypto/tls, the handshake bounded by read_header_timeout), then
	// an HTTP/1.1 connection runs the same byte loop, and one that chose h2
	// by ALPN goes to net/http as the *tls.Conn it needs.
	TLS *tls.Config
	// HandOffAll hands every connection to net/http (behind the guard,
	// after the TLS handshake): downstream.fast_path: false on an HTTPS
	// listener, which still needs the handshake and the guard here.
	HandOffAll bool
}

// Server serves a cleartext listener: fast connections here, the rest
// handed to net/http's server.
type Server struct {
	cfg       Config
	slow      *http.Server // takes what the fast path hands off
	handoff   *handoffListener
	headLimit int
	hdrWait   time.Duration // downstream.read_header_timeout
	idleWait  time.Duration // downstream.idle_timeout
	bodyWait  time.Duration // downstream.body_read_timeout

	closing  atomic.Bool
	handoffs atomic.Int64 // connections given to net/http
	mu       sync.Mutex   // guards following
	ln       net.Listener
	conns    map[*fastConn]struct{}
	slowDone chan error
	started  bool
	slowOnce sync.Once
	slowErr  error
}

// New returns a Server that hands off to slow what it does not serve.
func New(cfg Config, slow *http.Server) *Server {
	d := cfg.Downstream
	return &Server{
		cfg:       cfg,
		slow:      slow,
		handoff:   newHandoffListener(),
		headLimit: min(fastReadBuf, d.MaxHeaderBytes),
		hdrWait:   d.ReadHeaderTimeout,
		idleWait:  d.IdleTimeout,
		bodyWait:  d.BodyReadTimeout,
		conns:     map[*fastConn]struct{}{},
		slowDone:  make(chan error, 1),
	}
}

// Serve accepts connections until Shutdown or Close; it returns
// http.ErrServerClosed then, like http.Server.Serve.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		// Shutdown ran before Serve did (it found no listener to close).
		s.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	s.ln = ln
	s.started = true
	s.mu.Unlock()
	s.handoff.addr = ln.Addr()
	go func() { s.slowDone <- s.slow.Serve(s.handoff) }()
	for {
		// ln is an *accept.Listener (Gateway.Start): it retries what is
		// transient, out of descriptors included, so an error here means
		// the listener was closed or can never accept again.
		c, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			return err
		}
		fc := &fastConn{s: s, conn: c, sock: sockio.New(c), accepted: time.Now()}
		fc.state.Store(connNew)
		if !s.track(fc) {
			c.Close()
			continue
		}
		go fc.serve()
	}
}

func (s *Server) track(fc *fastConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	s.conns[fc] = struct{}{}
	return true
}

func (s *Server) untrack(fc *fastConn) {
	s.mu.Lock()
	delete(s.conns, fc)
	s.mu.Unlock()
}

// Shutdown stops accepting, closes idle connections, and waits for active
// ones to finish their request (they then close) until ctx ends; net/http
// shuts down the handed-off connections alongside.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopAccepting()
	slowErr := make(chan error, 1)
	go func() { slowErr <- s.slow.Shutdown(ctx) }() // it closes the hand-off listener
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var err error
	for s.closeIdle() > 0 && err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			s.closeAll()
		case <-tick.C:
		}
	}
	return errors.Join(err, <-slowErr, s.waitSlow())
}

// Close closes every connection at once.
func (s *Server) Close() error {
	s.stopAccepting()
	err := s.slow.Close()
	s.closeAll()
	return errors.Join(err, s.waitSlow())
}

func (s *Server) stopAccepting() {
	s.closing.Store(true)
	s.mu.Lock()
	if s.ln != nil {
		s.ln.Close()
	}
	s.mu.Unlock()
}

// waitSlow waits, once, for net/http's Serve of the handed-off
// connections to return.
func (s *Server) waitSlow() error {
	s.slowOnce.Do(func() {
		s.mu.Lock()
		started := s.started
		s.mu.Unlock()
		if started {
			if err := <-s.slowDone; !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
				s.slowErr = err
			}
		}
	})
	return s.slowErr
}

// closeIdle closes the connections waiting for a request and returns how
// many are still busy. A new connection that has not sent its first
// request yet counts as busy for newConnGrace after it was accepted (as
// net/http's Shutdown treats one): a client that connected just before the
// shutdown has its request served.
func (s *Server) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	busy := 0
	for fc := range s.conns {
		switch {
		case fc.state.CompareAndSwap(connIdle, connClosed):
			fc.conn.Close()
		case fc.state.Load() == connNew && time.Since(fc.accepted) >= newConnGrace && fc.state.CompareAndSwap(connNew, connClosed):
			fc.conn.Close()
		case fc.state.Load() == connActive, fc.state.Load() == connNew:
			busy++
		}
	}
	return busy
}

// newConnGrace is how long Shutdown waits for a new connection's first
// request (net/http's, for its StateNew connections).
const newConnGrace = 5 * time.Second

func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for fc := range s.conns {
		fc.state.Store(connClosed)
		fc.conn.Close()
	}
}

// fastConn states.
const (
	connIdle   int32 = iota // waiting for (the rest of) a request head
	connActive              // serving a request
	connClosed              // closed by Shutdown
	connNew                 // accepted, its first request not read yet
)

// activate takes the connection from waiting for a request (new or idle)
// to serving one; false when Shutdown closed it.
func (c *fastConn) activate() bool {
	return c.state.CompareAndSwap(connIdle, connActive) || c.state.CompareAndSwap(connNew, connActive)
}

// fastConn is one downstream connection on the fast path.
type fastConn struct {
	s     *Server
	conn  net.Conn     // the accepted socket: its deadlines and Close
	tls   *tls.Conn    // over conn, on an HTTPS listener; nil in cleartext
	sock  *sockio.Conn // the reads and writes: of conn (package sockio), or of tls
	state atomic.Int32
	// accepted is when the connection was accepted: Shutdown gives a new
	// one newConnGrace to send its first request.
	accepted time.Time

	buf   []byte // read buffer; buf[r:w] is unread
	r, w  int
	bw    *bufio.Writer
	head  h1.Head
	fwd   forward.Peer
	xff   []byte // X-Forwarded-For's value, reused
	watch *clientWatch
	rdl   time.Time // the read deadline set on conn

	st     proxy.Stream     // the current request's attempts, trace and answer (reused)
	in     proxy.Inbound    // the current request's facts (reused)
	num    [24]byte         // scratch for numbers
	client string           // the peer's address, for the access log
	req    exchange.Request // the current request, as its exchanges send it (reused)
	body   reqBody          // the current request's body, as its exchanges read it
	cw     chunkWriter      // a Stream response body's chunked writer (reused)

	// the current request
	bodyAt     int   // offset of its body in buf
	bodyLen    int64 // its Content-Length (0 without)
	inBuf      int64 // body bytes already in buf
	closeAfter bool  // the connection closes after the response (said in it)
	broken     bool  // the connection cannot carry another request
	chunkOut   bool  // the response's body is written as chunks (Framing Stream)
	lowerOut   bool  // the response's field names are HTTP/2's lower case
}

// serve reads and serves requests until the connection ends or is handed
// off.
func (c *fastConn) serve() {
	handedOff := false
	defer func() {
		if !handedOff {
			c.conn.Close()
		}
		c.s.untrack(c)
		if c.watch != nil {
			c.watch.stop()
		}
		if c.bw != nil {
			c.bw.Reset(nil)
			fastWriters.Put(c.bw)
		}
	}()
	if h, ok := c.conn.(headerReader); ok && h.ReadHeader() != nil {
		return // a PROXY header that was refused: closed (package proxyproto)
	}
	if c.s.cfg.TLS != nil {
		if !c.handshake() {
			return
		}
		if c.tls.ConnectionState().NegotiatedProtocol == "h2" {
			// net/http's HTTP/2 server needs the *tls.Conn itself.
			c.setReadDeadline(time.Time{}, 0, false)
			if handedOff = c.activate() && c.s.handoff.give(c.tls); handedOff {
				c.s.handoffs.Add(1)
			}
			return
		}
	}
	c.buf = make([]byte, fastReadBuf)
	c.bw = fastWriters.Get().(*bufio.Writer)
	c.bw.Reset(c.sock)
	c.client = c.conn.RemoteAddr().String()
	c.fwd = c.s.cfg.Handler.Table().Forwarding.Peer(c.client, c.tls != nil)
	c.watch = newClientWatch(c)
	if c.s.cfg.HandOffAll {
		handedOff = c.handOff()
		return
	}
	for first := true; ; first = false {
		n, ok := c.readHead(first)
		if !ok {
			return
		}
		if n == 0 {
			handedOff = c.handOff()
			return
		}
		if !c.activate() {
			return // Shutdown closed it
		}
		keep, handoff := c.serveOne(n)
		if handoff {
			handedOff = c.handOff()
			return
		}
		if !keep || c.s.closing.Load() || !c.state.CompareAndSwap(connActive, connIdle) {
			return
		}
	}
}

// headerReader is a connection that starts with a PROXY protocol header
// (a *proxyproto.Conn): the fast path reads the socket raw (package
// sockio), so it has the header read first, within its own time limit.
type headerReader interface{ ReadHeader() error }

// readHead reads until buf[r:] starts with a complete request head and
// returns its length; 0 with ok means hand the connection off; !ok means
// the connection ended (closed, timed out, Shutdown).
func (c *fastConn) readHead(first bool) (n int, ok bool) {
	waiting := true // no byte of this head yet
	for {
		if c.w > c.r {
			waiting = false
			n, res := h1.ParseRequest(c.buf[c.r:c.w], &c.head)
			switch res {
			case h1.Complete:
				if n > c.s.headLimit {
					return 0, true
				}
				return n, true
			case h1.NotSimple:
				return 0, true
			}
			if h1.NotHTTP(c.buf[c.r:c.w]) {
				return 0, true // not a request: the guard answers it 400 at once
			}
			if c.w-c.r >= c.s.headLimit {
				return 0, true // net/http decides: 431 or a long head it accepts
			}
		}
		if c.r > 0 && (c.r == c.w || c.w == len(c.buf)) {
			c.w = copy(c.buf, c.buf[c.r:c.w])
			c.r = 0
		}
		// A new connection and a started head get read_header_timeout;
		// the wait between requests gets idle_timeout (net/http's rules).
		wait, lazy := c.s.hdrWait, waiting
		if waiting && !first {
			wait = c.s.idleWait
		}
		if !c.setReadDeadline(time.Now().Add(wait), wait, lazy) {
			return 0, false
		}
		// Park until the client sends (or the deadline, or Close) without
		// the read that would find nothing first: one read per request.
		c.sock.WaitRead()
		k, err := c.sock.Read(c.buf[c.w:])
		c.w += k
		if err != nil && k == 0 {
			return 0, false
		}
	}
}

// setReadDeadline sets the client socket's read deadline to t, wait after
// now. lazy keeps the one already set when keepDeadline allows: between
// requests the idle deadline then moves about once a second rather than
// once a request, and a connection may be closed for idleness up to
// min(1 s, wait/2) before its timeout.
func (c *fastConn) setReadDeadline(t time.Time, wait time.Duration, lazy bool) bool {
	if lazy && keepDeadline(c.rdl, t, wait) {
		return true
	}
	c.rdl = t
	return c.conn.SetReadDeadline(t) == nil
}

// keepDeadline reports whether the deadline set, rdl, may stand for the
// wanted one, t = now + wait: it must be set, not later than t, and earlier
// by less than min(1 s, wait/2). The bound keeps at least half the wait in
// front of a read even when the timeout is shorter than a second, so a
// request served for longer than the time left never finds its deadline
// passed.
func keepDeadline(rdl, t time.Time, wait time.Duration) bool {
	if rdl.IsZero() || rdl.After(t) {
		return false
	}
	return t.Sub(rdl) < min(time.Second, wait/2)
}

// handshake ends TLS on the connection within read_header_timeout (as
// net/http's server bounds it); false closes the connection.
func (c *fastConn) handshake() bool {
	// TLS reads and writes the socket through sockio's raw syscalls, as
	// the cleartext loop does.
	tc := tls.Server(c.sock, c.s.cfg.TLS)
	if c.conn.SetDeadline(time.Now().Add(c.s.hdrWait)) != nil {
		return false
	}
	if err := tc.Handshake(); err != nil {
		return false
	}
	if c.conn.SetDeadline(time.Time{}) != nil {
		return false
	}
	c.tls, c.sock = tc, sockio.New(tc)
	return true
}

// handOff gives the connection, with its unread bytes, to net/http.
func (c *fastConn) handOff() bool {
	if !c.activate() && c.state.Load() != connActive {
		return false
	}
	if c.bw.Buffered() > 0 && c.bw.Flush() != nil {
		return false
	}
	c.setReadDeadline(time.Time{}, 0, false)
	pre := append([]byte(nil), c.buf[c.r:c.w]...)
	hc := &HandedConn{Conn: c.conn, pre: pre}
	if c.tls != nil {
		st := c.tls.ConnectionState()
		hc.Conn, hc.tlsState = c.tls, &st
	}
	c.s.handoffs.Add(1)
	return c.s.handoff.give(httpserve.Guard(hc))
}

// fastWriters recycles the downstream write buffers.
var fastWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}

// HandedConn is a connection the fast path handed to net/http: the bytes
// it had read come first. Over TLS it reads and writes the plaintext, and
// keeps the handshake's state (net/http sees no *tls.Conn).
type HandedConn struct {
	tlsState *tls.ConnectionState
	net.Conn
	pre []byte
}

func (h *HandedConn) Read(p []byte) (int, error) {
	if len(h.pre) > 0 {
		n := copy(p, h.pre)
		h.pre = h.pre[n:]
		return n, nil
	}
	return h.Conn.Read(p)
}

// TLS is the connection's TLS state, nil in cleartext.
func (h *HandedConn) TLS() *tls.ConnectionState { return h.tlsState }

// Handoffs is how many connections were handed to net/http.
func (s *Server) Handoffs() int64 { return s.handoffs.Load() }

// CloseWrite keeps net/http's graceful half-close working.
func (h *HandedConn) CloseWrite() error {
	if cw, ok := h.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// handoffListener is the listener net/http serves the handed-off
// connections from.
type handoffListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func newHandoffListener() *handoffListener {
	return &handoffListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *handoffListener) give(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr {
	if l.addr == nil {
		return &net.TCPAddr{}
	}
	return l.addr
}
