package pool

// A loop's view of an endpoint is two pools: its own, and the pool of the
// endpoint's home loop, whose free streams it may borrow before it dials
// (docs/decisions.md, "Borrowing from the home loop"), or on whose
// connection it may wait. The gateway and the lab's simulated gateway both
// decide with these three functions.

// Ready reports what a request on a loop finds for an endpoint now: ready,
// a free stream in own (the loop's pool) or home (nil, or own itself, when
// there is none to borrow from); held, a connection open or dialing in
// either. Lock-free (Free, Held): a picker asks it per candidate, and the
// answer may be stale by the time it is acted on.
func Ready(own, home *Pool) (ready, held bool) {
	if own != nil {
		if own.Free() > 0 {
			return true, true
		}
		held = own.Held() > 0
	}
	if home != nil && home != own {
		if home.Free() > 0 {
			return true, true
		}
		held = held || home.Held() > 0
	}
	return false, held
}

// Borrow takes a free stream of home when own has none (TryAcquire: it
// never waits or dials); ok is false when there is nothing to borrow, and
// the caller then acquires from own as usual. The lease goes back to home.
func Borrow(own, home *Pool, trust bool) (l Lease, ok bool) {
	if home == nil || home == own || own.Free() > 0 || home.Free() == 0 {
		return Lease{}, false
	}
	return home.TryAcquire(trust)
}

// Share is the pool a request on own's loop acquires from when Borrow
// found nothing free: home, when own holds nothing (no connection open or
// dialling) and home holds a connection that is not known to carry a
// single stream (an HTTP/2 one, or one still dialling whose protocol is
// not known yet); own otherwise. The request then waits in home's queue,
// and home's connection in flight, or the next one home dials when its
// streams run out, serves it: an HTTP/2 endpoint gets no second
// connection from a loop that asked while home's first was dialling or
// being replaced. Lock-free (Held, and the capacity home last learned).
func Share(own, home *Pool) *Pool {
	if home == nil || home == own || own.Held() > 0 || home.Held() == 0 || home.single.Load() {
		return own
	}
	return home
}
