package exchange

import (
	"errors"
	"io"
	"strconv"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h2"
	"github.com/corput/corput/internal/upstream"
)

// H2 makes one attempt's exchange on an HTTP/2 connection: the request's
// fields go straight into a stream's header block, and the response is
// relayed from the stream's fields and DATA. No goroutine (but a duplex
// body's sender), no http.Request and no header map on the way (package
// h2).
func (x *State) H2(a *forward.Attempt, mux upstream.Mux, req *Request, c Client) (int, forward.Step) {
	done := x.deadline(req.Deadline)
	defer x.stopDeadline(done)
	s, err := x.openStream(mux.H2(), req)
	if err != nil {
		return 0, a.Failed(forward.Refused) // nothing was sent
	}
	if req.hasBody() {
		if req.Duplex {
			s.Hold()
			go sendBody(s, req)
		} else if err := sendBodyInline(s, req, x.trailerFields(req.Trailer), done); err != nil {
			s.Unhold()
			return 0, a.Failed(failureOf(err, nil))
		}
	}
	// The client is watched until the response is relayed: one that
	// leaves cuts the exchange (the stream is reset).
	c.Watch(s)
	status, err := s.Head(done)
	if err != nil {
		gone := c.Unwatch()
		s.Cancel(err)
		s.Unhold()
		if gone {
			return 0, a.Failed(forward.ClientLeft)
		}
		return 0, a.Failed(failureOf(err, nil))
	}
	if v, ok := s.Value(loadField); ok {
		a.Loaded(v)
	}
	_, fromCorput := s.Value("x-corput-error")
	if !a.Respond(status, fromCorput) {
		c.Unwatch()
		s.Unhold()
		return 0, a.Settle()
	}
	x.relayH2(s, status, req.Method, done, c)
	c.Unwatch()
	s.Unhold()
	step := a.Settle()
	c.Flush()
	return status, step
}

// sendBodyInline sends the whole request body before the response is
// read, and ends the stream. An origin that answered (or reset) before the
// whole body is not an error: its answer is read next, and the serving
// path finds the body's rest unread.
func sendBodyInline(s *h2.Stream, req *Request, trailer *h2.Fields, w h2.Wait) error {
	err := copyBody(s, req.Body, w)
	if err == nil {
		err = s.CloseWrite(trailer)
	}
	if errors.Is(err, h2.ErrBodyNotWanted) {
		return nil
	}
	return err
}

// sendBody is a duplex body's sender, on a goroutine of its own that holds
// the stream: the body streams while the response streams back. A failure
// resets the stream.
func sendBody(s *h2.Stream, req *Request) {
	defer s.Unhold()
	err := copyBody(s, req.Body, h2.Wait{}) // a window wait ends when the stream does
	if err == nil {
		var x State // its own trailer block: the exchange's state is not this goroutine's
		err = s.CloseWrite(x.trailerFields(req.Trailer))
	}
	if err != nil && !errors.Is(err, h2.ErrBodyNotWanted) {
		s.Cancel(err)
	}
}

// copyBody copies a request body to the stream.
func copyBody(s *h2.Stream, body io.Reader, w h2.Wait) error {
	bp := forward.Buffer()
	defer forward.PutBuffer(bp)
	for {
		k, rerr := body.Read(*bp)
		if k > 0 {
			if _, err := s.Write((*bp)[:k], w); err != nil {
				return err
			}
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}

// relayH2 relays the stream's response: the head from its fields, then the
// body as DATA arrives (a Stream when the origin gave no length or
// announced trailers), and the trailers. A body that breaks is aborted.
func (x *State) relayH2(s *h2.Stream, status int, method string, done h2.Wait, c Client) {
	h := x.newHead(status, true)
	trailers := false
	for _, hf := range s.Header() {
		switch hf.Name {
		case "content-length":
			if n, err := strconv.ParseInt(hf.Value, 10, 64); err == nil && n >= 0 {
				h.Length = n
			}
			continue
		case "trailer":
			trailers = true
		case "date":
			h.HasDate = true
		}
		h.Fields = append(h.Fields, hf) // connection-specific fields never reach here (package h2 drops them)
	}
	x.fields = h.Fields
	switch {
	case bodyLess(method, status):
		h.Framing = None
	case h.Length < 0 || trailers:
		h.Framing = Stream
	default:
		h.Framing = Length
	}
	if c.WriteHead(h) != nil {
		return
	}
	if h.Framing == None {
		c.End(nil, 0)
		return
	}
	bp := forward.Buffer()
	defer forward.PutBuffer(bp)
	var sent int64
	for {
		if !s.Buffered() && c.Flush() != nil { // a stream is never held back
			c.Abort(sent)
			return
		}
		k, err := s.Read(*bp, done)
		if k > 0 {
			if _, werr := c.Write((*bp)[:k]); werr != nil {
				c.Abort(sent)
				return
			}
			sent += int64(k)
		}
		if err != nil {
			if err != io.EOF || h.Framing == Length && sent != h.Length {
				c.Abort(sent)
				return
			}
			break
		}
	}
	var trailer []hpack.HeaderField
	if h.Framing == Stream {
		trailer = s.Trailer()
	}
	c.End(trailer, sent)
}

// deadline returns the wait that fires at t (none when t is zero), on the
// state's own timer, reused.
func (x *State) deadline(t time.Time) h2.Wait {
	if t.IsZero() {
		return h2.Wait{}
	}
	d := time.Until(t)
	if x.timer == nil {
		x.timer = time.NewTimer(d)
	} else {
		x.timer.Reset(d)
	}
	return h2.Wait{Expire: x.timer.C}
}

// stopDeadline stops the timer deadline started.
func (x *State) stopDeadline(w h2.Wait) {
	if w.Expire != nil {
		x.timer.Stop()
	}
}
