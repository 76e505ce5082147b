package exchange

import (
	"errors"
	"io"
	"strconv"
	"sync/atomic"
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
	x.edit = req.Edit
	atomic.StoreInt64(&req.sent, 0)
	body := req.hasBody()
	by, _ := req.headBy(req.Start)
	if body {
		by, _ = req.headBy(time.Time{}) // response_header counts from the body's end
	}
	done := x.deadline(by)
	defer x.stopDeadline()
	s, err := x.openStream(mux.H2(), req)
	if err != nil {
		return 0, a.Failed(forward.Refused) // nothing was sent
	}
	if body {
		if req.Duplex {
			s.Hold()
			go sendBody(s, req)
		} else if err := sendBodyInline(s, req, x.trailerFields(req.Trailer), done); err != nil {
			s.Cancel(err) // the origin sees the request aborted
			s.Unhold()
			f := failureOf(err, nil)
			if f == forward.Timeout {
				l := limitOf(nil, req)
				a.Expired(l)
				f = timeoutFailure(l)
			}
			return 0, a.Failed(f)
		}
		by, _ = req.headBy(req.lastSent())
		done = x.deadline(by)
	}
	// The client is watched until the response is relayed: one that
	// leaves cuts the exchange (the stream is reset).
	c.Watch(s)
	status, err := s.Head(done)
	for errors.Is(err, h2.ErrDone) {
		l, next := req.headExpired(time.Now())
		if l != forward.NoLimit {
			err = limitError(l)
			a.Expired(l)
			break
		}
		by = next
		done = x.deadline(by)
		status, err = s.Head(done)
	}
	if err != nil {
		gone := c.Unwatch()
		s.Cancel(err)
		s.Unhold()
		f := pastLimit(a, req, failureOf(err, nil))
		if gone && !cutBody(f) {
			return 0, a.Failed(forward.ClientLeft)
		}
		return 0, a.Failed(f)
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
	x.relayH2(s, status, req, by, c, a)
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
	err := copyBody(s, req, w)
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
	err := copyBody(s, req, h2.Wait{}) // a window wait ends when the stream does
	if err == nil {
		var x State // its own trailer block: the exchange's state is not this goroutine's
		err = s.CloseWrite(x.trailerFields(req.Trailer))
	}
	if err != nil && !errors.Is(err, h2.ErrBodyNotWanted) {
		s.Cancel(err)
	}
}

// copyBody copies a request body to the stream, recording when its bytes
// go out (stream_idle and response_header count from them).
func copyBody(s *h2.Stream, req *Request, w h2.Wait) error {
	bp := forward.Buffer()
	defer forward.PutBuffer(bp)
	for {
		k, rerr := req.Body.Read(*bp)
		if k > 0 {
			if _, err := s.Write((*bp)[:k], w); err != nil {
				return err
			}
			req.markSent()
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
// announced trailers), and the trailers. A body that breaks is aborted; one
// that a limit ends (the whole request's, or stream_idle) is reset and
// the limit told to a. by is the deadline of the state's timer, the
// head's.
func (x *State) relayH2(s *h2.Stream, status int, req *Request, by time.Time, c Client, a *forward.Attempt) {
	method := req.Method
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
	if x.writeHeadTo(c, h) != nil {
		return
	}
	if h.Framing == None {
		c.End(nil, 0)
		return
	}
	bp := forward.Buffer()
	defer forward.PutBuffer(bp)
	var sent int64
	var last time.Time // when the latest wait for DATA began, after bytes came
	armed, came := false, true
	done := h2.Wait{Expire: x.expire(by)}
	for {
		if !s.Buffered() {
			if c.Flush() != nil { // a stream is never held back
				c.Abort(sent)
				return
			}
			if came {
				last, came = time.Now(), false
			}
			if !armed { // the body's deadline, when the head's comes too late
				armed = true
				if want := req.bodyBy(last); !want.IsZero() && (by.IsZero() || want.Before(by)) {
					by = want
					done = x.deadline(by)
				}
			}
		}
		k, err := s.Read(*bp, done)
		if errors.Is(err, h2.ErrDone) {
			l, next := req.bodyExpired(time.Now(), last)
			if l == forward.NoLimit {
				by = next
				done = x.deadline(by)
				continue
			}
			s.Cancel(err) // RST_STREAM
			if l == forward.LimitStreamIdle {
				a.IdleTimedOut()
			} else {
				a.Expired(l)
			}
			c.Abort(sent)
			return
		}
		if k > 0 {
			came = true
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
		x.stopDeadline()
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

// expire is the channel of the wait deadline(t) started (nil for none).
func (x *State) expire(t time.Time) <-chan time.Time {
	if t.IsZero() {
		return nil
	}
	return x.timer.C
}

// stopDeadline stops the timer deadline started.
func (x *State) stopDeadline() {
	if x.timer != nil {
		x.timer.Stop()
	}
}
