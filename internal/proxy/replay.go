package proxy

import (
	"math"

	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/replay"
)

// replay readies the request's body to be sent again and says what of the
// request may be (forward.Replay) under pol. A request may be replayed
// once sent when its method is idempotent and it asks no upgrade, or when
// pol names an idempotency header and the request carries it. Its body,
// if any, is read by each attempt through s.body, which keeps up to
// retry.replay_buffer bytes under the gateway-wide cap (package replay).
func (s *Stream) replay(in *Inbound, req *exchange.Request, pol *forward.Policy, cap *replay.Cap) forward.Replay {
	r := forward.Replay{Resend: req.Upgrade == "" && forward.Idempotent(in.Method)}
	if !r.Resend && pol.IdempotencyHeader != "" {
		_, r.Resend = in.Head.Value(pol.IdempotencyHeader, 0)
	}
	s.bodyOn = req.Body != nil && req.Length != 0
	if !s.bodyOn {
		return r
	}
	if req.Duplex && (req.Length < 0 || req.TE) {
		// A stream (gRPC, a chunked upload): its sender may still be
		// reading the client when the exchange fails. It goes again only
		// if no exchange started: nothing of it was read.
		s.bodyOn, s.stream.started = false, false
		r.Body = &s.stream
		return r
	}
	if s.body == nil {
		s.body = new(replay.Body)
	}
	s.body.Reset(req.Body, pol.ReplayBuffer, cap)
	if s.mirror != nil && s.mirrorMax <= math.MaxInt32 {
		s.body.KeepUpTo(int(s.mirrorMax)) // the mirror takes it whole (endMirror)
	}
	r.Body = s.body
	return r
}

// endBody ends the request body's kept copy. One still read by a duplex
// body's sender of an earlier attempt is left to it, and the next
// request with a body takes a new one.
func (s *Stream) endBody() {
	if s.bodyOn && !s.body.Release() {
		s.body = nil
	}
	s.bodyOn = false
}

// streamBody is a streaming body's forward.Rewinder: nothing of it is
// kept, so it can go again only while no exchange has started.
type streamBody struct{ started bool }

func (b *streamBody) Kept() bool { return !b.started }
