package fastpath

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/corput/corput/internal/accesslog"
	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/tracing"
	"github.com/corput/corput/internal/upstream"
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
	o, k, routed := c.s.cfg.Route(bstr(h.Method), bstr(h.Host), bstr(h.Path))
	if routed {
		if !o.Fast() {
			return false, true
		}
	} else if body > 0 {
		return false, true // net/http answers it and skips the body
	}
	// From here the request is the fast path's.
	logged := c.s.cfg.AccessLog.Sample()
	var start time.Time
	if logged {
		start = time.Now()
	}
	c.bodyAt, c.bodyLen = c.r+n, body
	c.inBuf = min(body, int64(c.w-c.bodyAt))
	c.bodyDone = body == 0
	c.closeAfter = h.Close || c.s.closing.Load()
	c.broken = false
	c.sent = 0
	c.beginTrace()

	var status int
	loop, reason := -1, forward.NoRoute
	if routed {
		reason = o.Admit(k)
	}
	if reason != forward.None {
		status = c.writeError(reason)
		c.tr.End(status, reason, "", -1, 0)
	} else {
		replayable := body == 0 && forward.Idempotent(bstr(h.Method))
		ol := o.Place() // a loop per request: the connection's state stays its own
		loop = ol.Index()
		a := &c.attempt
		started := o.Started(k)
		key := o.Key(h, c.fwd)
		c.cookie = c.cookie[:0]
		if !key.Valid() {
			c.cookie, key, _ = o.NewCookie(c.cookie)
		}
		o.Begin(a, ol, replayable, k.Cost, key)
		// A wait for a stream is bounded by pool.acquire_timeout. The first
		// attempt of a request that can go again takes an idle connection
		// unprobed (one read saved per request); one the origin had closed
		// is Stale, and the retry probes.
		var st int
		st, reason = o.Forward(context.Background(), a, ol, true, c.tr, func(a *forward.Attempt) (int, forward.Step) {
			return c.exchange(o, a, n)
		})
		o.Finish(a, ol)
		if reason == forward.None {
			status = st
			if st != 499 {
				o.Served(k, started)
			}
		} else {
			status = c.writeError(reason)
		}
		c.tr.End(status, reason, o.Name(), loop, a.Attempts()) // nil with tracing off: nothing
	}
	c.s.cfg.Served(status)
	if logged {
		c.logRequest(start, status, o, loop, reason)
	}

	c.r += n
	switch {
	case c.bodyDone:
		c.r += int(c.inBuf)
	case c.inBuf == body:
		c.r += int(body) // never forwarded, all buffered: skip it
	default:
		c.broken = true // part of an unforwarded body is still in the socket
	}
	return !c.broken && !c.closeAfter, false
}

// beginTrace starts the request's server span when tracing is on (c.tr
// is then its Request, else nil); the client's own traceparent and
// tracestate are then not forwarded: each attempt sends its span's
// (writeRequest).
func (c *fastConn) beginTrace() {
	c.tr = nil
	if c.s.cfg.Tracer == nil {
		return
	}
	t := c.s.cfg.Tracer()
	if t == nil {
		return
	}
	h := &c.head
	c.tr = &c.trace
	t.Begin(c.tr, h, c.fwd.Trusted, tracing.Inbound{
		Method: bstr(h.Method), Path: bstr(h.Path), Host: bstr(h.Host), Peer: c.client, TLS: c.tls != nil, Proto: "1.1",
	})
	for i := range h.Fields {
		if tracing.IsTraceField(h.Fields[i].Name) {
			h.Fields[i].Hop = true
		}
	}
}

