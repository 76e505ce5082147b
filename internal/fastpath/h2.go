package fastpath

import (
	"bufio"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/h2"
	"github.com/corput/corput/internal/upstream"

	"golang.org/x/net/http2/hpack"
)

// exchangeH2 makes one attempt's exchange on an HTTP/2 connection: the
// request's fields go from the parsed head straight into a stream's
// header block, and the response is written to the client as HTTP/1.1
// from the stream's fields and DATA. No goroutine, no http.Request and no
// header map on the way (package h2).
func (c *fastConn) exchangeH2(o *cluster.Origin, a *forward.Attempt, mux upstream.Mux) (int, forward.Step) {
	done := c.deadline(o)
	defer c.stopDeadline(done)
	f := &c.h2f
	c.requestFields(f, o)
	s, err := mux.H2().Open(f, c.bodyLen == 0)
	if err != nil {
		return 0, a.Failed(forward.Refused) // nothing was sent
	}
	if c.bodyLen > 0 {
		c.bodyDone = true
		c.sw = streamWriter{s: s, done: done}
		err := c.sendBody(&c.sw)
		if err == nil {
			err = s.CloseWrite(nil)
		}
		if errors.Is(err, h2.ErrBodyNotWanted) {
			// The origin answered (or reset) before the whole body: its
			// answer is read below; the body's rest may still be in the
			// client's socket, so the connection ends after it.
			c.broken, err = true, nil
		}
		if err != nil {
			s.Release()
			if errors.Is(err, errClientBody) {
				c.broken = true
				return 0, a.Failed(forward.ClientLeft)
			}
			return 0, a.Failed(streamFailure(err))
		}
	}
	c.watch.arm(s, time.Now())
	status, err := s.Head(done)
	c.watch.disarm()
	if err != nil {
		s.Release()
		if c.watch.gone.Load() {
			c.broken = true
			return 0, a.Failed(forward.ClientLeft)
		}
		return 0, a.Failed(streamFailure(err))
	}
	if v, ok := s.Value(loadField); ok {
		a.Loaded(v)
	}
	_, fromCorput := s.Value("x-corput-error")
	if !a.Respond(status, fromCorput) {
		s.Release()
		return 0, a.Settle()
	}
	c.relayH2(s, status, done)
	s.Release()
	step := a.Settle()
	c.flushResponse()
	return status, step
}

// loadField is forward.LoadHeader as HTTP/2 spells it.
var loadField = strings.ToLower(forward.LoadHeader)

// streamFailure classifies a stream's failure before any response.
func streamFailure(err error) forward.Failure {
	switch {
	case errors.Is(err, h2.ErrDone):
		return forward.Timeout
	case h2.IsRefused(err):
		return forward.Refused
	case errors.Is(err, h2.ErrHeadTooLarge):
		return forward.HeadTooLarge
	}
	var se *h2.StreamError
	if errors.As(err, &se) && se.Code == h2.CodeProtocol {
		return forward.Protocol
	}
	return forward.Broken
}

// deadline returns the wait that fires at the origin's request timeout
// (none without one), on the connection's own timer, reused.
func (c *fastConn) deadline(o *cluster.Origin) h2.Wait {
	t := o.RequestTimeout()
	if t <= 0 {
		return h2.Wait{}
	}
	if c.h2t == nil {
		c.h2t = time.NewTimer(t)
	} else {
		c.h2t.Reset(t)
	}
	return h2.Wait{Expire: c.h2t.C}
}

// stopDeadline stops the timer deadline started.
func (c *fastConn) stopDeadline(w h2.Wait) {
	if w.Expire != nil {
		c.h2t.Stop()
	}
}

