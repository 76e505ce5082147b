package exchange

import (
	"bufio"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/upstream"
)

// writeWait is how long a finished response waits for a duplex request
// body's writer to report before the connection is given up (the origin
// may have read the whole body a moment ago).
const writeWait = 50 * time.Millisecond

// H1 makes one attempt's exchange on an HTTP/1.1 connection: the request
// head and body written on the raw connection, the response head parsed in
// place and relayed byte for byte when the client takes it so (the fast
// path), through http.ReadResponse otherwise and for what the fast parser
// declines (1xx interim responses, a head larger than the buffer, unusual
// framing).
func (x *State) H1(a *forward.Attempt, raw upstream.Raw, req *Request, c Client) (int, forward.Step) {
	body := req.hasBody()
	x.edit = req.Edit
	atomic.StoreInt64(&req.sent, 0)
	// Without a body the head's wait starts at once; with one the body's
	// writes are bounded by the whole request's and the attempt's limits,
	// and response_header counts from its last byte sent.
	by, _ := req.headBy(req.Start)
	if body {
		by, _ = req.headBy(time.Time{})
	}
	ubr, ubw, err := raw.Begin(by, body)
	if err != nil {
		return 0, a.Failed(forward.Refused) // nothing was sent
	}
	x.writeHead(ubw, req)
	var wrote chan error
	if body && req.Duplex {
		// The body streams while the response is read: an origin may
		// answer (413, 401) before it has read all of it.
		if err := ubw.Flush(); err != nil {
			return 0, fail(a, raw, failureOf(err, raw))
		}
		wrote = make(chan error, 1)
		go func() {
			err := writeBody(ubw, req, nil)
			if err != nil {
				raw.Close() // the response cannot be trusted to end: cut it
			}
			wrote <- err
		}()
	} else if err := x.sendInline(ubw, req, body, raw); err != nil {
		return 0, fail(a, raw, failureOf(err, raw))
	}
	if body {
		by, _ = req.headBy(req.lastSent())
		raw.ReadBy(by)
	}
	// The client is watched until the response is relayed: one that
	// leaves cuts the exchange (the connection is closed).
	c.Watch(raw)
	rn, res, err := readResponseHead(ubr, &x.resp, c.RawChunks())
	for err != nil && timedOut(err) {
		l, next := req.headExpired(time.Now())
		if l != forward.NoLimit {
			err = limitError(l)
			break
		}
		if raw.ReadBy(next) != nil {
			break
		}
		by = next
		rn, res, err = readResponseHead(ubr, &x.resp, c.RawChunks())
	}
	if err == nil && res != h1.Complete {
		return x.h1Slow(a, raw, req, c, wrote)
	}
	if err != nil {
		return noResponse(a, raw, req, c, wrote, err)
	}
	rh := &x.resp
	if rn > req.MaxHead {
		c.Unwatch()
		endWrite(wrote, req)
		return 0, fail(a, raw, forward.HeadTooLarge)
	}
	if v, ok := rh.Value("endpoint-load-metrics", 0); ok {
		a.Loaded(h1.View(v))
	}
	if !a.Respond(rh.Status, rh.Has("x-corput-error")) {
		c.Unwatch()
		raw.End(endWrite(wrote, req) == nil && skipBuffered(ubr, rn, rh, req.Method))
		return 0, a.Settle()
	}
	bw := bodyWait{req: req, raw: raw, set: by}
	ok := x.relay(ubr, rn, req.Method, c, &bw)
	bw.report(a)
	c.Unwatch()
	raw.End(endWrite(wrote, req) == nil && ok)
	step := a.Settle()
	c.Flush()
	return rh.Status, step
}

// sendInline writes the body after the head, and flushes.
func (x *State) sendInline(w *bufio.Writer, req *Request, body bool, raw upstream.Raw) error {
	if body {
		if err := writeBody(w, req, raw); err != nil {
			return err
		}
	}
	return w.Flush()
}

