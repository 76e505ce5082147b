package cluster

import (
	"context"

	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/pool"
)

// Begin starts a's request on loop ol (replayable: idempotent, without a
// body, so it may be sent again; cost: its workload class's cost, 1 when it
// has none). Finish ends it.
func (o *Origin) Begin(a *forward.Attempt, ol *Loop, replayable bool, cost float64) {
	o.m.requests[ol.idx].Inc()
	ol.inflight.Add(1)
	a.Start(o.policy.Load(), ol.picker, replayable, cost)
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
// Both serving paths forward through it.
func (o *Origin) Forward(ctx context.Context, a *forward.Attempt, ol *Loop, trust bool, exchange func(*forward.Attempt) (int, forward.Step)) (int, forward.Reason) {
	for {
		step, status := o.acquire(ctx, a, ol, trust), 0
		if step == forward.Send {
			status, step = exchange(a)
		}
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
func (o *Origin) acquire(ctx context.Context, a *forward.Attempt, ol *Loop, mayTrust bool) forward.Step {
	ep, trust, step := a.Pick()
	trust = trust && mayTrust
	if step != forward.Acquire {
		return step
	}
	p, err := o.poolFor(ol, ep.Address())
	if err != nil {
		return a.Acquired(pool.Lease{}, forward.ErrNoPool)
	}
	if p.Free() == 0 {
		// Borrow a free stream of the endpoint's home loop before dialling
		// (homes).
		if h := o.homePool(ep.Address()); h != nil && h != p && h.Free() > 0 {
			if lease, ok := h.TryAcquire(trust); ok {
				return a.Acquired(lease, nil)
			}
		}
	}
	var lease pool.Lease
	if trust {
		lease, err = p.AcquireTrusting(ctx)
	} else {
		lease, err = p.Acquire(ctx)
	}
	return a.Acquired(lease, err)
}