// requestFields encodes the request head, rewritten for the origin as
// writeRequest does for HTTP/1.1: the same fields, forwarding and trace
// fields, and Content-Length.
func (c *fastConn) requestFields(f *h2.Fields, o *cluster.Origin) {
	h := &c.head
	f.Reset()
	scheme := "http"
	if c.tls != nil || o.TLS() {
		scheme = "https"
	}
	f.Pseudo(bstr(h.Method), scheme, bstr(h.Host), bstr(h.Target))
	for i := range h.Fields {
		if fl := &h.Fields[i]; !fl.Hop {
			f.Add(bstr(fl.Name), bstr(fl.Value))
		}
	}
	if h.TETrailers {
		f.Add("te", "trailers")
	}
	field := func(name string, value []byte) { f.Add(name, bstr(value)) }
	c.xff = c.fwd.Write(h.Host, h, c.xff, field)
	c.tr.Fields(field)
	if c.bodyLen > 0 || wantsLength(h.Method) {
		f.Add("content-length", bstr(strconv.AppendInt(c.num[:0], c.bodyLen, 10)))
	}
}

// sendBody sends the request body: what the head's read buffered, then
// the rest from the client.
func (c *fastConn) sendBody(w *streamWriter) error {
	if _, err := w.Write(c.buf[c.bodyAt : c.bodyAt+int(c.inBuf)]); err != nil {
		return err
	}
	return c.copyBody(w, c.bodyLen-c.inBuf, time.Time{})
}

// streamWriter writes a request body to a stream.
type streamWriter struct {
	s    *h2.Stream
	done h2.Wait
}

func (w *streamWriter) Write(p []byte) (int, error) { return w.s.Write(p, w.done) }

// relayH2 writes the stream's response to the client: the head from its
// fields (names in net/http's canonical case), then the body as DATA
// arrives, chunked when the origin gave no length or announced trailers,
// and the trailers after the last chunk. A body that breaks leaves the
// client connection to be closed (c.broken): a truncated response, never
// a short one.
func (c *fastConn) relayH2(s *h2.Stream, status int, done h2.Wait) {
	w := c.bw
	size, trailers, hasDate := int64(-1), false, false
	w.WriteString(statusLine(status))
	for _, hf := range s.Header() {
		switch hf.Name {
		case "content-length":
			if n, err := strconv.ParseInt(hf.Value, 10, 64); err == nil && n >= 0 {
				size = n
			}
			continue
		case "trailer":
			trailers = true
		case "date":
			hasDate = true
		}
		writeField(w, hf) // connection-specific fields never reach here (package h2 drops them)
	}
	if len(c.cookie) > 0 {
		w.WriteString("Set-Cookie: ")
		w.Write(c.cookie)
		w.WriteString("\r\n")
	}
	bodyless := h1.BodyLess(c.head.Method, status)
	chunked := !bodyless && (size < 0 || trailers)
	switch {
	case chunked:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	case size >= 0 && status != 204:
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(c.num[:0], size, 10))
		w.WriteString("\r\n")
	}
	c.endHead(w, hasDate)
	if bodyless {
		return
	}
	bp := forward.Buffer()
	defer forward.PutBuffer(bp)
	cw := &c.cw
	cw.w = w
	for {
		if !s.Buffered() && w.Flush() != nil { // a stream is never held back
			c.broken = true
			return
		}
		k, err := s.Read(*bp, done)
		if k > 0 {
			var werr error
			if chunked {
				_, werr = cw.Write((*bp)[:k])
			} else {
				_, werr = w.Write((*bp)[:k])
			}
			if werr != nil {
				c.broken = true
				return
			}
			c.sent += int64(k)
		}
		if err != nil {
			if err != io.EOF || !chunked && c.sent != size {
				c.broken = true
				return
			}
			break
		}
	}
	if chunked {
		w.WriteString("0\r\n")
		for _, hf := range s.Trailer() {
			writeField(w, hf)
		}
		w.WriteString("\r\n")
	}
}

// writeField writes an HTTP/2 field as an HTTP/1.1 field line, its name
// in net/http's canonical form (content-type as Content-Type), as net/http's
// path writes it.
func writeField(w *bufio.Writer, hf hpack.HeaderField) {
	writeCanonical(w, hf.Name)
	w.WriteString(": ")
	w.WriteString(hf.Value)
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