// writeBody writes the request body: Length bytes, or chunked with its
// trailers when the length is unknown. A body that ends short of its
// length fails with io.ErrUnexpectedEOF. With raw (the body sent inline:
// its writer owns the connection) each write is bounded by stream_idle.
func writeBody(w *bufio.Writer, req *Request, raw upstream.Raw) error {
	bp := forward.Buffer()
	defer forward.PutBuffer(bp)
	buf := *bp
	if req.Length >= 0 {
		for left := req.Length; left > 0; {
			k, err := req.Body.Read(buf[:min(int64(len(buf)), left)])
			left -= int64(k)
			req.writing(raw)
			if _, werr := w.Write(buf[:k]); werr != nil {
				return werr
			}
			if err != nil && left > 0 {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
		}
		err := w.Flush()
		req.markSent()
		return err
	}
	var num [16]byte
	for {
		k, err := req.Body.Read(buf)
		if k > 0 {
			req.writing(raw)
			w.Write(strconv.AppendInt(num[:0], int64(k), 16))
			w.WriteString("\r\n")
			w.Write(buf[:k])
			w.WriteString("\r\n")
			// A streamed body goes out as it comes.
			if werr := w.Flush(); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	w.WriteString("0\r\n")
	for k, vv := range req.Trailer {
		for _, v := range vv {
			writeLine(w, k, v)
		}
	}
	w.WriteString("\r\n")
	err := w.Flush()
	req.markSent()
	return err
}

// waitWrote waits up to d for a duplex body's writer.
func waitWrote(wrote chan error, d time.Duration) error {
	select {
	case err := <-wrote:
		wrote <- err // kept for a later look
		return err
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-wrote:
		wrote <- err
		return err
	case <-t.C:
		return errors.New("request body still being written when the response ended")
	}
}

// endWrite ends a duplex body's writer with the exchange and returns its
// error: nil when it finished (or there is none), and a connection is kept
// only then. One still at work after writeWait is cut: the client's body is
// closed when it can be, since the writer may be blocked reading it rather
// than the socket (the connection itself is not reused).
func endWrite(wrote chan error, req *Request) error {
	if wrote == nil {
		return nil
	}
	err := waitWrote(wrote, writeWait)
	if err != nil && len(wrote) == 0 {
		if cl, ok := req.Body.(io.Closer); ok {
			cl.Close()
		}
	}
	return err
}

// noResponse ends an exchange that got no response head: err says why,
// unless the client left, or a duplex body's writer failed (its error is
// the cause: the connection was cut for it).
func noResponse(a *forward.Attempt, raw upstream.Raw, req *Request, c Client, wrote chan error, err error) (int, forward.Step) {
	gone := c.Unwatch()
	if werr := endWrite(wrote, req); werr != nil {
		err = werr
	}
	f := failureOf(err, raw)
	if gone && !cutBody(f) {
		return 0, fail(a, raw, forward.ClientLeft)
	}
	if f == forward.Timeout || f == forward.HeadTimeout {
		a.Expired(limitOf(err, req))
	} else {
		f = pastLimit(a, req, f)
	}
	return 0, fail(a, raw, f)
}

// fail ends an exchange's I/O on raw, the connection not to be reused,
// and reports f.
func fail(a *forward.Attempt, raw upstream.Raw, f forward.Failure) forward.Step {
	raw.End(false)
	return a.Failed(f)
}

// readResponseHead reads until br holds a whole response head and parses
// it, when fast says the client can take it parsed in place. NotSimple
// (also for a head larger than br's buffer, and always without fast)
// leaves everything unread for http.ReadResponse.
func readResponseHead(br *bufio.Reader, h *h1.Head, fast bool) (int, h1.Result, error) {
	for {
		if k := br.Buffered(); k > 0 {
			if !fast {
				return 0, h1.NotSimple, nil
			}
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
				// what it sent.
				return 0, h1.NotSimple, nil
			}
			return 0, h1.Incomplete, err
		}
	}
}

// skipBuffered discards a response whose whole body is already buffered
// and reports whether the connection can be reused.
func skipBuffered(br *bufio.Reader, n int, h *h1.Head, method string) bool {
	if h.Close {
		return false
	}
	size := int64(0)
	if !bodyLess(method, h.Status) {
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

// bodyLess reports whether a response of status to method has no body.
func bodyLess(method string, status int) bool {
	return method == http.MethodHead || status < 200 || status == http.StatusNoContent || status == http.StatusNotModified
}

// relay writes the origin's response (head at br, n bytes, parsed in
// x.resp) to the client and streams its body byte for byte: a chunked one
// with its framing (Framing Chunked), one delimited by the origin's close
// as a Stream. It reports whether the upstream connection ended cleanly at
// the response's end and may be reused. A body that breaks mid-way is
// aborted (Client.Abort).
func (x *State) relay(br *bufio.Reader, n int, method string, c Client, bw *bodyWait) bool {
	rh := &x.resp
	h := x.newHead(rh.Status, false)
	for i := range rh.Fields {
		if f := &rh.Fields[i]; !f.Hop {
			h.Fields = append(h.Fields, hpack.HeaderField{Name: h1.View(f.Name), Value: h1.View(f.Value)})
		}
	}
	x.fields = h.Fields
	h.Length, h.HasDate = rh.ContentLength, rh.HasDate
	switch {
	case bodyLess(method, rh.Status):
		h.Framing = None
	case rh.Chunked:
		h.Framing, h.Length = Chunked, -1
	case rh.ContentLength < 0:
		h.Framing = Stream
	default:
		h.Framing = Length
	}
	if x.writeHeadTo(c, h) != nil {
		return false
	}
	if _, err := br.Discard(n); err != nil {
		c.Abort(0)
		return false
	}
	var sent int64
	var err error
	switch h.Framing {
	case Length:
		left := rh.ContentLength
		if left > 0 {
			err = pump(br, c, bw, func(b []byte) (int, bool, error) {
				k := int(min(int64(len(b)), left))
				left -= int64(k)
				return k, left == 0, nil
			})
		}
		sent = rh.ContentLength - left
	case Chunked:
		var ch h1.Chunks
		err = pump(br, c, bw, ch.Scan)
		sent = int64(ch.Data()) // the data, without the framing
	case Stream:
		err = pump(br, c, bw, func(b []byte) (int, bool, error) {
			sent += int64(len(b))
			return len(b), false, nil
		})
		if err == io.EOF {
			// The origin's close ends the body: the connection is done.
			c.End(nil, sent)
			return false
		}
	}
	if err != nil {
		c.Abort(sent)
		return false
	}
	if c.End(nil, sent) != nil {
		return false
	}
	return !rh.Close
}

// errClientGone fails a relay whose client side broke.
var errClientGone = errors.New("client connection broke")

// pump moves the response body from br to the client until take says it
// is done: take decides how many of the buffered bytes belong to the body.
// The client's side is flushed before each wait for the origin, so a
// stream is never held back. It returns nil at the body's end, the read
// error (io.EOF when the origin closed first), take's error, or
// errClientGone.
func pump(br *bufio.Reader, c Client, bw *bodyWait, take func([]byte) (k int, done bool, err error)) error {
	for {
		if br.Buffered() == 0 {
			if c.Flush() != nil {
				return errClientGone
			}
			bw.waiting()
			for {
				_, err := br.Peek(1)
				if err == nil {
					break
				}
				if !timedOut(err) || !bw.again() {
					return err
				}
			}
		}
		b, _ := br.Peek(br.Buffered())
		k, done, err := take(b)
		if _, werr := c.Write(b[:k]); werr != nil {
			return errClientGone
		}
		br.Discard(k)
		if err != nil || done {
			return err
		}
	}
}

// h1Slow finishes an exchange whose response the fast parser declined or
// the client does not take parsed in place: http.ReadResponse reads it
// (skipping 1xx interim responses) and it is relayed from its fields.
func (x *State) h1Slow(a *forward.Attempt, raw upstream.Raw, req *Request, c Client, wrote chan error) (int, forward.Step) {
	resp, err := raw.ReadResponse(req.Method)
	if err != nil {
		return noResponse(a, raw, req, c, wrote, err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		c.Unwatch()
		return x.upgrade(a, raw, req, c, resp)
	}
	a.Loaded(resp.Header.Get(forward.LoadHeader))
	if !a.Respond(resp.StatusCode, resp.Header.Get("X-Corput-Error") != "") {
		c.Unwatch()
		resp.Body.Close()
		endWrite(wrote, req)
		raw.End(false)
		return 0, a.Settle()
	}
	bw := bodyWait{req: req, raw: raw}
	ok := x.relaySlow(resp, req.Method, c, &bw)
	bw.report(a)
	c.Unwatch()
	raw.End(endWrite(wrote, req) == nil && ok)
	step := a.Settle()
	c.Flush()
	return resp.StatusCode, step
}

// relaySlow relays a response read by http.ReadResponse (its end left for
// the caller's Flush, as relay does).
func (x *State) relaySlow(resp *http.Response, method string, c Client, bw *bodyWait) bool {
	defer resp.Body.Close()
	forward.RemoveHop(resp.Header, "")
	for k := range resp.Trailer {
		resp.Header.Add("Trailer", k)
	}
	resp.Header.Del("Content-Length")
	resp.Header.Del("Transfer-Encoding")
	h := x.newHead(resp.StatusCode, false)
	h.HasDate = resp.Header.Get("Date") != ""
	h.Fields = appendSorted(h.Fields, resp.Header)
	x.fields = h.Fields
	h.Length = resp.ContentLength
	switch {
	case bodyLess(method, resp.StatusCode):
		h.Framing = None
	case resp.ContentLength < 0 || len(resp.Trailer) > 0:
		h.Framing = Stream
	default:
		h.Framing = Length
	}
	if x.writeHeadTo(c, h) != nil {
		return false
	}
	if h.Framing == None {
		return c.End(nil, 0) == nil && !resp.Close
	}
	// Flushed after each read: a response the fast parser declined may be
	// a stream.
	n, err := forward.Copy(c, &slowBody{r: resp.Body, w: bw}, c.Flush)
	if err != nil {
		c.Abort(n)
		return false
	}
	var trailer []hpack.HeaderField
	for k, vv := range resp.Trailer {
		for _, v := range vv {
			trailer = append(trailer, hpack.HeaderField{Name: k, Value: v})
		}
	}
	return c.End(trailer, n) == nil && !resp.Close
}

// upgrade completes a 101 Switching Protocols to a request that asked for
// it: the origin's connection becomes the client's tunnel (it never goes
// back to the pool). A 101 nobody asked for breaks the protocol: the
// connection's bytes mean nothing any more.
func (x *State) upgrade(a *forward.Attempt, raw upstream.Raw, req *Request, c Client, resp *http.Response) (int, forward.Step) {
	if req.Upgrade == "" || !h1.EqualFold(resp.Header.Get("Upgrade"), req.Upgrade) {
		resp.Body.Close()
		return 0, fail(a, raw, forward.Protocol)
	}
	a.Respond(resp.StatusCode, false)
	forward.RemoveHop(resp.Header, req.Upgrade)
	h := x.newHead(resp.StatusCode, false)
	h.Fields = appendSorted(h.Fields, resp.Header)
	x.fields = h.Fields
	up := raw.Upgrade()
	status := c.Upgrade(h, up)
	up.Close()
	return status, a.Settle() // after the tunnel: the stream was busy all along
}

// appendSorted appends h's fields to dst in the order http.Header.Write
// writes them: by name, each name's values in order.
func appendSorted(dst []hpack.HeaderField, h http.Header) []hpack.HeaderField {
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			dst = append(dst, hpack.HeaderField{Name: k, Value: v})
		}
	}
	return dst
}

// newHead readies the state's head for a response of status.
func (x *State) newHead(status int, lower bool) *Head {
	x.head = Head{Status: status, Fields: x.fields[:0], Lower: lower, Length: -1}
	return &x.head
}
