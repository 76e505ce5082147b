package fastpath

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/proxy"
	"github.com/corput/corput/internal/route"
	"github.com/corput/corput/internal/tracing"
	"golang.org/x/net/http2/hpack"
)

// serveOne serves the request whose head is buf[r:r+n]. keep says the
// connection may carry another request; handoff says nothing was read or
// written for it and net/http takes the connection.
func (c *fastConn) serveOne(n int) (keep, handoff bool) {
	h := &c.head
	body := max(h.ContentLength, 0)
	if body > BodyLimit || string(h.Method) == http.MethodConnect {
		return false, true
	}
	q := route.Request{Method: h1.View(h.Method), Host: h1.View(h.Host), Path: h1.View(h.Path), Head: h, Peer: c.fwd}
	if len(h.Target) > len(h.Path) {
		q.Query = h1.View(h.Target[len(h.Path)+1:]) // after '?'
	}
	rt := c.s.cfg.Handler.Route(q)
	switch {
	case rt.OK && rt.Origin != nil:
		if !rt.Fast() {
			return false, true
		}
	case body > 0:
		return false, true // no route, or the route's own answer: net/http answers it and skips the body
	}
	if h.Underscores > 0 {
		switch rt.Table.Forwarding.Underscores {
		case config.UnderscoreReject:
			return false, true // net/http's path answers it 400, as every refusal of a head
		case config.UnderscoreAllow:
		default: // drop
			for i := range h.Fields {
				if h.Fields[i].Underscore {
					h.Fields[i].Hop = true
				}
			}
		}
	}
	// From here the request is the fast path's.
	c.bodyAt, c.bodyLen = c.r+n, body
	c.inBuf = min(body, int64(c.w-c.bodyAt))
	c.body = reqBody{c: c}
	c.closeAfter = h.Close || c.s.closing.Load()
	c.broken = false
	c.in = proxy.Inbound{
		Method: h1.View(h.Method), Host: h1.View(h.Host), Path: h1.View(h.Path), Target: h1.View(h.Target),
		Proto: "HTTP/1.1", Client: c.client, TLS: c.tls != nil, Head: h, Peer: c.fwd, Length: body,
	}
	// A wait for a stream is bounded by pool.acquire_timeout. The first
	// attempt of a request that can go again takes an idle connection
	// unprobed (one read saved per request); one the origin had closed is
	// Stale, and the retry probes.
	c.s.cfg.Handler.Serve(context.Background(), &c.st, &c.in, rt, c, true)

	c.r += n
	switch {
	case c.inBuf == body:
		c.r += int(body) // all of it buffered, whatever was forwarded: skip it
	case c.body.read == body:
		c.r += int(c.inBuf) // forwarded whole: the rest came from the socket
	default:
		c.broken = true // part of the body is still in the socket
	}
	return !c.broken && !c.closeAfter, false
}

// Request readies the exchange's request from the parsed head, rewritten
// for origin o (proxy.Client): the client's fields but the hop-by-hop ones
// (and its trace context when each attempt sends its own), X-Forwarded-*
// (forward.Peer.Write), and the body as the exchange reads it (reqBody).
// Its strings view the connection's read buffer and scratch; it allocates
// nothing once the field list has grown to the head's size.
func (c *fastConn) Request(o *cluster.Origin, s *proxy.Stream) *exchange.Request {
	h, r := &c.head, &c.req
	if s.Tr != nil {
		for i := range h.Fields {
			if tracing.IsTraceField(h.Fields[i].Name) {
				h.Fields[i].Hop = true
			}
		}
	}
	r.Method, r.Target, r.Host = h1.View(h.Method), h1.View(h.Target), h1.View(h.Host)
	r.Scheme = "http"
	if c.tls != nil || o.TLS() {
		r.Scheme = "https"
	}
	r.Fields = r.Fields[:0]
	for i := range h.Fields {
		if f := &h.Fields[i]; !f.Hop && !(c.fwd.Forwarded && len(f.Name) == 9 && h1.EqFold(f.Name, "forwarded")) { // Write writes Forwarded
			r.Fields = append(r.Fields, hpack.HeaderField{Name: h1.View(f.Name), Value: h1.View(f.Value)})
		}
	}
	c.xff = c.fwd.Write(h.Host, h, c.xff, func(name string, value []byte) {
		r.Fields = append(r.Fields, hpack.HeaderField{Name: name, Value: h1.View(value)})
	})
	r.TE, r.Trace, r.MaxHead = h.TETrailers, s.Tr, o.MaxResponseHead()
	r.Length, r.Body = c.bodyLen, nil
	if c.bodyLen > 0 {
		c.body = reqBody{c: c}
		r.Body = &c.body
	}
	return r
}

