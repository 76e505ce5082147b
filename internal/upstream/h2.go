package upstream

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// HTTP/2 frame types and settings the watcher looks at (RFC 9113 §6).
const (
	frameSettings              = 0x4
	frameGoAway                = 0x7
	flagSettingsAck            = 0x1
	settingMaxConcurrentStream = 0x3
	// defaultMaxStreams is what x/net/http2 assumes when the peer's first
	// SETTINGS has no MAX_CONCURRENT_STREAMS ("unlimited"); the pool caps
	// it with its own max streams.
	defaultMaxStreams = 1000
)

// h2Conn is an HTTP/2 client connection on x/net/http2's ClientConn.
type h2Conn struct {
	addr   string
	cc     *http2.ClientConn
	w      *frameWatch
	closed atomic.Bool
}

// newH2Conn starts HTTP/2 on nc and waits, within ctx, until the peer's
// SETTINGS arrived, so Streams is the peer's value from the first use. A
// PING answered proves it: the peer sends SETTINGS first and frames are
// processed in order.
func newH2Conn(ctx context.Context, t *http2.Transport, addr string, nc net.Conn) (*h2Conn, error) {
	w := &frameWatch{}
	var wrapped net.Conn
	if tc, ok := nc.(*tls.Conn); ok {
		wrapped = &watchedTLSConn{watchedConn{Conn: nc, w: w}, tc}
	} else {
		wrapped = &watchedConn{Conn: nc, w: w}
	}
	cc, err := t.NewClientConn(wrapped)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("start HTTP/2: %w", err)
	}
	if err := cc.Ping(ctx); err != nil {
		cc.Close()
		return nil, fmt.Errorf("HTTP/2 handshake (SETTINGS + PING): %w", err)
	}
	return &h2Conn{addr: addr, cc: cc, w: w}, nil
}

func (c *h2Conn) Protocol() string { return ProtoH2 }

// Streams is the peer's SETTINGS_MAX_CONCURRENT_STREAMS as last received.
func (c *h2Conn) Streams() int { return int(c.w.maxStreams.Load()) }

// Usable is false once the connection was closed, its socket failed or
// the peer sent GOAWAY.
func (c *h2Conn) Usable() bool {
	return !c.closed.Load() && !c.w.dead.Load() && !c.w.goAway.Load()
}

// Ping sends an HTTP/2 PING and waits up to timeout for the answer on a
// goroutine of its own; a lost PING marks the connection unusable.
func (c *h2Conn) Ping(timeout time.Duration, done func(error)) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := c.cc.Ping(ctx)
		cancel()
		if err != nil {
			c.w.dead.Store(true)
			err = fmt.Errorf("upstream %s: h2 ping (timeout %v): %w", c.addr, timeout, err)
		}
		done(err)
	}()
}

// Close closes the connection at once; in-flight streams fail.
func (c *h2Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.cc.Close()
}

// RoundTrip sends req on a new stream. Request and response bodies
// stream; trailers are passed both ways (gRPC works through it).
func (c *h2Conn) RoundTrip(req *http.Request) (*http.Response, error) {
	if !c.Usable() {
		return nil, fmt.Errorf("upstream %s: %s %s: %w", c.addr, req.Method, req.URL.Path, ErrConnUnusable)
	}
	resp, err := c.cc.RoundTrip(req)
	if err != nil {
		var ce http2.ConnectionError
		if errors.As(err, &ce) {
			c.w.dead.Store(true) // the connection is gone: the pool must not hand it out again
		}
		if headTooLarge(err) {
			err = ErrHeadTooLarge
		}
		return nil, fmt.Errorf("upstream %s: %s %s: %w", c.addr, req.Method, req.URL.Path, err)
	}
	return resp, nil
}

// frameWatch follows the frame boundaries of what the peer sends and keeps
// the two facts the pool needs in atomics: the peer's
// MAX_CONCURRENT_STREAMS and whether it sent GOAWAY. It also records a
// read or write failure of the socket. Only the ClientConn's read loop
// calls scan, so the parse state needs no lock.
type frameWatch struct {
	maxStreams atomic.Uint32
	goAway     atomic.Bool
	dead       atomic.Bool

	hdr       [9]byte
	hdrN      int
	left      uint32 // payload bytes of the current frame not yet seen
	typ       byte
	settings  bool // current frame is a non-ACK SETTINGS
	entry     [6]byte
	entryN    int
	seenFirst bool // a non-ACK SETTINGS frame was seen
	sawMax    bool // ... and it carried MAX_CONCURRENT_STREAMS
}

func (w *frameWatch) scan(b []byte) {
	for len(b) > 0 {
		if w.left == 0 { // between frames: (part of) a 9-byte header
			k := copy(w.hdr[w.hdrN:], b)
			w.hdrN += k
			b = b[k:]
			if w.hdrN == len(w.hdr) {
				w.startFrame()
			}
			continue
		}
		k := min(uint32(len(b)), w.left)
		if w.settings {
			w.settingsBytes(b[:k])
		}
		w.left -= k
		b = b[k:]
		if w.left == 0 {
			w.endFrame()
		}
	}
}

func (w *frameWatch) startFrame() {
	w.left = uint32(w.hdr[0])<<16 | uint32(w.hdr[1])<<8 | uint32(w.hdr[2])
	w.typ = w.hdr[3]
	w.hdrN = 0
	w.settings = w.typ == frameSettings && w.hdr[4]&flagSettingsAck == 0
	w.entryN = 0
	if w.typ == frameGoAway {
		w.goAway.Store(true)
	}
	if w.left == 0 {
		w.endFrame()
	}
}

func (w *frameWatch) settingsBytes(b []byte) {
	for len(b) > 0 {
		k := copy(w.entry[w.entryN:], b)
		w.entryN += k
		b = b[k:]
		if w.entryN < len(w.entry) {
			return
		}
		w.entryN = 0
		if binary.BigEndian.Uint16(w.entry[:2]) == settingMaxConcurrentStream {
			w.maxStreams.Store(binary.BigEndian.Uint32(w.entry[2:]))
			w.sawMax = true
		}
	}
}

func (w *frameWatch) endFrame() {
	if w.settings && !w.seenFirst {
		w.seenFirst = true
		if !w.sawMax {
			w.maxStreams.Store(defaultMaxStreams)
		}
	}
	w.settings = false
}

// watchedConn feeds what the ClientConn reads to a frameWatch and marks it
// dead on any socket error.
type watchedConn struct {
	net.Conn
	w *frameWatch
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.w.scan(p[:n])
	if err != nil {
		c.w.dead.Store(true)
	}
	return n, err
}

func (c *watchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.w.dead.Store(true)
	}
	return n, err
}

// watchedTLSConn keeps the TLS state visible to x/net/http2 (Response.TLS).
type watchedTLSConn struct {
	watchedConn
	tc *tls.Conn
}

func (c *watchedTLSConn) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }

// headTooLarge reports whether an HTTP/2 round trip failed on a response
// header block above MaxHeaderListSize. x/net/http2 says so in two ways:
// a block whose fields add up to more is truncated (errResponseHeaderListSize,
// unexported), and a single field longer than the bound stops HPACK
// decoding, a connection error COMPRESSION_ERROR — which a corrupt HPACK
// stream gives too; both are reported as a head too large.
func headTooLarge(err error) bool {
	var ce http2.ConnectionError
	return strings.Contains(err.Error(), "response header list larger than advertised limit") ||
		errors.As(err, &ce) && http2.ErrCode(ce) == http2.ErrCodeCompression
}
