package route

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/forward"
)

// A split shares a route's requests between origins by weight
// (routes[].split; docs/gateway.md, "Weighted split").
//
// Invariants:
//   - Pick is lock-free and allocates nothing: it reads immutable weights,
//     draws one number from the split's random source (or hashes the
//     request's key), and walks at most as many targets as the split has.
//   - A request's key (routes[].split_hash_on) is placed by its hash
//     alone: while the weights are unchanged (no ramp in progress, no
//     reload changing them) one key always picks one target.
//   - A target whose weight rose from 0 ramps: its share of the requests
//     is (now−RampFrom)/RampWindow of its weight's share until the window
//     has passed, then whole; the other targets share the rest by their
//     weights (Share). Once every ramp is over, Pick reads the clock no
//     more.
//   - A target that is picked is the one whose origin makes all of the
//     request's attempts: the split is chosen once per request, before
//     any attempt, and a retry stays inside it.

// Counter is a count of requests (a Prometheus counter child, bound when
// the table is built).
type Counter interface{ Inc() }

// Target is one of a split's targets.
type Target struct {
	Origin string
	Weight uint64
	// Retry is the route's own retry policy on this target's origin
	// (routes[].retry); nil: the origin's.
	Retry *forward.Policy
	// Requests counts the requests routed to this target
	// (corput_route_requests_total{route,origin}); nil: none.
	Requests Counter
	// RampFrom and RampWindow: the target's weight rose from 0 at
	// RampFrom, and its share ramps linearly over RampWindow (its
	// origin's slow_start.window). A zero RampWindow: no ramp.
	RampFrom   time.Time
	RampWindow time.Duration
}

// Split picks a target for each request of a route. It is immutable once
// built but for the flag that records the ramps' end.
type Split struct {
	targets []Target
	cum     []uint64 // cumulative weights: target i takes [cum[i-1], cum[i])
	total   uint64
	keys    *forward.KeySource // nil: not sticky
	clk     clock.Clock
	rand    func() uint64
	rampEnd time.Time   // the last ramp's end; zero: none
	steady  atomic.Bool // every ramp is over
}

// NewSplit builds a split of targets (weights summing above 0; the
// configuration's check refuses others), sticky by keys (nil: not
// sticky), drawing from rand (a uniform 64-bit source, such as
// math/rand/v2's Uint64 or an rng.Source's), reading the time of ramps
// from clk.
func NewSplit(targets []Target, keys *forward.KeySource, clk clock.Clock, rand func() uint64) *Split {
	s := &Split{targets: targets, cum: make([]uint64, len(targets)), keys: keys, clk: clk, rand: rand}
	for i, t := range targets {
		s.total += t.Weight
		s.cum[i] = s.total
		if t.RampWindow > 0 && t.Weight > 0 {
			if end := t.RampFrom.Add(t.RampWindow); end.After(s.rampEnd) {
				s.rampEnd = end
			}
		}
	}
	s.steady.Store(s.rampEnd.IsZero())
	return s
}

// Targets are the split's targets, in config order.
func (s *Split) Targets() []Target { return s.targets }

// Pick returns the target for a request with fields f from peer p (the
// key's source): by the key's hash when the split is sticky and the
// request has one, else by a random draw.
func (s *Split) Pick(f forward.Prior, p forward.Peer) *Target {
	var k balance.Key
	if s.keys != nil && f != nil {
		k = s.keys.Key(f, p)
	}
	u := k.Hash()
	if !k.Valid() {
		u = s.rand()
	}
	return &s.targets[s.pick(u)]
}

// pick is the target of the uniform 64-bit number u: the one whose share
// of the weights (ramped at the present time) holds u's place.
func (s *Split) pick(u uint64) int {
	if !s.steady.Load() {
		if i, ok := s.pickRamped(u, s.clk.Now()); ok {
			return i
		}
	}
	x, _ := bits.Mul64(u, s.total) // u's place in [0, total), unbiased to 2^-64
	for i, c := range s.cum {
		if x < c {
			return i
		}
	}
	return len(s.cum) - 1
}

// pickRamped picks by the shares at now (Share), false once every ramp
// is over (then it records so).
func (s *Split) pickRamped(u uint64, now time.Time) (int, bool) {
	if !now.Before(s.rampEnd) {
		s.steady.Store(true)
		return 0, false
	}
	ramped, rest := s.sums(now)
	x, last := float64(u>>11)/(1<<53), 0
	for i := range s.targets {
		v := s.share(i, now, ramped, rest)
		if x < v {
			return i, true
		}
		if v > 0 {
			last = i
		}
		x -= v
	}
	return last, true // rounding: the last target with a share
}

// Share is target i's share of the requests at now: weight/total once its
// ramp is over; while it ramps, that times the ramp's elapsed fraction, so
// that the share rises linearly from 0; the targets not ramping share the
// rest by their weights.
func (s *Split) Share(i int, now time.Time) float64 {
	ramped, rest := s.sums(now)
	return s.share(i, now, ramped, rest)
}

// sums are the ramping targets' shares together and the weights of the
// targets not ramping, at now.
func (s *Split) sums(now time.Time) (ramped float64, rest uint64) {
	for i, t := range s.targets {
		if f := s.progress(i, now); f < 1 {
			ramped += f * float64(t.Weight) / float64(s.total)
		} else {
			rest += t.Weight
		}
	}
	return ramped, rest
}

func (s *Split) share(i int, now time.Time, ramped float64, rest uint64) float64 {
	w := float64(s.targets[i].Weight)
	f := s.progress(i, now)
	switch {
	case f < 1 && rest == 0: // every target ramps: their shares relative to each other
		if ramped == 0 {
			return w / float64(s.total)
		}
		return f * w / float64(s.total) / ramped
	case f < 1:
		return f * w / float64(s.total)
	}
	return (1 - ramped) * w / float64(rest)
}

// progress is the elapsed fraction of target i's ramp at now, 1 when it
// does not ramp or its ramp is over.
func (s *Split) progress(i int, now time.Time) float64 {
	t := &s.targets[i]
	if t.RampWindow <= 0 {
		return 1
	}
	el := now.Sub(t.RampFrom)
	switch {
	case el >= t.RampWindow:
		return 1
	case el <= 0:
		return 0
	}
	return float64(el) / float64(t.RampWindow)
}
