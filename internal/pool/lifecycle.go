package pool

import "time"

// The lifecycle runs on one timer per pool. Every connection has a next
// deadline (deadlineLocked): the end of its lifetime, and while idle the end
// of its idle timeout and its next keepalive probe. The timer is armed at the
// earliest deadline the pool knows of (armLocked only ever moves it earlier);
// when it fires, sweepNow walks the connections, acts on what is due and
// re-arms at the new earliest deadline. A deadline that moved later since it
// was armed costs one spurious sweep, never a missed one.

// sweepNow is the lifecycle timer's callback.
func (p *Pool) sweepNow() {
	now := p.clk.Now()
	var fx effects
	p.mu.Lock()
	p.sweepAt = time.Time{}
	if p.state == stateOpen { // draining and closed pools have nothing to sweep
		var next time.Time
		for i := 0; i < len(p.conns); {
			pc := p.conns[i]
			p.expireLocked(pc, now, &fx)
			if pc.closed {
				continue // removeAt moved another connection to i
			}
			next = earliest(next, p.deadlineLocked(pc, now))
			i++
		}
		p.armLocked(next, now)
		p.pumpLocked(now, &fx) // replaces what was closed, ends a backoff
	}
	p.mu.Unlock()
	p.apply(&fx)
}

// expireLocked acts on pc's due deadlines: lifetime → drain, idle timeout →
// close (never below the Prewarm floor), keepalive → probe.
func (p *Pool) expireLocked(pc *pconn, now time.Time, fx *effects) {
	if pc.draining || pc.probing {
		return
	}
	if !pc.expires.IsZero() && !now.Before(pc.expires) {
		p.retireLocked(pc, ReasonLifetime, fx)
		return
	}
	if pc.inUse > 0 {
		return
	}
	if t := p.cfg.IdleTimeout; t > 0 && !now.Before(pc.idleSince.Add(t)) && p.healthy > p.cfg.floor() {
		p.closeLocked(pc, ReasonIdle, fx)
		return
	}
	if k := p.cfg.Keepalive; k > 0 && !now.Before(pc.quietSince.Add(k)) {
		pc.probing = true
		p.placeLocked(pc, false)
		fx.pings = append(fx.pings, pc)
		fx.pingWait = p.cfg.KeepaliveTimeout
	}
}

// deadlineLocked is pc's next lifecycle deadline after now (zero: none).
func (p *Pool) deadlineLocked(pc *pconn, now time.Time) time.Time {
	if pc.closed || pc.draining || pc.probing {
		return time.Time{} // a drain ends at release, a probe at its answer
	}
	at := pc.expires
	if pc.inUse == 0 {
		// An idle timeout already past was refused by the floor; it is
		// reconsidered at the next sweep, not re-armed.
		if t := p.cfg.IdleTimeout; t > 0 && pc.idleSince.Add(t).After(now) {
			at = earliest(at, pc.idleSince.Add(t))
		}
		if k := p.cfg.Keepalive; k > 0 {
			at = earliest(at, pc.quietSince.Add(k))
		}
	}
	return at
}

// armLocked makes the sweep fire no later than at (zero: no-op).
func (p *Pool) armLocked(at, now time.Time) {
	if at.IsZero() || p.state == stateClosed || (!p.sweepAt.IsZero() && !at.Before(p.sweepAt)) {
		return
	}
	p.sweepAt = at
	if p.sweep == nil {
		p.sweep = p.clk.AfterFunc(at.Sub(now), p.onSweep)
		return
	}
	p.sweep.Reset(at.Sub(now))
}

func (p *Pool) stopSweepLocked() {
	if p.sweep != nil {
		p.sweep.Stop()
	}
	p.sweepAt = time.Time{}
}

// pinged settles a keepalive probe: an answer puts the connection back in
// service; a failure or timeout closes it at once (reason keepalive), even
// if an HTTP/2 stream started on it meanwhile: the peer is gone.
func (pc *pconn) pinged(err error) {
	p := pc.p
	now := p.clk.Now()
	var fx effects
	p.mu.Lock()
	pc.probing = false
	switch {
	case pc.closed:
	case err != nil:
		p.closeLocked(pc, ReasonKeepalive, &fx)
	case pc.draining:
		p.retireLocked(pc, pc.reason, &fx)
	default:
		pc.quietSince = now
		p.placeLocked(pc, false) // keeps its place among the idle
		p.serveLocked(&fx)
		p.armLocked(p.deadlineLocked(pc, now), now)
	}
	p.pumpLocked(now, &fx)
	p.mu.Unlock()
	p.apply(&fx)
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// effects are what an operation decided under the lock and runs after
// releasing it: calls to the Observer, Conn.Close and Conn.Ping, the
// Dialer, and waiters' callbacks. A zero effects allocates nothing, so an
// operation with nothing to do (the hot path) costs no allocation.
type effects struct {
	dialer    Dialer        // for dials and tempDials: the pool's when they were decided
	pingWait  time.Duration // for pings: the keepalive timeout when they were decided
	created   *pconn        // a dial succeeded
	dialErr   *DialError    // a dial failed
	backoff   time.Duration
	closed    []closing
	deliver   []delivery
	dials     int
	tempDials int
	pings     []*pconn
	drained   func()
}

type closing struct {
	pc     *pconn
	reason CloseReason
	slot   bool // it held a MaxConnections slot (Pool.closing) until this Close
}

type delivery struct {
	w     *waiter
	lease Lease // a stream taken for w, or the zero Lease with err
	err   error
}

// apply runs fx without the lock, in an order the simulator can rely on:
// metrics, closes, callbacks, dials, probes, the drain callback.
func (p *Pool) apply(fx *effects) {
	if pc := fx.created; pc != nil {
		p.obs.ConnCreated(pc.proto, pc.temp)
	}
	if fx.dialErr != nil {
		p.obs.DialFailed(fx.dialErr, fx.backoff)
	}
	pooled := 0
	for _, c := range fx.closed {
		c.pc.conn.Close()
		p.obs.ConnClosed(c.pc.proto, c.reason, c.pc.temp)
		if c.slot {
			pooled++
		}
	}
	if pooled > 0 {
		// Only now are their slots free: a dial started before their
		// Close would have the origin see more than MaxConnections open
		// (TestConcurrentUseOnTheRealClock caught it).
		var more effects
		p.mu.Lock()
		p.closing -= pooled
		p.pumpLocked(p.clk.Now(), &more)
		p.mu.Unlock()
		p.apply(&more)
	}
	for _, d := range fx.deliver {
		p.deliver(d)
	}
	for range fx.dials {
		fx.dialer.Dial(p.addr, p.onDial)
	}
	for range fx.tempDials {
		fx.dialer.Dial(p.addr, p.onTempDial)
	}
	for _, pc := range fx.pings {
		pc.conn.Ping(fx.pingWait, pc.onPing)
	}
	if fx.drained != nil {
		fx.drained()
	}
}

// deliver completes a hand-out: a stream on a connection that is still
// usable, or an error. A pooled connection found dead is retired and the
// waiter goes back to the head of the queue.
func (p *Pool) deliver(d delivery) {
	if pc := d.lease.pc; pc != nil && !pc.temp && !pc.conn.Usable() {
		p.putBackDead(pc, d.w)
		return
	}
	d.w.finish(d.lease, d.err)
}
