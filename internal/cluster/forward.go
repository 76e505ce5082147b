package cluster

import (
	"context"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/tracing"
)

// Begin starts a's request on loop ol (replayable: idempotent, without a
// body, so it may be sent again; cost: its workload class's cost, 1 when it
// has none; key: its key, Key's, for a sticky origin). Finish ends it.
func (o *Origin) Begin(a *forward.Attempt, ol *Loop, replayable bool, cost float64, key balance.Key) {
	o.m.requests[ol.idx].Inc()
	ol.inflight.Add(1)
	a.Start(o.policy.Load(), ol.picker, replayable, cost, key)
}

// Key is the key of a request with fields f from peer p when the origin
// is sticky (balancer.hash_on), else the zero Key. It allocates nothing
// on the fast path's head.
func (o *Origin) Key(f forward.Prior, p forward.Peer) balance.Key {
	if ks := o.keys.Load(); ks != nil {
		return ks.Key(f, p)
	}
	return balance.Key{}
}

// NewCookie is the key cookie of a request that has none (Key's zero
// Key) when the origin sets one (balancer.cookie): the Set-Cookie value
// appended to dst and the key to place the request by
// (forward.KeySource.NewCookie); ok false otherwise.
func (o *Origin) NewCookie(dst []byte) ([]byte, balance.Key, bool) {
	if ks := o.keys.Load(); ks != nil {
		return ks.NewCookie(dst)
	}
	return dst, balance.Key{}, false
}

// Sticky reports whether the origin routes requests by a key.
func (o *Origin) Sticky() bool { return o.keys.Load() != nil }

// keySource is oc's key source, nil when its policy is not sticky.
func keySource(oc *config.Origin) *forward.KeySource {
	if !oc.Balancer.Sticky() {
		return nil
	}
	h, err := config.ParseHashOn(oc.Balancer.HashOn)
	if err != nil {
		return nil // refused by config validation: not reached
	}
	ks := forward.NewKeySource(h, oc.Balancer.Cookie)
	return &ks
}

// Finish ends a's request on loop ol (forward.Attempt.Finish) and takes it
// off the loop's requests in flight.
func (o *Origin) Finish(a *forward.Attempt, ol *Loop) {
	a.Finish()
	ol.inflight.Add(-1)
}

// Forward runs a request's attempts through loop ol until one is delivered
// or the request is answered: it acquires each attempt's stream (waiting
// at most until ctx ends; trust lets an attempt take an idle connection
// unprobed when the Attempt allows it) and hands it to exchange, which
// makes the exchange and reports its step. It returns the status
// delivered (499 when the client left), or the reason to answer with.
// Both serving paths forward through it. tr, when tracing is on, hears
// each attempt from its pick to its end (a client span each), so that
// exchange can send its trace context; nil traces nothing.
func (o *Origin) Forward(ctx context.Context, a *forward.Attempt, ol *Loop, trust bool, tr *tracing.Request, exchange func(*forward.Attempt) (int, forward.Step)) (int, forward.Reason) {
	for {
		step, status := o.acquire(ctx, a, ol, trust, tr), 0
		if step == forward.Send {
			status, step = exchange(a)
		}
		tr.EndAttempt(a, step)
		switch step {
		case forward.Delivered:
			return status, forward.None
		case forward.Gone:
			return 499, forward.None
		case forward.Answer:
			return 0, a.Reason()
		}
	}
}

// acquire picks the attempt's endpoint and acquires a stream of loop ol's
// pool for it, waiting at most until ctx ends.
func (o *Origin) acquire(ctx context.Context, a *forward.Attempt, ol *Loop, mayTrust bool, tr *tracing.Request) forward.Step {
	ep, trust, step := a.Pick()
	trust = trust && mayTrust
	if step != forward.Acquire {
		return step
	}
	tr.StartAttempt(o.name, ol.idx, a.Attempts(), ep.Address())
	p, err := o.poolFor(ol, ep.Address())
	if err != nil {
		tr.Acquired()
		return a.Acquired(pool.Lease{}, forward.ErrNoPool)
	}
	// A free stream of the endpoint's home loop before a dial (homes),
	// and for an origin that may speak HTTP/2, a wait on the home loop's
	// connection when this loop holds none (pool.Share). Looked up only
	// when the loop's own pool has no free stream: most requests find one
	// there, and homePool costs two map lookups.
	if p.Free() == 0 {
		home := o.homePool(ep.Address())
		if lease, ok := pool.Borrow(p, home, trust); ok {
			tr.Acquired()
			return a.Acquired(lease, nil)
		}
		if multiplexes(o.conf.Load()) {
			p = pool.Share(p, home)
		}
	}
	var lease pool.Lease
	if trust {
		lease, err = p.AcquireTrusting(ctx)
	} else {
		lease, err = p.Acquire(ctx)
	}
	tr.Acquired()
	return a.Acquired(lease, err)
}