// logRequest hands the request just served to the access log, its head's
// fields as views of the read buffer (the log copies them). o and loop
// are the route's; loop is -1 without one.
func (c *fastConn) logRequest(start time.Time, status int, o *cluster.Origin, loop int, reason forward.Reason) {
	h := &c.head
	r := accesslog.Record{
		Start: start, Duration: time.Since(start), Client: c.client,
		Method: bstr(h.Method), Host: bstr(h.Host), Target: bstr(h.Target), Proto: "HTTP/1.1",
		Status: status, Bytes: c.sent, Reason: reason.String(), Loop: loop,
	}
	if v, ok := h.Value("referer", 0); ok {
		r.Referer = bstr(v)
	}
	if v, ok := h.Value("user-agent", 0); ok {
		r.UserAgent = bstr(v)
	}
	if loop >= 0 {
		r.Origin, r.Attempts = o.Name(), c.attempt.Attempts()
		if ep := c.attempt.LastEndpoint(); ep != nil {
			r.Endpoint = ep.Address()
		}
	}
	c.s.cfg.AccessLog.Add(&r)
}

// bstr views b as a string for a call that does not keep it.
func bstr(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// errClientBody marks a failure reading the request body from the client.
var errClientBody = errors.New("client request body")

// exchange makes one attempt's exchange on the fast path: the request
// written on the raw connection, the response head parsed in place and
// relayed byte for byte.
func (c *fastConn) exchange(o *cluster.Origin, a *forward.Attempt, n int) (int, forward.Step) {
	raw, ok := a.Conn().(upstream.Raw)
	if !ok {
		if mux, ok := a.Conn().(upstream.Mux); ok {
			return c.exchangeH2(o, a, mux)
		}
		return 0, a.Failed(forward.Refused) // o.Fast() promises one of the two
	}
	now := time.Now()
	var deadline time.Time
	if t := o.RequestTimeout(); t > 0 {
		deadline = now.Add(t)
	}
	ubr, ubw, err := raw.Begin(deadline, c.bodyLen > 0)
	if err != nil {
		return 0, a.Failed(forward.Refused)
	}
	if err := c.writeRequest(ubw, n, deadline); err != nil {
		if errors.Is(err, errClientBody) {
			c.broken = true
			return 0, fail(a, raw, forward.ClientLeft)
		}
		return 0, fail(a, raw, failureOf(raw, err))
	}
	c.watch.arm(raw, now)
	rn, res, err := readResponseHead(ubr, &c.resp)
	c.watch.disarm()
	if err != nil {
		if c.watch.gone.Load() {
			c.broken = true
			return 0, fail(a, raw, forward.ClientLeft)
		}
		return 0, fail(a, raw, failureOf(raw, err))
	}
	if res != h1.Complete {
		return c.exchangeSlow(a, raw)
	}
	if rn > o.MaxResponseHead() {
		return 0, fail(a, raw, forward.HeadTooLarge)
	}
	if v, ok := c.resp.Value("endpoint-load-metrics", 0); ok {
		a.Loaded(bstr(v))
	}
	if !a.Respond(c.resp.Status, c.resp.Has("x-corput-error")) {
		raw.End(skipBuffered(ubr, rn, &c.resp, c.head.Method))
		return 0, a.Settle()
	}
	raw.End(c.relay(ubr, rn))
	step := a.Settle()
	c.flushResponse()
	return c.resp.Status, step
}

// fail ends an exchange's I/O on raw, the connection not to be reused,
// and reports f.
func fail(a *forward.Attempt, raw upstream.Raw, f forward.Failure) forward.Step {
	raw.End(false)
	return a.Failed(f)
}

// failureOf classifies an upstream I/O error before any response.
func failureOf(raw upstream.Raw, err error) forward.Failure {
	switch {
	case errors.Is(err, upstream.ErrHeadTooLarge):
		return forward.HeadTooLarge
	case timedOut(err):
		return forward.Timeout
	case raw.Stale(err):
		return forward.Stale
	}
	return forward.Broken
}

// writeRequest writes the request head, rewritten for the origin, and its
// body to w and flushes.
func (c *fastConn) writeRequest(w *bufio.Writer, n int, deadline time.Time) error {
	h := &c.head
	w.Write(h.Method)
	w.WriteByte(' ')
	w.Write(h.Target)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.Write(h.Host)
	w.WriteString("\r\n")
	writeFields(w, h.Fields)
	if h.TETrailers {
		w.WriteString("Te: trailers\r\n")
	}
	field := func(name string, value []byte) {
		w.WriteString(name)
		w.WriteString(": ")
		w.Write(value)
		w.WriteString("\r\n")
	}
	c.xff = c.fwd.Write(h.Host, h, c.xff, field)
	c.tr.Fields(field)
	if c.bodyLen > 0 || wantsLength(h.Method) {
		// What net/http's client sends: many origins want a length on
		// POST, PUT and PATCH even when it is 0.
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(c.num[:0], c.bodyLen, 10))
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	if c.bodyLen > 0 {
		c.bodyDone = true
		w.Write(c.buf[c.bodyAt : c.bodyAt+int(c.inBuf)])
		if err := c.copyBody(w, c.bodyLen-c.inBuf, deadline); err != nil {
			return err
		}
	}
	return w.Flush()
}

// wantsLength reports whether net/http's client would send Content-Length:
// 0 for an empty body of this method.
func wantsLength(method []byte) bool {
	switch string(method) {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		return true
	}
	return false
}

// copyBody copies the rest of the request body from the client socket.
func (c *fastConn) copyBody(w io.Writer, left int64, deadline time.Time) error {
	if left == 0 {
		return nil
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(c.s.hdrWait)
	}
	c.setReadDeadline(deadline, 0, false)
	bp := forward.Buffer()
	defer forward.PutBuffer(bp)
	for left > 0 {
		c.sock.WaitRead()
		k, err := c.sock.Read((*bp)[:min(int64(len(*bp)), left)])
		left -= int64(k)
		if _, werr := w.Write((*bp)[:k]); werr != nil {
			return werr
		}
		if err != nil && left > 0 {
			return errClientBody
		}
	}
	return nil
}

func writeFields(w *bufio.Writer, fs []h1.Field) {
	for i := range fs {
		if fs[i].Hop {
			continue
		}
		w.Write(fs[i].Name)
		w.WriteString(": ")
		w.Write(fs[i].Value)
		w.WriteString("\r\n")
	}
}

// readResponseHead reads until br holds a whole response head and parses
// it. NotSimple (also for a head larger than br's buffer) leaves
// everything unread for http.ReadResponse.
func readResponseHead(br *bufio.Reader, h *h1.Head) (int, h1.Result, error) {
	for {
		if k := br.Buffered(); k > 0 {
			b, _ := br.Peek(k)
			if n, res := h1.ParseResponse(b, h); res != h1.Incomplete {
				return n, res, nil
			}
			if k == br.Size() {
				return 0, h1.NotSimple, nil
			}
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			if br.Buffered() > 0 && !timedOut(err) {
				// The origin ended mid-head: http.ReadResponse judges
				// what it sent, as on net/http's path.
				return 0, h1.NotSimple, nil
			}
			return 0, h1.Incomplete, err
		}
	}
}

// skipBuffered discards a response whose whole body is already buffered
// and reports whether the connection can be reused.
func skipBuffered(br *bufio.Reader, n int, h *h1.Head, method []byte) bool {
	if h.Close {
		return false
	}
	size := int64(0)
	if !h1.BodyLess(method, h.Status) {
		if h.ContentLength < 0 {
			return false
		}
		size = h.ContentLength
	}
	if int64(br.Buffered()) < int64(n)+size {
		return false
	}
	_, err := br.Discard(n + int(size))
	return err == nil
}

// Response body framings.
const (
	bodyNone    = iota // HEAD, 1xx, 204, 304
	bodyFixed          // Content-Length
	bodyChunked        // passed through chunk by chunk
	bodyToEOF          // until the origin closes: sent on chunked
)

// relay writes the origin's response (head at br, n bytes) to the client
// and streams its body, leaving its end in the client's buffer for
// flushResponse; it reports whether the upstream connection ended
// cleanly at the response's end and may be reused. A body that breaks
// mid-way leaves the client connection to be closed (c.broken), so the
// client sees a truncated response, never a short one.
func (c *fastConn) relay(br *bufio.Reader, n int) bool {
	rh, w := &c.resp, c.bw
	mode := bodyFixed
	switch {
	case h1.BodyLess(c.head.Method, rh.Status):
		mode = bodyNone
	case rh.Chunked:
		mode = bodyChunked
	case rh.ContentLength < 0:
		mode = bodyToEOF
	}
	w.WriteString(statusLine(rh.Status))
	writeFields(w, rh.Fields)
	if len(c.cookie) > 0 {
		w.WriteString("Set-Cookie: ")
		w.Write(c.cookie)
		w.WriteString("\r\n")
	}
	if rh.ContentLength >= 0 && rh.Status != http.StatusNoContent {
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(c.num[:0], rh.ContentLength, 10))
		w.WriteString("\r\n")
	}
	if mode == bodyChunked || mode == bodyToEOF {
		w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	c.endHead(w, rh.HasDate)
	if _, err := br.Discard(n); err != nil {
		c.broken = true
		return false
	}
	var ok bool
	switch mode {
	case bodyNone:
		ok = true
	case bodyFixed:
		ok = c.copyFixed(br, rh.ContentLength)
	case bodyChunked:
		ok = c.copyChunked(br)
	case bodyToEOF:
		c.copyToEOF(br)
		ok = false
	}
	return ok && !c.broken && !rh.Close
}

// flushResponse sends what is left of the response to the client. The
// exchange is settled first (metrics, the endpoint's outcome, the stream
// back), as on net/http's path, where the handler returns before the
// response is flushed: a client that has its response finds it counted.
func (c *fastConn) flushResponse() {
	if c.bw.Flush() != nil {
		c.broken = true
	}
}

// endHead writes Date when the origin sent none, Connection: close when
// the connection ends after this response, and the blank line.
func (c *fastConn) endHead(w *bufio.Writer, hasDate bool) {
	if !hasDate {
		w.WriteString("Date: ")
		w.Write(httpDate())
		w.WriteString("\r\n")
	}
	if c.closeAfter || (!c.bodyDone && c.inBuf < c.bodyLen) {
		c.closeAfter = true
		w.WriteString("Connection: close\r\n")
	}
	w.WriteString("\r\n")
}

// pump moves the bytes br holds to the client, taking at most limit of
// them, after filling br once when it is empty (the client's buffer is
// flushed first, so a streaming response is never held back). take
// decides how many of the buffered bytes belong to the body.
func (c *fastConn) pump(br *bufio.Reader, take func([]byte) int) (moved int, err error) {
	if br.Buffered() == 0 {
		if c.bw.Flush() != nil {
			c.broken = true
			return 0, errClientGone
		}
		if _, err := br.Peek(1); err != nil {
			return 0, err
		}
	}
	b, _ := br.Peek(br.Buffered())
	k := take(b)
	if _, err := c.bw.Write(b[:k]); err != nil {
		c.broken = true
		return 0, errClientGone
	}
	br.Discard(k)
	return k, nil
}

var errClientGone = errors.New("client connection broke")

func (c *fastConn) copyFixed(br *bufio.Reader, size int64) bool {
	for left := size; left > 0; {
		k, err := c.pump(br, func(b []byte) int { return int(min(int64(len(b)), left)) })
		if err != nil {
			c.broken = true
			return false
		}
		left -= int64(k)
		c.sent += int64(k)
	}
	return true
}

func (c *fastConn) copyChunked(br *bufio.Reader) bool {
	var ch h1.Chunks
	var fin bool
	var bad error
	for !fin {
		_, err := c.pump(br, func(b []byte) int {
			k, d, e := ch.Scan(b)
			fin, bad = d, e
			return k
		})
		c.sent = int64(ch.Data()) // the data passed on, without the framing
		if err != nil || bad != nil {
			c.broken = true
			return false
		}
	}
	return true
}

// copyToEOF sends a body delimited by the origin's close as chunks.
func (c *fastConn) copyToEOF(br *bufio.Reader) {
	for {
		if br.Buffered() == 0 {
			if c.bw.Flush() != nil {
				c.broken = true
				return
			}
			if _, err := br.Peek(1); err != nil {
				if err == io.EOF {
					c.bw.WriteString("0\r\n\r\n")
				} else {
					c.broken = true
				}
				return
			}
		}
		b, _ := br.Peek(br.Buffered())
		if _, err := (&chunkWriter{w: c.bw}).Write(b); err != nil {
			c.broken = true
			return
		}
		c.sent += int64(len(b))
		br.Discard(len(b))
	}
}

// exchangeSlow finishes an exchange whose response the fast parser
// declined (1xx interim responses, a head larger than the buffer, unusual
// framing): http.ReadResponse reads it and it is written from its fields.
func (c *fastConn) exchangeSlow(a *forward.Attempt, raw upstream.Raw) (int, forward.Step) {
	resp, err := raw.ReadResponse(string(c.head.Method))
	if err != nil {
		return 0, fail(a, raw, failureOf(raw, err))
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// No upgrade was asked for (upgrades are handed off): the origin
		// broke the protocol, and the connection's bytes mean nothing now.
		resp.Body.Close()
		return 0, fail(a, raw, forward.Protocol)
	}
	a.Loaded(resp.Header.Get(forward.LoadHeader))
	if !a.Respond(resp.StatusCode, resp.Header.Get("X-Corput-Error") != "") {
		resp.Body.Close()
		raw.End(false)
		return 0, a.Settle()
	}
	raw.End(c.relaySlow(resp))
	step := a.Settle()
	c.flushResponse()
	return resp.StatusCode, step
}

// relaySlow writes a response read by http.ReadResponse (its end left for
// flushResponse, as relay does).
func (c *fastConn) relaySlow(resp *http.Response) bool {
	w := c.bw
	bodyless := h1.BodyLess(c.head.Method, resp.StatusCode)
	forward.RemoveHop(resp.Header, "")
	if len(c.cookie) > 0 {
		resp.Header.Add("Set-Cookie", string(c.cookie))
	}
	for k := range resp.Trailer {
		resp.Header.Add("Trailer", k)
	}
	chunked := !bodyless && (resp.ContentLength < 0 || len(resp.Trailer) > 0)
	w.WriteString(statusLine(resp.StatusCode))
	if chunked {
		resp.Header.Del("Content-Length")
		resp.Header.Set("Transfer-Encoding", "chunked")
	} else if resp.StatusCode == http.StatusNoContent {
		resp.Header.Del("Content-Length") // a 204 has none (RFC 9110 §8.6)
	} else if resp.ContentLength >= 0 {
		resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	resp.Header.Write(w)
	c.endHead(w, resp.Header.Get("Date") != "")
	ok := true
	if !bodyless {
		var dst io.Writer = w
		var cw *chunkWriter
		if chunked {
			cw = &chunkWriter{w: w}
			dst = cw
		}
		// Flushed after each read: a response the fast parser declined
		// may be a stream.
		k, err := forward.Copy(dst, resp.Body, c.bw.Flush)
		c.sent = k
		if err != nil {
			c.broken = true
			resp.Body.Close()
			return false
		}
		if cw != nil {
			w.WriteString("0\r\n")
			resp.Trailer.Write(w)
			w.WriteString("\r\n")
		}
	}
	resp.Body.Close()
	return ok && !resp.Close
}

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

// writeError writes the gateway's own answer for reason (as writeError
// does through net/http) and returns its status.
func (c *fastConn) writeError(reason forward.Reason) int {
	w := c.bw
	w.WriteString(statusLine(reason.Status()))
	reason.Fields(func(name, value string) {
		w.WriteString(name)
		w.WriteString(": ")
		w.WriteString(value)
		w.WriteString("\r\n")
	})
	body := reason.Body()
	w.WriteString("Content-Length: ")
	w.Write(strconv.AppendInt(c.num[:0], int64(len(body)), 10))
	w.WriteString("\r\n")
	c.endHead(w, false)
	if string(c.head.Method) != http.MethodHead {
		w.WriteString(body)
		c.sent = int64(len(body))
	}
	if w.Flush() != nil {
		c.broken = true
	}
	return reason.Status()
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
