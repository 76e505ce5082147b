package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
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

func (c *h1Conn) RoundTrip(req *http.Request) (*http.Response, error) {
	if !c.state.CompareAndSwap(h1Idle, h1Busy) {
		if c.state.Load() == h1Broken {
			return nil, c.errorf(req, ErrConnUnusable)
		}
		return nil, c.errorf(req, ErrConnBusy)
	}
	c.justChecked.Store(false)
	c.settleDeadline(true)
	ex := &h1Exchange{c: c, req: req}
	if ctx := req.Context(); ctx.Done() != nil {
		if ctx.Err() != nil {
			c.state.Store(h1Idle)
			return nil, c.errorf(req, ctx.Err())
		}
		ex.stop = context.AfterFunc(ctx, c.abort)
	}
	resp, err := ex.run()
	if err != nil {
		ex.finish(false)
		if cerr := req.Context().Err(); cerr != nil {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return nil, c.errorf(req, err)
	}
	return resp, nil
}

func (c *h1Conn) errorf(req *http.Request, err error) error {
	return fmt.Errorf("upstream %s: %s %s: %w", c.addr, req.Method, req.URL.Path, err)
}

// h1Exchange is one request/response on an h1Conn.
type h1Exchange struct {
	c         *h1Conn
	req       *http.Request
	stop      func() bool // unregisters the context watch; nil without one
	wrote     chan error  // request body writer's result; nil when written inline
	closeWant bool        // either side asked for Connection: close
	finished  atomic.Bool
}

func (ex *h1Exchange) run() (*http.Response, error) {
	c, req := ex.c, ex.req
	ex.closeWant = req.Close || httpguts.HeaderValuesContainsToken(req.Header["Connection"], "close")
	if req.Body == nil || req.Body == http.NoBody {
		if err := ex.write(); err != nil {
			return nil, fmt.Errorf("write request: %w", err)
		}
	} else {
		// Write the body while the response is read: an origin may answer
		// (413, 401) before it has read the whole body.
		ex.wrote = make(chan error, 1)
		go func() {
			err := ex.write()
			if err != nil {
				c.abort()
			}
			ex.wrote <- err
		}()
	}
	resp, err := ex.readResponse()
	if err != nil {
		if werr := ex.writeResult(writeWait); werr != nil {
			return nil, fmt.Errorf("write request: %w", werr)
		}
		return nil, fmt.Errorf("read response: %w", err)
	}
	ex.closeWant = ex.closeWant || resp.Close
	resp.TLS = c.tlsState
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return ex.upgrade(resp), nil
	}
	if resp.Body == http.NoBody {
		ex.finish(true)
		return resp, nil
	}
	resp.Body = &h1Body{ex: ex, rc: resp.Body, br: c.br, left: resp.ContentLength}
	return resp, nil
}

func (ex *h1Exchange) write() error {
	if err := ex.req.Write(ex.c.bw); err != nil {
		return err
	}
	return ex.c.bw.Flush()
}

// readResponse reads the final response, passing 1xx informational
// responses (except 101) to the request's httptrace Got1xxResponse hook.
func (ex *h1Exchange) readResponse() (*http.Response, error) {
	trace := httptrace.ContextClientTrace(ex.req.Context())
	for i := 0; ; i++ {
		resp, err := readResponse(ex.c.br, &ex.c.bound, ex.c.maxHead, ex.req)
		if err != nil {
			return nil, err
		}
		code := resp.StatusCode
		if code < 100 || code >= 200 || code == http.StatusSwitchingProtocols {
			return resp, nil
		}
		if i >= max1xx {
			return nil, fmt.Errorf("more than %d informational (1xx) responses", max1xx)
		}
		if trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(code, textproto.MIMEHeader(resp.Header)); err != nil {
				return nil, err
			}
		}
	}
}

// writeResult waits up to d for the request body writer; nil when the
// request was written inline or the writer succeeded.
func (ex *h1Exchange) writeResult(d time.Duration) error {
	if ex.wrote == nil {
		return nil
	}
	select {
	case err := <-ex.wrote:
		ex.wrote <- err // keep it for a later look
		return err
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-ex.wrote:
		ex.wrote <- err
		return err
	case <-t.C:
		return errors.New("request body still being written when the response ended")
	}
}

// finish ends the exchange once: the connection goes back to idle when
// reusable, else it is closed.
func (ex *h1Exchange) finish(reusable bool) {
	if !ex.finished.CompareAndSwap(false, true) {
		return
	}
	if ex.stop != nil && !ex.stop() {
		reusable = false // the context fired: the connection is aborted
	}
	if reusable && (ex.closeWant || ex.writeResult(writeWait) != nil) {
		reusable = false
	}
	// Still busy, so the read side is ours: check now whether the origin
	// closed right behind its response (the common way a connection dies).
	if reusable && ex.c.alive() {
		ex.c.justChecked.Store(true)
		if ex.c.state.CompareAndSwap(h1Busy, h1Idle) {
			return
		}
	}
	ex.c.Close()
	if ex.wrote != nil && len(ex.wrote) == 0 {
		// The writer may be blocked reading the request body rather
		// than the socket; closing the body is what unblocks it.
		ex.req.Body.Close()
	}
}

// upgrade hands the connection to the caller after 101 Switching
// Protocols: the body reads what the origin sends (buffered bytes first)
// and writes straight to the socket. The connection never returns to the
// pool; closing the body closes it.
func (ex *h1Exchange) upgrade(resp *http.Response) *http.Response {
	c := ex.c
	if ex.stop != nil {
		ex.stop()
	}
	ex.finished.Store(true)
	c.state.Store(h1Broken)
	var w io.Writer = c.sock
	if c.tls != nil {
		w = c.tls
	}
	resp.Body = &upgradedBody{r: c.br, w: w, close: c.closeSocket}
	return resp
}

type upgradedBody struct {
	r     io.Reader
	w     io.Writer
	close func()
}

func (b *upgradedBody) Read(p []byte) (int, error)  { return b.r.Read(p) }
func (b *upgradedBody) Write(p []byte) (int, error) { return b.w.Write(p) }
func (b *upgradedBody) Close() error                { b.close(); return nil }

// h1Body is the response body: reading it to EOF hands the connection
// back; closing it early keeps the connection only when the rest of the
// body is already in the buffer.
type h1Body struct {
	ex   *h1Exchange
	rc   io.ReadCloser // http.ReadResponse's body (framing, trailers)
	br   *bufio.Reader
	left int64 // bytes of a Content-Length body not yet read; -1 if unknown
	mu   sync.Mutex
	err  error // sticky: io.EOF, the read error, or ErrBodyReadAfterClose
}

func (b *h1Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	if err != nil {
		b.ex.finish(err == io.EOF)
		if err != io.EOF {
			err = b.ex.c.errorf(b.ex.req, fmt.Errorf("read response body: %w", err))
		}
		b.err = err
	}
	return n, err
}

func (b *h1Body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.ex.finish(b.drainBuffered())
	}
	b.err = http.ErrBodyReadAfterClose
	return nil
}

// drainBuffered reads the rest of a Content-Length body when all of it is
// already buffered (so it cannot block) and small; it reports whether the
// body reached EOF.
func (b *h1Body) drainBuffered() bool {
	if b.left < 0 || b.left > drainLimit || int64(b.br.Buffered()) < b.left {
		return false
	}
	n, err := io.Copy(io.Discard, b.rc)
	return err == nil && n == b.left
}
