package exchange

import (
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/upstream"
)

// The time limits of an exchange (docs/gateway.md, "Time limits"). Each
// wait carries one deadline, the earliest limit's; when it fires, the
// limits are judged again at that moment, and a wait whose limit moved
// (a body byte went out, or came in, since the deadline was set) goes on
// to the next deadline. So a deadline is set about once per limit's span,
// never per read.

// markSent records that request bytes just went out.
func (r *Request) markSent() { atomic.StoreInt64(&r.sent, time.Now().UnixNano()) }

// deadlineLimit is the limit Deadline is: timeouts.request unless told.
func (r *Request) deadlineLimit() forward.Limit {
	if r.DeadlineLimit == forward.NoLimit {
		return forward.LimitRequest
	}
	return r.DeadlineLimit
}

// lastSent is when request bytes last went out: the attempt's start
// before any body byte.
func (r *Request) lastSent() time.Time {
	if n := atomic.LoadInt64(&r.sent); n != 0 {
		return time.Unix(0, n)
	}
	return r.Start
}

// headBy is when the wait for the response head ends, for a request whose
// last byte went out at sent (zero: not yet, response_header has not
// begun), and the limit that ends it; zero for none.
func (r *Request) headBy(sent time.Time) (time.Time, forward.Limit) {
	t, l := r.Deadline, r.deadlineLimit()
	if !r.PerTry.IsZero() && (t.IsZero() || r.PerTry.Before(t)) {
		t, l = r.PerTry, forward.LimitPerTry
	}
	if r.HeadTimeout > 0 && !sent.IsZero() {
		if h := sent.Add(r.HeadTimeout); t.IsZero() || h.Before(t) {
			t, l = h, forward.LimitResponseHeader
		}
	}
	return t, l
}

// headExpired judges a wait for the response head that timed out at now:
// the limit that passed, or NoLimit and the deadline to wait on to.
func (r *Request) headExpired(now time.Time) (forward.Limit, time.Time) {
	by, l := r.headBy(r.lastSent())
	if by.IsZero() || now.Before(by) {
		return forward.NoLimit, by
	}
	return l, by
}

// bodyExpired judges a wait for response body bytes that timed out at
// now, the origin's last bytes having come at last: the limit that passed
// (the whole request's, or stream_idle), or NoLimit and the deadline to
// wait on to (zero: none).
func (r *Request) bodyExpired(now, last time.Time) (forward.Limit, time.Time) {
	if !r.Deadline.IsZero() && !now.Before(r.Deadline) {
		return r.deadlineLimit(), r.Deadline
	}
	next := r.Deadline
	if r.IdleTimeout > 0 {
		if s := r.lastSent(); s.After(last) {
			last = s // bytes went the other way
		}
		idleBy := last.Add(r.IdleTimeout)
		if !now.Before(idleBy) {
			return forward.LimitStreamIdle, idleBy
		}
		if next.IsZero() || idleBy.Before(next) {
			next = idleBy
		}
	}
	return forward.NoLimit, next
}

// bodyBy is the deadline of the first wait for body bytes after a head
// that came at now: the whole request's, or stream_idle's if sooner.
func (r *Request) bodyBy(now time.Time) time.Time {
	t := r.Deadline
	if r.IdleTimeout > 0 {
		if i := now.Add(r.IdleTimeout); t.IsZero() || i.Before(t) {
			t = i
		}
	}
	return t
}

// timeoutFailure is how a limit that passed before the response head
// fails the attempt: the whole request's limits (request, grpc-timeout)
// as Timeout, the attempt's own (response_header, per_try) as
// HeadTimeout.
func timeoutFailure(l forward.Limit) forward.Failure {
	if l == forward.LimitRequest || l == forward.LimitGRPC {
		return forward.Timeout
	}
	return forward.HeadTimeout
}