// reqBody is a request body as the exchange reads it: the bytes the
// head's read buffered, then the rest from the client's socket, each read
// within downstream.body_read_timeout. A read that fails leaves the
// connection broken: the client broke its request (exchange.ErrClientGone),
// or stalled (exchange.ErrBodyTimeout: answered 408).
type reqBody struct {
	c    *fastConn
	read int64 // body bytes read so far
}

func (b *reqBody) Read(p []byte) (int, error) {
	c := b.c
	if b.read < c.inBuf {
		k := copy(p, c.buf[c.bodyAt+int(b.read):c.bodyAt+int(c.inBuf)])
		b.read += int64(k)
		return k, nil
	}
	left := c.bodyLen - b.read
	if left == 0 {
		return 0, io.EOF
	}
	c.setReadDeadline(time.Now().Add(c.s.bodyWait), 0, false)
	c.sock.WaitRead()
	k, err := c.sock.Read(p[:min(int64(len(p)), left)])
	b.read += int64(k)
	if err != nil && b.read < c.bodyLen {
		c.broken = true
		if k == 0 {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return 0, exchange.ErrBodyTimeout
			}
			return 0, exchange.ErrClientGone
		}
	}
	return k, nil
}

// fastConn is its requests' proxy.Client: it writes their answers as
// HTTP/1.1 on the client's connection.
var _ proxy.Client = (*fastConn)(nil)

// WriteHead writes the response head: the status line, the fields (in
// net/http's canonical form when they are HTTP/2's), a sticky origin's new
// key cookie, the body's framing, Date when the origin sent none, and
// Connection: close when the connection ends after this response.
func (c *fastConn) WriteHead(h *exchange.Head) error {
	w := c.bw
	w.WriteString(statusLine(h.Status))
	for i := range h.Fields {
		writeField(w, &h.Fields[i], h.Lower)
	}
	if len(c.st.Cookie) > 0 {
		w.WriteString("Set-Cookie: ")
		w.Write(c.st.Cookie)
		w.WriteString("\r\n")
	}
	switch h.Framing {
	case exchange.Chunked, exchange.Stream:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	default:
		if h.Length >= 0 && h.Status != http.StatusNoContent {
			w.WriteString("Content-Length: ")
			w.Write(strconv.AppendInt(c.num[:0], h.Length, 10))
			w.WriteString("\r\n")
		}
	}
	c.chunkOut, c.lowerOut = h.Framing == exchange.Stream, h.Lower
	c.endHead(w, h.HasDate)
	return nil
}

// Write writes body bytes: each one chunk of a Stream, else as they are.
func (c *fastConn) Write(p []byte) (int, error) {
	var err error
	if c.chunkOut {
		c.cw.w = c.bw
		_, err = c.cw.Write(p)
	} else {
		_, err = c.bw.Write(p)
	}
	if err != nil {
		c.broken = true
		return 0, errClientGone
	}
	return len(p), nil
}

// Flush sends what the connection's writer holds.
func (c *fastConn) Flush() error {
	if c.bw.Flush() != nil {
		c.broken = true
		return errClientGone
	}
	return nil
}

// End ends the body: a Stream's last chunk and trailers.
func (c *fastConn) End(trailer []hpack.HeaderField, n int64) error {
	c.st.Sent = n
	if !c.chunkOut {
		return nil
	}
	w := c.bw
	w.WriteString("0\r\n")
	for i := range trailer {
		writeField(w, &trailer[i], c.lowerOut)
	}
	_, err := w.WriteString("\r\n")
	return err
}

