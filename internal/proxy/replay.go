package proxy

import (
	"context"

	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/replay"
)

// replay readies the request's body to be sent again and says what of the
// request may be (forward.Replay) under pol. A request may be replayed
// once sent when its method is idempotent and it asks no upgrade, or when
// pol names an idempotency header and the request carries it. Its body,
// if any, is read through s.body, which keeps up to retry.replay_buffer
// bytes under the gateway-wide cap; a duplex body (one that streams while
// the response does) keeps nothing, and counts as kept only until its
// first exchange starts.
func (s *Stream) replay(in *Inbound, req *exchange.Request, pol *forward.Policy, cap *replay.Cap) forward.Replay {
	r := forward.Replay{Resend: req.Upgrade == "" && forward.Idempotent(in.Method)}
	if !r.Resend && pol.IdempotencyHeader != "" {
		_, r.Resend = in.Head.Value(pol.IdempotencyHeader, 0)
	}
	if req.Body == nil || req.Length == 0 {
		return r
	}
	if req.Duplex {
		s.duplex.sent = false
		r.Body = &s.duplex
		return r
	}
	s.body.Reset(req.Body, pol.ReplayBuffer, cap)
	req.Body = &s.body
	r.Body = &s.body
	return r
}

// again readies the request's next attempt after a failed one: its body
// from the start (the Attempt went Again only with the body kept), and the
// backoff the Attempt drew, waited on the policy's clock. It returns false
// when the client left during the wait.
func (s *Stream) again(ctx context.Context, a *forward.Attempt, pol *forward.Policy) bool {
	s.body.Rewind()
	d := a.Backoff()
	if d <= 0 {
		return true
	}
	done := make(chan struct{})
	t := pol.Clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// duplexBody is a duplex request body's forward.Rewinder: nothing of it is
// kept, so it can be sent again only while no exchange has started.
type duplexBody struct{ sent bool }

func (d *duplexBody) Kept() bool { return !d.sent }