// writing records that request body bytes go out, and bounds their write
// by stream_idle when raw is given (the body sent inline, its writer
// owning the connection).
func (r *Request) writing(raw upstream.Raw) {
	r.markSent()
	if raw != nil && r.IdleTimeout > 0 {
		t := time.Now().Add(r.IdleTimeout)
		if !r.Deadline.IsZero() && r.Deadline.Before(t) {
			t = r.Deadline
		}
		raw.WriteBy(t)
	}
}

// pastLimit reads an exchange that broke before its head, once the head's
// limit had passed, as that limit's timeout: an origin that gives up on
// the request's own deadline (a gRPC server past the grpc-timeout it was
// sent) resets the stream at about the moment the gateway's timer fires,
// and the answer is the timeout's whichever of the two came first.
func pastLimit(a *forward.Attempt, req *Request, f forward.Failure) forward.Failure {
	if f != forward.Broken {
		return f
	}
	l, _ := req.headExpired(time.Now())
	if l == forward.NoLimit {
		return f
	}
	a.Expired(l)
	return timeoutFailure(l)
}

// limitError fails a wait for the response head that a limit ended.
type limitError forward.Limit

func (e limitError) Error() string {
	return "no response head within " + forward.Limit(e).String()
}

// limitOf is the limit that ended an exchange that failed on a timeout
// before its head: the one err names, else the head's limit in force.
func limitOf(err error, req *Request) forward.Limit {
	var le limitError
	if errors.As(err, &le) {
		return forward.Limit(le)
	}
	if l, _ := req.headExpired(time.Now()); l != forward.NoLimit {
		return l
	}
	_, l := req.headBy(req.lastSent())
	return l
}

// bodyWait keeps an HTTP/1.1 response body's reads within the request's
// limits after the head: the whole request's deadline and stream_idle.
type bodyWait struct {
	req   *Request
	raw   upstream.Raw
	set   time.Time // the read deadline in force (the head's, at first)
	last  time.Time // when the latest wait for body bytes began
	armed bool      // the body's first deadline is set
	limit forward.Limit
}

// waiting is called before a read that waits for the origin: the bytes
// before it came by now, and the body's deadline is set once (only when
// the head's would come too late: most responses never wait).
func (w *bodyWait) waiting() {
	now := time.Now()
	w.last = now
	if w.armed {
		return
	}
	w.armed = true
	if want := w.req.bodyBy(now); !want.IsZero() && (w.set.IsZero() || want.Before(w.set)) {
		w.set = want
		w.raw.ReadBy(want)
	}
}

// again judges a read that timed out: it reports whether to read again
// (the deadline moved to the next limit), or records the limit that
// passed.
func (w *bodyWait) again() bool {
	l, next := w.req.bodyExpired(time.Now(), w.last)
	if l != forward.NoLimit {
		w.limit = l
		return false
	}
	w.set = next
	return w.raw.ReadBy(next) == nil
}

// report tells the attempt which limit ended the body, if one did.
func (w *bodyWait) report(a *forward.Attempt) {
	switch w.limit {
	case forward.NoLimit:
	case forward.LimitStreamIdle:
		a.IdleTimedOut()
	default:
		a.Expired(w.limit)
	}
}

// slowBody reads a response body that http.ReadResponse framed, each read
// under the deadline of the body's limits from now: its readers keep a
// timeout as their error, so a deadline is never moved after one.
type slowBody struct {
	r io.Reader
	w *bodyWait
}

func (b *slowBody) Read(p []byte) (int, error) {
	w := b.w
	now := time.Now()
	w.last = now
	if want := w.req.bodyBy(now); !want.Equal(w.set) {
		w.set = want
		w.raw.ReadBy(want)
	}
	n, err := b.r.Read(p)
	if err != nil && timedOut(err) {
		w.limit, _ = w.req.bodyExpired(time.Now().Add(time.Millisecond), w.last)
	}
	return n, err
}

// cutBody reports whether f is the client's body cut by the gateway (too
// large, or stalled): answered (413, 408) even though the serving path may
// see the client as gone (net/http ends the request's context when a body
// read fails).
func cutBody(f forward.Failure) bool {
	return f == forward.BodyTooLarge || f == forward.BodyTimeout
}