// Abort leaves the connection to be closed: the client sees a truncated
// response, never a short one.
func (c *fastConn) Abort(n int64) {
	c.st.Sent = n
	c.broken = true
}

// RawChunks: the client speaks HTTP/1.1 on bytes written here.
func (c *fastConn) RawChunks() bool { return true }

// Watch watches the client while the exchange waits for its origin
// (clientWatch).
func (c *fastConn) Watch(up io.Closer) { c.watch.arm(up, time.Now()) }

// Unwatch ends the watch; a client that left leaves the connection
// broken.
func (c *fastConn) Unwatch() bool {
	c.watch.disarm()
	if c.watch.gone.Load() {
		c.broken = true
		return true
	}
	return false
}

// Upgrade is never reached: the fast path hands a request that asks for
// an upgrade to net/http, and the exchange refuses a 101 nobody asked
// for.
func (c *fastConn) Upgrade(*exchange.Head, io.ReadWriteCloser) int {
	return c.st.Answer(c, forward.UpgradeUnsupported, c.in.Method)
}

var errClientGone = errors.New("client connection broke")

// chunkWriter writes each Write as one chunk.
type chunkWriter struct {
	w   *bufio.Writer
	num [16]byte
}

func (cw *chunkWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	cw.w.Write(strconv.AppendInt(cw.num[:0], int64(len(p)), 16))
	cw.w.WriteString("\r\n")
	cw.w.Write(p)
	_, err := cw.w.WriteString("\r\n")
	return len(p), err
}

// writeField writes a field line, its name in net/http's canonical form
// (content-type as Content-Type) when it is HTTP/2's lower case.
func writeField(w *bufio.Writer, f *hpack.HeaderField, lower bool) {
	if lower {
		writeCanonical(w, f.Name)
	} else {
		w.WriteString(f.Name)
	}
	w.WriteString(": ")
	w.WriteString(f.Value)
	w.WriteString("\r\n")
}

func writeCanonical(w *bufio.Writer, name string) {
	upper := true
	for i := 0; i < len(name); i++ {
		b := name[i]
		if upper && 'a' <= b && b <= 'z' {
			b -= 'a' - 'A'
		}
		w.WriteByte(b)
		upper = b == '-'
	}
}

// endHead writes Date when the origin sent none, Connection: close when
// the connection ends after this response (the client asked, Shutdown has
// begun, or part of the request's body is still in the socket), and the
// blank line.
func (c *fastConn) endHead(w *bufio.Writer, hasDate bool) {
	if !hasDate {
		w.WriteString("Date: ")
		w.Write(httpDate())
		w.WriteString("\r\n")
	}
	if c.closeAfter || c.s.closing.Load() || (c.body.read < c.bodyLen && c.inBuf < c.bodyLen) {
		c.closeAfter = true
		w.WriteString("Connection: close\r\n")
	}
	w.WriteString("\r\n")
}

// statusLines are the status lines of the registered codes.
var statusLines [600]string

func init() {
	for code := 100; code < len(statusLines); code++ {
		if t := http.StatusText(code); t != "" {
			statusLines[code] = "HTTP/1.1 " + strconv.Itoa(code) + " " + t + "\r\n"
		}
	}
}

// statusLine is net/http's status line for code.
func statusLine(code int) string {
	if code < len(statusLines) && statusLines[code] != "" {
		return statusLines[code]
	}
	c := strconv.Itoa(code)
	return "HTTP/1.1 " + c + " status code " + c + "\r\n"
}

// httpDate is the current Date value, formatted once a second.
func httpDate() []byte {
	now := time.Now()
	if d := dateCache.Load(); d != nil && d.sec == now.Unix() {
		return d.text
	}
	d := &cachedDate{sec: now.Unix(), text: now.UTC().AppendFormat(nil, http.TimeFormat)}
	dateCache.Store(d)
	return d.text
}

type cachedDate struct {
	sec  int64
	text []byte
}

var dateCache atomic.Pointer[cachedDate]
