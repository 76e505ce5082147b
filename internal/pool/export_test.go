package pool

import "fmt"

// CheckInvariants verifies the bookkeeping that every operation must keep;
// the tests call it after each step and the race test calls it concurrently.
func (p *Pool) CheckInvariants() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.staleDials > p.dialing+p.tempDialing {
		return fmt.Errorf("%d stale dials, but %d in flight", p.staleDials, p.dialing+p.tempDialing)
	}
	healthy, onFree, busy := 0, 0, 0
	for i, pc := range p.conns {
		busy += pc.inUse
		switch {
		case pc.idx != i:
			return fmt.Errorf("conn %d: idx %d", i, pc.idx)
		case pc.closed:
			return fmt.Errorf("conn %d: closed but still pooled", i)
		case pc.inUse < 0:
			return fmt.Errorf("conn %d: inUse %d", i, pc.inUse)
		case pc.ln.on && (pc.draining || pc.freeStreams() <= 0):
			return fmt.Errorf("conn %d: on the free list while draining=%v free=%d", i, pc.draining, pc.freeStreams())
		case !pc.ln.on && !pc.draining && pc.freeStreams() > 0:
			return fmt.Errorf("conn %d: has %d free streams but is not on the free list", i, pc.freeStreams())
		}
		if !pc.draining {
			healthy++
		}
		if pc.ln.on {
			onFree++
		}
	}
	for i, pc := range p.temps {
		if pc.idx != i || !pc.temp || pc.closed {
			return fmt.Errorf("temp %d: idx %d temp %v closed %v", i, pc.idx, pc.temp, pc.closed)
		}
	}
	switch {
	case busy > p.busy:
		// p.busy also counts leases on connections closed under them.
		return fmt.Errorf("busy %d, but %d streams in use on pooled connections", p.busy, busy)
	case healthy != p.healthy:
		return fmt.Errorf("healthy %d, counted %d", p.healthy, healthy)
	case onFree != p.free.len():
		return fmt.Errorf("free list length %d, %d conns on it", p.free.len(), onFree)
	case p.waiters.len() > 0 && p.free.len() > 0:
		return fmt.Errorf("%d waiters while %d connections have a free stream", p.waiters.len(), p.free.len())
	case p.healthy+p.dialing > p.cfg.MaxConnections:
		// Draining connections may stand above a cap lowered by
		// Reconfigure until their last stream comes back; no dial
		// starts while they do (pumpLocked counts them).
		return fmt.Errorf("%d open and not draining + %d dialling > max %d", p.healthy, p.dialing, p.cfg.MaxConnections)
	case p.waiters.len() > p.cfg.MaxPending:
		return fmt.Errorf("%d waiters > max %d", p.waiters.len(), p.cfg.MaxPending)
	case p.dialing < 0 || p.tempDialing < 0 || p.closing < 0:
		return fmt.Errorf("dialing %d, tempDialing %d, closing %d", p.dialing, p.tempDialing, p.closing)
	case p.Held() != p.healthy+p.dialing:
		return fmt.Errorf("Held %d, healthy %d + dialing %d", p.Held(), p.healthy, p.dialing)
	}
	// Every wait is bounded: a waiter without an acquire timer is one the
	// dials in flight cover, counted from the head, or one whose dial is
	// deferred, for which the sweep is armed.
	if p.deferred > 0 && p.sweepAt.IsZero() {
		return fmt.Errorf("%d waiters' dials deferred, and no sweep armed to start them", p.deferred)
	}
	covered := p.dialing*p.learned + p.tempDialing + p.deferred
	if p.learned == 0 && p.dialing > 0 {
		covered = p.waiters.len()
	}
	i := 0
	for w := p.waiters.front(); w != nil; w = w.ln.next {
		if w.timer == nil && i >= covered {
			return fmt.Errorf("waiter %d of %d has no acquire timer, but the dials in flight cover %d", i, p.waiters.len(), covered)
		}
		i++
	}
	return nil
}
