package pool

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/rng"
)

type poolState uint8

const (
	stateOpen     poolState = iota
	stateDraining           // Drain: no new acquisitions, connections close once idle
	stateClosed             // Close: everything closed
)

// Pool is the connection pool of one (endpoint, loop). All its methods are
// safe for concurrent use; see the package doc for the lock discipline.
type Pool struct {
	addr   string
	loop   int
	cfg    Config
	dialer Dialer
	clk    clock.Clock
	rnd    *rng.Source
	obs    Observer

	// Bound once, so that starting a dial or arming the sweep allocates
	// nothing on the pool's side.
	onDial, onTempDial func(Conn, error)
	onSweep            func()

	mu          sync.Mutex // guards following, and the fields of every pconn and waiter marked so
	state       poolState
	conns       []*pconn              // open pooled connections, draining ones included; pc.idx is the index
	temps       []*pconn              // open temporary connections; pc.idx is the index
	free        list[pconn, *pconn]   // healthy pooled connections with a free stream; back = most recently used
	waiters     list[waiter, *waiter] // FIFO
	healthy     int                   // pooled connections open and not draining
	dialing     int                   // pooled dials in flight
	held        atomic.Int32          // healthy + dialing, stored by noteHeldLocked; read without the lock (Held)
	tempDialing int                   // temporary dials in flight
	closing     int                   // pooled connections forgotten but not yet closed (apply): each keeps its MaxConnections slot until its Close
	staleDials  int                   // dials in flight at the last Renew: the next that many to finish are retired as they arrive
	learned     int                   // stream capacity of the latest connection; 0 before the first
	single      atomic.Bool           // learned == 1, stored by learnLocked; read without the lock (Share)
	untimed     bool                  // a queued waiter may have no acquire timer yet (armWaitersLocked)
	ahead       bool                  // a stream was taken on a multiplexed connection past the headroom since the last pumpLocked
	busy        int                   // streams handed out on pooled connections and not yet released
	deferred    int                   // queued waiters whose dial is deferred (dialsLocked): a release may serve them first
	dialStart   time.Time             // when the latest dials started
	dialTime    time.Duration         // moving average of a dial's duration (successful ones)
	holdTime    time.Duration         // moving average of how long an HTTP/1.1 connection is held, hand-out to release
	protocol    string                // protocol of the latest connection
	failures    int                   // consecutive failed dials
	retryAt     time.Time             // reconnect backoff: no dial before it
	lastErr     *DialError            // the latest failed dial
	sweep       clock.Timer           // the pool's one lifecycle timer; nil until first armed
	sweepAt     time.Time             // when sweep fires; zero when disarmed
	onDrained   func()                // Drain's callback, until it ran

	_ [64]byte // pools of different loops are often allocated side by side: keep their hot fields off a shared cache line
}

// pconn is one connection as the pool tracks it.
type pconn struct {
	p       *Pool
	conn    Conn
	proto   string
	temp    bool        // an over-cap one-shot connection
	expires time.Time   // end of its jittered lifetime; zero without MaxLifetime
	onPing  func(error) // pc.pinged, bound once

	// guarded by p.mu
	ln         links[pconn] // on p.free
	idx        int          // in p.conns or p.temps; -1 when in neither
	streams    int          // capacity: Streams() capped by MaxStreams, refreshed at each release
	inUse      int          // streams handed out
	probing    bool         // a keepalive probe is in flight; it occupies one stream
	draining   bool         // takes no new streams; closes when the last is released
	closed     bool
	reason     CloseReason // why it drains
	idleSince  time.Time   // when inUse last fell to 0
	takenAt    time.Time   // when its one stream was last handed out (single-stream connections only)
	quietSince time.Time   // last use or answered probe; keepalive counts from it

	_ [64]byte // connections of different loops' pools may be allocated side by side: no false sharing
}

func (pc *pconn) links() *links[pconn] { return &pc.ln }

func (pc *pconn) freeStreams() int {
	n := pc.streams - pc.inUse
	if pc.probing {
		n--
	}
	return n
}

// New returns the pool for endpoint addr on loop, and starts its cfg.Prewarm
// dials. A nil clk is the wall clock; a nil src is seeded from addr and loop;
// a nil obs ignores events.
func New(addr string, loop int, cfg Config, dialer Dialer, clk clock.Clock, src *rng.Source, obs Observer) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("pool %s (loop %d): %w", addr, loop, err)
	}
	if dialer == nil {
		return nil, fmt.Errorf("pool %s (loop %d): no Dialer", addr, loop)
	}
	if clk == nil {
		clk = clock.Real()
	}
	if src == nil {
		h := fnv.New64a()
		h.Write([]byte(addr))
		src = rng.New(rng.Mix64(h.Sum64() ^ uint64(loop)))
	}
	if obs == nil {
		obs = NopObserver{}
	}
	p := &Pool{addr: addr, loop: loop, cfg: cfg, dialer: dialer, clk: clk, rnd: src, obs: obs}
	p.onDial = func(c Conn, err error) { p.dialed(c, err, false) }
	p.onTempDial = func(c Conn, err error) { p.dialed(c, err, true) }
	p.onSweep = p.sweepNow
	var fx effects
	p.mu.Lock()
	p.pumpLocked(clk.Now(), &fx)
	p.mu.Unlock()
	p.apply(&fx)
	return p, nil
}

// Addr is the endpoint the pool dials.
func (p *Pool) Addr() string { return p.addr }

// Loop is the loop that owns the pool.
func (p *Pool) Loop() int { return p.loop }

// Config is the pool's configuration.
func (p *Pool) Config() Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

// Lease is one stream on one connection, handed out by Acquire. It is a
// small value; copy it freely, but Release or Discard it exactly once.
type Lease struct{ pc *pconn }

// Conn is the leased connection (nil for the zero Lease).
func (l Lease) Conn() Conn {
	if l.pc == nil {
		return nil
	}
	return l.pc.conn
}

// Temporary reports whether the connection is an over-cap one-shot
// connection, closed at release.
func (l Lease) Temporary() bool { return l.pc != nil && l.pc.temp }

// Release gives the stream back. The pool checks Conn.Usable: a usable
// connection takes the next request (the head waiter first), an unusable one
// is closed (reason remote) once its last stream is back.
func (l Lease) Release() {
	if l.pc != nil {
		l.pc.p.release(l.pc, false)
	}
}

// Discard gives the stream back from a connection the caller saw fail (an
// I/O or protocol error): it takes no new streams and is closed (reason
// error) once its last stream is back. Do not Discard for a failure of one
// HTTP/2 stream that left the connection sound; Release instead.
func (l Lease) Discard() {
	if l.pc != nil {
		l.pc.p.release(l.pc, true)
	}
}

// Acquire returns a stream: at once when one is free, else after waiting
// (see the package doc). It fails with ErrPendingFull, ErrAcquireTimeout,
// ErrOverCap, *DialError, ErrClosed, or ctx's error; a ctx that ends
// withdraws the waiter but not the dial it may have started.
func (p *Pool) Acquire(ctx context.Context) (Lease, error) {
	return p.acquire(ctx, false)
}

// AcquireTrusting is Acquire for a request that can be sent again: an idle
// connection that implements Trusting and says it is Trusted is handed out
// without Usable's check (an HTTP/1.1 probe read saved per request). The
// caller must detect a connection the peer closed while it sat idle (the
// upstream package's Raw.Stale) and retry on another stream.
func (p *Pool) AcquireTrusting(ctx context.Context) (Lease, error) {
	return p.acquire(ctx, true)
}

// TryAcquire takes a free stream when one is ready and never waits or
// dials: ok is false when the pool has none or is not open. trust is
// AcquireTrusting's. It is how a loop borrows a stream of the endpoint's
// home loop's pool (package cluster).
func (p *Pool) TryAcquire(trust bool) (l Lease, ok bool) {
	for {
		p.mu.Lock()
		pc := p.free.back()
		if p.state != stateOpen || pc == nil {
			p.mu.Unlock()
			return Lease{}, false
		}
		p.takeStreamLocked(pc)
		p.mu.Unlock()
		if trust && trusted(pc.conn) || pc.conn.Usable() {
			p.obs.AcquireWait(0, nil)
			return Lease{pc}, true
		}
		p.putBackDead(pc, nil)
	}
}

func (p *Pool) acquire(ctx context.Context, trust bool) (Lease, error) {
	l, w, err := p.begin(nil, trust)
	if w == nil {
		p.obs.AcquireWait(0, err)
		return l, err
	}
	select {
	case r := <-w.ch:
		return r.lease, r.err
	case <-ctx.Done():
		if !w.cancel() {
			// Settled while we gave up: hand the stream straight back.
			if r := <-w.ch; r.err == nil {
				r.lease.Release()
			}
		}
		return Lease{}, ctx.Err()
	}
}

// AcquireAsync is Acquire for callers that must not block (the simulator
// drives many pools from one goroutine). cb runs exactly once, unless cancel
// withdrew the request first: synchronously before AcquireAsync returns when
// a stream is free or the request fails at once, later otherwise (on the
// goroutine of the dial, release or timer that settled it), possibly even
// before AcquireAsync returns. cancel reports whether it withdrew the
// request; false means cb has run or will run: with a stream (release it)
// or with an error.
func (p *Pool) AcquireAsync(cb func(Lease, error)) (cancel func() bool) {
	return p.acquireAsync(cb, false)
}

// AcquireTrustingAsync is AcquireAsync with AcquireTrusting's hand-out.
func (p *Pool) AcquireTrustingAsync(cb func(Lease, error)) (cancel func() bool) {
	return p.acquireAsync(cb, true)
}

func (p *Pool) acquireAsync(cb func(Lease, error), trust bool) (cancel func() bool) {
	l, w, err := p.begin(cb, trust)
	if w == nil {
		p.obs.AcquireWait(0, err)
		cb(l, err)
		return settled
	}
	return w.cancel
}

func settled() bool { return false }

func trusted(c Conn) bool {
	t, ok := c.(Trusting)
	return ok && t.Trusted()
}

// begin hands out a free stream (a Lease), queues a waiter, or fails.
// trust hands out a Trusted connection without Usable's check.
func (p *Pool) begin(cb func(Lease, error), trust bool) (Lease, *waiter, error) {
	for {
		p.mu.Lock()
		if p.state != stateOpen {
			p.mu.Unlock()
			return Lease{}, nil, ErrClosed
		}
		if pc := p.free.back(); pc != nil {
			p.takeStreamLocked(pc)
			if p.ahead && p.dialing == 0 {
				// A multiplexed connection is past half full: maybe
				// dial the next one ahead of need (pumpLocked).
				var fx effects
				p.pumpLocked(p.clk.Now(), &fx)
				p.mu.Unlock()
				p.apply(&fx)
			} else {
				p.mu.Unlock()
			}
			if trust && trusted(pc.conn) || pc.conn.Usable() {
				return Lease{pc}, nil, nil
			}
			p.putBackDead(pc, nil)
			continue
		}
		now := p.clk.Now()
		var fx effects
		w, err := p.enqueueLocked(cb, now, &fx)
		p.pumpLocked(now, &fx)
		p.mu.Unlock()
		p.apply(&fx)
		return Lease{}, w, err
	}
}

// enqueueLocked applies the over-cap policy to a request that found no free
// stream, and queues it unless the policy or a bound refuses it.
func (p *Pool) enqueueLocked(cb func(Lease, error), now time.Time, fx *effects) (*waiter, error) {
	backoff := now.Before(p.retryAt)
	if backoff && p.healthy == 0 && p.dialing == 0 && p.tempDialing == 0 {
		return nil, p.lastErr // nothing could serve it before the backoff ends: fail fast
	}
	overCap := !p.coveredLocked() && (backoff || len(p.conns)+p.closing+p.dialing >= p.cfg.MaxConnections)
	if overCap && p.cfg.OverCap == Reject {
		return nil, ErrOverCap
	}
	if p.waiters.len() >= p.cfg.MaxPending {
		return nil, ErrPendingFull
	}
	if overCap && p.cfg.OverCap == Temporary && !backoff {
		p.tempDialing++
		fx.tempDials++
		fx.dialer = p.dialer
	}
	w := &waiter{p: p, cb: cb, start: now}
	if cb == nil {
		w.ch = make(chan acquired, 1)
	}
	p.waiters.pushBack(w)
	p.untimed = true // pumpLocked arms its timer unless a dial in flight covers it
	return w, nil
}

// armWaitersLocked starts the AcquireTimeout of every queued waiter that
// the dials in flight do not cover, counting from the head (FIFO: the
// first connections serve the first waiters). A waiter they cover waits
// for its connection, bounded by the Dialer's own timeout (the origin's
// connect timeout), and its acquire deadline starts once no dial in
// flight is left to serve it: acquire_timeout bounds the wait for a
// stream, not a handshake that is already under way.
func (p *Pool) armWaitersLocked() {
	if !p.untimed || p.learned == 0 && p.dialing > 0 {
		return // before the first connection, its one dial covers everyone
	}
	covered := p.dialing*p.learned + p.tempDialing + p.deferred
	p.untimed = false
	i := 0
	for w := p.waiters.front(); w != nil; w = w.ln.next {
		switch {
		case w.timer != nil:
		case i < covered:
			p.untimed = true
		default:
			w.timer = p.clk.AfterFunc(p.cfg.AcquireTimeout, w.expire)
		}
		i++
	}
}

// coveredLocked reports whether a new waiter would be served by the
// capacity of the dials already in flight. Before the first connection told
// its capacity, the one dial in flight covers everyone.
func (p *Pool) coveredLocked() bool {
	if p.learned == 0 {
		return p.dialing > 0
	}
	return p.waiters.len() < p.dialing*p.learned+p.tempDialing
}

// pumpLocked starts the dials the waiters and the Prewarm floor need
// (dialsLocked), then the acquire timers of the waiters those dials do not
// cover (armWaitersLocked). It runs at the end of every operation.
func (p *Pool) pumpLocked(now time.Time, fx *effects) {
	p.dialsLocked(now, fx)
	p.armWaitersLocked()
}

// dialsLocked starts the dials the waiters and the Prewarm floor need, within
// MaxConnections and outside the reconnect backoff; during the backoff it
// arms the sweep for its end instead.
func (p *Pool) dialsLocked(now time.Time, fx *effects) {
	p.deferred = 0 // dueLocked counts them afresh
	if p.state != stateOpen {
		p.drainedLocked(fx)
		return
	}
	want := p.cfg.floor() - p.healthy - p.dialing
	w := p.waiters.len() - p.tempDialing
	ahead := p.ahead
	p.ahead = false
	switch {
	case p.learned > 1 && (w > 0 || ahead):
		// Multiplexed and in demand (waiters queue, or a stream was
		// just taken past the headroom): dial for the waiters plus the
		// headroom, so the next connections are dialled while the last
		// ones fill.
		h := p.headroomLocked(p.learned)
		need := max(w, 0) + h
		if w <= 0 {
			need -= p.freeStreamsLocked(h)
		}
		want = max(want, (need+p.learned-1)/p.learned-p.dialing)
	case w > 0 && p.learned > 0:
		if w = p.dueLocked(now, w); w > 0 {
			want = max(want, w-p.dialing)
		}
	case w > 0 && p.dialing == 0: // capacity not learned yet: one dial
		want = max(want, 1)
	}
	want = min(want, p.cfg.MaxConnections-len(p.conns)-p.closing-p.dialing)
	if want <= 0 {
		return
	}
	if now.Before(p.retryAt) {
		p.armLocked(p.retryAt, now)
		return
	}
	p.dialing += want
	p.dialStart = now
	p.noteHeldLocked()
	fx.dials += want
	fx.dialer = p.dialer
}

// dueLocked is how many of an HTTP/1.1 pool's w waiters (those without a
// temporary dial) need a dial now: those that have waited their deferral.
// A waiter that found every connection busy waits for one to be released
// before its dial starts (the sweep is armed for the next waiter's end of
// it), so a burst whose requests are over before a dial would be is
// served by the connections already open, not by new ones that then sit
// idle. How long it waits depends on its place in the queue:
//   - one of the first healthy × dial time / hold time waiters (the
//     releases that the pool's moving averages expect within one dial
//     time) waits up to the limit, a deferShare of acquire_timeout: a
//     release is due sooner than a dial would finish, so when none comes
//     the gateway is stalled (a loaded machine), not short of
//     connections, and a dial would finish as late and only add one;
//   - a waiter behind them waits one dial time (at most the limit).
//
// The cost is bounded: a request that no release serves waits at most
// the limit more than it would have. Deferred waiters count as covered:
// their acquire timeout starts as a dialled waiter's does, once no dial is
// left to serve them. There is no deferral while the pool holds no
// healthy connection (nothing to release), before a dial has been timed,
// or while its dials fail (in a reconnect backoff a covered waiter would
// wait, untimed, for the next attempt: internal/drill TestCrash lost
// requests so).
func (p *Pool) dueLocked(now time.Time, w int) int {
	limit := p.cfg.AcquireTimeout / deferShare
	d := min(p.dialTime, limit)
	if p.healthy == 0 || d <= 0 || p.failures > 0 {
		return w
	}
	soon := 0 // the waiters, from the head, that releases should serve within a dial time
	if p.holdTime > 0 {
		soon = int(int64(p.healthy) * int64(p.dialTime) / int64(p.holdTime))
	}
	due, k := 0, 0
	var next time.Time
	for q := p.waiters.front(); q != nil; q = q.ln.next {
		wait := d
		if k < soon {
			wait = limit
		}
		at := q.start.Add(wait)
		switch {
		case !now.Before(at):
			due++
		case next.IsZero() || at.Before(next):
			next = at
		}
		if k >= soon && now.Before(at) {
			break // FIFO: the later ones are not due either
		}
		k++
	}
	if !next.IsZero() {
		p.armLocked(next, now)
	}
	p.deferred = p.waiters.len() - due
	return max(due-p.tempDialing, 0)
}

// deferShare caps a dial's deferral at this share of the acquire timeout
// (10 ms by default): on a machine so loaded that its dials take tens of
// milliseconds, a longer wait only adds to every burst's latency (the
// internal/drill tests, run beside the rest of the suite under -race,
// lost requests at a cap of half).
const deferShare = 10

// noteDialLocked adds a successful dial's duration to the pool's moving
// average (weight 1/8), which the deferral waits (dueLocked).
func (p *Pool) noteDialLocked(d time.Duration) {
	if p.dialTime == 0 {
		p.dialTime = d
		return
	}
	p.dialTime += (d - p.dialTime) / 8
}

// noteHoldLocked adds how long a single-stream connection was held, from
// its hand-out to its release, to the pool's moving average (weight 1/8),
// from which the deferral expects the next releases (dueLocked).
func (p *Pool) noteHoldLocked(d time.Duration) {
	if p.holdTime == 0 {
		p.holdTime = d
		return
	}
	p.holdTime += (d - p.holdTime) / 8
}

// headroomLocked is how many streams a multiplexed pool in demand keeps
// free or being dialled, for connections of streams each: half a
// connection, or an eighth of the streams in use when that is more (a
// pool that grew large grows fast: its dials must start further ahead).
func (p *Pool) headroomLocked(streams int) int {
	return max(streams/2, p.busy/8)
}

// freeStreamsLocked counts the free streams of the connections on the free
// list, most recently used first, and stops once it is past enough.
func (p *Pool) freeStreamsLocked(enough int) int {
	n := 0
	for pc := p.free.back(); pc != nil && n <= enough; pc = pc.ln.prev {
		n += pc.freeStreams()
	}
	return n
}

// dialed settles a finished dial: a new connection joins the pool (or goes
// to the head waiter when temporary), a failure starts the backoff.
func (p *Pool) dialed(c Conn, err error, temp bool) {
	now := p.clk.Now()
	var pc *pconn
	var peer int // the connection's own stream capacity
	if err == nil {
		pc = p.newConn(c, temp)
		peer = c.Streams()
	}
	var fx effects
	p.mu.Lock()
	if pc != nil {
		p.sizeLocked(pc, peer, now)
	}
	if temp {
		p.tempDialing--
	} else {
		p.dialing--
		p.noteHeldLocked()
	}
	stale := p.staleDials > 0 // started before the last Renew
	if stale {
		p.staleDials--
	}
	if err != nil {
		p.dialFailedLocked(err, now, &fx)
	} else {
		if !temp && !p.dialStart.IsZero() {
			p.noteDialLocked(now.Sub(p.dialStart))
		}
		fx.created = pc
		p.failures, p.retryAt = 0, time.Time{}
		p.protocol = pc.proto
		switch {
		case p.state == stateClosed:
			p.closeLocked(pc, ReasonShutdown, &fx)
		case p.state == stateDraining:
			p.closeLocked(pc, ReasonEviction, &fx)
		case stale:
			p.closeLocked(pc, ReasonEviction, &fx)
		case temp:
			p.startTempLocked(pc, &fx)
		default:
			p.addLocked(pc, now, &fx)
		}
	}
	p.pumpLocked(now, &fx)
	p.mu.Unlock()
	p.apply(&fx)
}

// newConn wraps a new connection. It calls Conn methods, so it runs
// without the lock; sizeLocked then sizes it by the configuration.
func (p *Pool) newConn(c Conn, temp bool) *pconn {
	pc := &pconn{p: p, conn: c, proto: c.Protocol(), temp: temp, idx: -1}
	pc.onPing = pc.pinged
	return pc
}

// sizeLocked gives a new connection its stream capacity (peer is its own)
// and its lifetime, by the configuration of the moment: a Reconfigure
// changes p.cfg under the lock.
func (p *Pool) sizeLocked(pc *pconn, peer int, now time.Time) {
	if pc.temp {
		pc.streams = 1 // one request, then closed
		return
	}
	pc.streams = p.cfg.streamsOf(peer)
	if l := p.cfg.MaxLifetime; l > 0 {
		// Uniform in [0.9·l, 1.1·l], drawn once, so connections opened
		// together (a deploy, a pre-warm) do not recycle together.
		pc.expires = now.Add(l - l/10 + time.Duration(p.rnd.IntN(int(l/5)+1)))
	}
}

func (p *Pool) addLocked(pc *pconn, now time.Time, fx *effects) {
	pc.idx = len(p.conns)
	p.conns = append(p.conns, pc)
	p.healthy++
	p.noteHeldLocked()
	p.learnLocked(pc.streams)
	pc.idleSince, pc.quietSince = now, now
	p.placeLocked(pc, true)
	p.serveLocked(fx)
	p.armLocked(p.deadlineLocked(pc, now), now)
}

// startTempLocked gives a new temporary connection to the head waiter; it is
// closed when no one waits any more (its request took a released stream or
// gave up).
func (p *Pool) startTempLocked(pc *pconn, fx *effects) {
	w := p.waiters.popFront()
	if w == nil {
		p.closeLocked(pc, ReasonEviction, fx)
		return
	}
	pc.idx = len(p.temps)
	p.temps = append(p.temps, pc)
	pc.inUse = 1
	p.handLocked(w, pc, fx)
}

// dialFailedLocked starts or extends the reconnect backoff. When nothing
// else can serve the waiters, they fail with the dial error.
func (p *Pool) dialFailedLocked(err error, now time.Time, fx *effects) {
	p.failures++
	ceil := p.cfg.BackoffMax
	if shift := p.failures - 1; shift < 62 && p.cfg.BackoffBase <= p.cfg.BackoffMax>>shift {
		ceil = p.cfg.BackoffBase << shift
	}
	wait := time.Duration(p.rnd.IntN(int(ceil))) // full jitter: uniform in [0, ceil)
	p.retryAt = now.Add(wait)
	p.lastErr = &DialError{Addr: p.addr, Loop: p.loop, Failures: p.failures, RetryAt: p.retryAt, Err: err}
	fx.dialErr, fx.backoff = p.lastErr, wait
	if p.healthy == 0 && p.dialing == 0 && p.tempDialing == 0 {
		p.failWaitersLocked(p.lastErr, fx)
	}
}

// release gives back one stream of pc; broken means the caller saw the
// connection fail.
func (p *Pool) release(pc *pconn, broken bool) {
	usable := !broken && pc.conn.Usable()
	peer := 0 // Conn methods run without the lock
	if usable && !pc.temp {
		peer = pc.conn.Streams()
	}
	now := p.clk.Now()
	var fx effects
	p.mu.Lock()
	streams := 0
	if usable && !pc.temp {
		streams = p.cfg.streamsOf(peer)
	}
	if pc.inUse--; pc.inUse < 0 {
		pc.inUse = 0
		p.mu.Unlock()
		panic(fmt.Sprintf("pool %s (loop %d): Lease released twice", p.addr, p.loop))
	}
	if !pc.temp {
		p.busy--
		if pc.streams == 1 && !pc.takenAt.IsZero() {
			p.noteHoldLocked(now.Sub(pc.takenAt))
		}
	}
	reason := ReasonRemote
	if broken {
		reason = ReasonError
	}
	switch {
	case pc.closed: // closed under the lease (Close, a failed probe)
	case pc.temp:
		if usable {
			reason = ReasonEviction
		}
		p.closeLocked(pc, reason, &fx)
	case !usable:
		p.retireLocked(pc, reason, &fx)
	case pc.draining:
		p.retireLocked(pc, pc.reason, &fx)
	default:
		p.reuseLocked(pc, streams, now, &fx)
	}
	p.pumpLocked(now, &fx)
	p.mu.Unlock()
	p.apply(&fx)
}

// reuseLocked puts a released stream of a healthy connection back: to the
// head waiter, else on the free list as the most recently used.
func (p *Pool) reuseLocked(pc *pconn, streams int, now time.Time, fx *effects) {
	pc.streams = streams
	p.learnLocked(streams)
	p.placeLocked(pc, true)
	p.serveLocked(fx)
	if pc.inUse == 0 {
		pc.idleSince, pc.quietSince = now, now
		p.armLocked(p.deadlineLocked(pc, now), now)
	}
}

// putBackDead undoes a hand-out of a stream on pc, which was found
// unusable: pc is retired (reason remote) and w, when the hand-out was to a
// waiter, goes back to the head of the queue.
func (p *Pool) putBackDead(pc *pconn, w *waiter) {
	now := p.clk.Now()
	var fx effects
	p.mu.Lock()
	pc.inUse--
	p.busy--
	p.retireLocked(pc, ReasonRemote, &fx)
	if w != nil {
		switch {
		case w.timedOut:
			p.settleLocked(w, ErrAcquireTimeout, &fx)
		case w.gaveUp:
			p.settleLocked(w, errCanceled, &fx)
		case p.state != stateOpen:
			p.settleLocked(w, ErrClosed, &fx)
		default:
			w.state = waiterQueued
			p.waiters.pushFront(w)
			p.serveLocked(&fx)
		}
	}
	p.pumpLocked(now, &fx)
	p.mu.Unlock()
	p.apply(&fx)
}

func (p *Pool) takeStreamLocked(pc *pconn) {
	pc.inUse++
	p.busy++
	if pc.streams == 1 {
		pc.takenAt = p.clk.Now()
	}
	f := pc.freeStreams()
	if f <= 0 {
		p.free.remove(pc)
	}
	if pc.streams > 1 && f < p.headroomLocked(pc.streams) {
		p.ahead = true
	}
}

// placeLocked puts pc on the free list when it can take a stream (at the
// back when recent, else at the front unless already on it), and takes it
// off otherwise.
func (p *Pool) placeLocked(pc *pconn, recent bool) {
	if pc.draining || pc.closed || pc.freeStreams() <= 0 {
		p.free.remove(pc)
		return
	}
	if pc.ln.on {
		if recent {
			// Moved, not taken off and put back: Free, read without
			// the lock, must not see the list one short meanwhile.
			p.free.moveToBack(pc)
		}
		return
	}
	if recent {
		p.free.pushBack(pc)
	} else {
		p.free.pushFront(pc)
	}
}

// serveLocked hands free streams to waiters, head first.
func (p *Pool) serveLocked(fx *effects) {
	for p.waiters.len() > 0 {
		pc := p.free.back()
		if pc == nil {
			return
		}
		p.takeStreamLocked(pc)
		p.handLocked(p.waiters.popFront(), pc, fx)
	}
}

// handLocked gives w a stream already taken on pc. The hand-out completes
// in apply, which checks pc.Usable first.
func (p *Pool) handLocked(w *waiter, pc *pconn, fx *effects) {
	w.state = waiterHanded
	fx.deliver = append(fx.deliver, delivery{w: w, lease: Lease{pc}})
}

// settleLocked fails a waiter that is no longer queued.
func (p *Pool) settleLocked(w *waiter, err error, fx *effects) {
	w.state = waiterDone
	fx.deliver = append(fx.deliver, delivery{w: w, err: err})
}

func (p *Pool) failWaitersLocked(err error, fx *effects) {
	for w := p.waiters.popFront(); w != nil; w = p.waiters.popFront() {
		p.settleLocked(w, err, fx)
	}
}

// retireLocked stops handing out pc; it closes at once when no stream is
// in use, else when the last one is released.
func (p *Pool) retireLocked(pc *pconn, reason CloseReason, fx *effects) {
	if pc.closed {
		return
	}
	if !pc.draining {
		pc.draining, pc.reason = true, reason
		p.healthy--
		p.noteHeldLocked()
		p.free.remove(pc)
	}
	if pc.inUse == 0 && !pc.probing {
		p.closeLocked(pc, pc.reason, fx)
	}
}

// closeLocked forgets pc and queues its Close.
func (p *Pool) closeLocked(pc *pconn, reason CloseReason, fx *effects) {
	if pc.closed {
		return
	}
	pc.closed = true
	p.free.remove(pc)
	slot := false
	if pc.idx >= 0 {
		if pc.temp {
			p.temps = removeAt(p.temps, pc.idx)
		} else {
			if !pc.draining {
				p.healthy--
				p.noteHeldLocked()
			}
			p.conns = removeAt(p.conns, pc.idx)
			p.closing++
			slot = true
		}
		pc.idx = -1
	}
	fx.closed = append(fx.closed, closing{pc, reason, slot})
}

func removeAt(s []*pconn, i int) []*pconn {
	last := len(s) - 1
	s[i] = s[last]
	s[i].idx = i
	s[last] = nil
	return s[:last]
}

// Reconfigure applies cfg and dialer in place (a nil dialer keeps the
// pool's): open connections carry on, and new dials use dialer. A lower
// MaxConnections retires only the connections above it — idle ones at
// once (least recently used first), busy ones as their last stream comes
// back; a higher one or a higher Prewarm dials what the new floor and the
// waiters need. Timeouts, the over-cap policy and the pending bound apply
// to acquisitions from now on; lifetimes already drawn stay.
func (p *Pool) Reconfigure(cfg Config, dialer Dialer) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("pool %s (loop %d): %w", p.addr, p.loop, err)
	}
	now := p.clk.Now()
	var fx effects
	p.mu.Lock()
	if p.state != stateOpen {
		p.mu.Unlock()
		return nil
	}
	p.cfg = cfg
	if dialer != nil {
		p.dialer = dialer
	}
	// The least recently used idle connections first: the free list's
	// front; then busy ones, which close when released.
	for excess := p.healthy - cfg.MaxConnections; excess > 0; excess-- {
		pc := p.free.front()
		if pc == nil {
			pc = p.busyLocked()
		}
		if pc == nil {
			break
		}
		p.retireLocked(pc, ReasonEviction, &fx)
	}
	p.pumpLocked(now, &fx)
	p.armLocked(now, now) // idle timeout and keepalive may have changed
	p.mu.Unlock()
	p.apply(&fx)
	return nil
}

// Renew retires every connection the pool holds, for a dialer whose
// connections the old ones cannot stand in for (a reload from h2 to h1
// under the fast path): none takes a new request, each closes as its last
// request ends (ReasonEviction), and the pool dials afresh with its
// current dialer, as its floor and its waiters ask. The dials in flight
// were started with the old dialer; as many connections as there were
// dials are retired as they arrive (the first to arrive, which is exact
// unless a new dial overtakes an old one: then a new connection is
// retired and dialled again, never an old one kept).
func (p *Pool) Renew() {
	now := p.clk.Now()
	var fx effects
	p.mu.Lock()
	if p.state != stateOpen {
		p.mu.Unlock()
		return
	}
	for _, pc := range slices.Clone(p.conns) {
		p.retireLocked(pc, ReasonEviction, &fx)
	}
	p.staleDials = p.dialing + p.tempDialing
	p.pumpLocked(now, &fx)
	p.mu.Unlock()
	p.apply(&fx)
}

// busyLocked returns an open pooled connection that is not
// draining and not on the free list (one in use), or nil.
func (p *Pool) busyLocked() *pconn {
	for _, pc := range p.conns {
		if !pc.draining && !pc.closed {
			return pc
		}
	}
	return nil
}

// Ready reports whether the pool holds its Prewarm healthy connections:
// the gateway's /readyz waits for every pool to be ready.
func (p *Pool) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == stateOpen && p.healthy >= p.cfg.floor()
}

// Drain is for an endpoint that left the subset: acquisitions fail with
// ErrClosed from now on, queued waiters fail with ErrClosed, streams in
// flight finish, and every connection closes (reason eviction) as soon as
// it carries none. done, if not nil, runs once the last connection is
// closed (maybe before Drain returns). Only the first Drain's done is kept;
// Close runs it too.
func (p *Pool) Drain(done func()) {
	now := p.clk.Now()
	var fx effects
	p.mu.Lock()
	if p.state == stateClosed {
		fx.drained = done
	}
	if p.state == stateOpen {
		p.state = stateDraining
		p.onDrained = done
		p.failWaitersLocked(ErrClosed, &fx)
		for i := 0; i < len(p.conns); {
			pc := p.conns[i]
			p.retireLocked(pc, ReasonEviction, &fx)
			if !pc.closed {
				i++
			}
		}
		p.stopSweepLocked()
		p.pumpLocked(now, &fx)
	}
	p.mu.Unlock()
	p.apply(&fx)
}

// Close shuts the pool down: waiters fail with ErrClosed and every
// connection, busy or not, is closed at once (reason shutdown). Dials in
// flight close their connection when they finish. Leases still held may be
// released as usual.
func (p *Pool) Close() {
	var fx effects
	p.mu.Lock()
	if p.state != stateClosed {
		p.state = stateClosed
		p.failWaitersLocked(ErrClosed, &fx)
		for len(p.conns) > 0 {
			p.closeLocked(p.conns[len(p.conns)-1], ReasonShutdown, &fx)
		}
		for len(p.temps) > 0 {
			p.closeLocked(p.temps[len(p.temps)-1], ReasonShutdown, &fx)
		}
		p.stopSweepLocked()
		fx.drained, p.onDrained = p.onDrained, nil
	}
	p.mu.Unlock()
	p.apply(&fx)
}

// drainedLocked queues Drain's callback once nothing is left.
func (p *Pool) drainedLocked(fx *effects) {
	if p.onDrained != nil && len(p.conns) == 0 && len(p.temps) == 0 && p.closing == 0 && p.dialing == 0 && p.tempDialing == 0 {
		fx.drained, p.onDrained = p.onDrained, nil
	}
}

// Stats is a snapshot of a pool, for gauges and the admin API.
type Stats struct {
	Open             int       // pooled connections open, draining ones included
	Idle             int       // healthy pooled connections with no stream in use
	Draining         int       // pooled connections finishing their streams before closing
	Busy             int       // streams in use on pooled connections
	Capacity         int       // streams the healthy pooled connections can carry
	Pending          int       // waiters queued
	Dialing          int       // pooled dials in flight
	Temporary        int       // temporary connections open
	TemporaryDialing int       // temporary dials in flight
	Protocol         string    // protocol of the latest connection; "" before the first
	Failures         int       // consecutive failed dials
	RetryAt          time.Time // end of the reconnect backoff; zero when not backing off
}

// Utilization is busy streams over capacity (0 without capacity).
func (s Stats) Utilization() float64 {
	if s.Capacity == 0 {
		return 0
	}
	return float64(s.Busy) / float64(s.Capacity)
}

// Held reports how many pooled connections the pool has open and not
// draining, or dialing: 0 means a request would find nothing of the
// endpoint's here. One atomic load, no lock, as Free.
func (p *Pool) Held() int { return int(p.held.Load()) }

// learnLocked notes the stream capacity of a connection that joined or
// was reused (0, unknown, is ignored).
func (p *Pool) learnLocked(streams int) {
	if streams > 0 {
		p.learned = streams
		p.single.Store(streams == 1)
	}
}

func (p *Pool) noteHeldLocked() { p.held.Store(int32(p.healthy + p.dialing)) }

// Free reports how many of the pool's connections have a free stream now:
// an Acquire would take one without dialling or waiting. It takes no lock
// (one atomic load), so a picker may ask it per request; the answer may be
// stale by the time it is acted on.
func (p *Pool) Free() int { return p.free.len() }

// Stats returns a snapshot. It walks the connections (at most
// MaxConnections), so call it for scrapes, not per request.
func (p *Pool) Stats() Stats {
	now := p.clk.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{
		Open: len(p.conns), Pending: p.waiters.len(), Dialing: p.dialing,
		Temporary: len(p.temps), TemporaryDialing: p.tempDialing,
		Protocol: p.protocol, Failures: p.failures,
	}
	if now.Before(p.retryAt) {
		s.RetryAt = p.retryAt
	}
	for _, pc := range p.conns {
		s.Busy += pc.inUse
		switch {
		case pc.draining:
			s.Draining++
		case pc.inUse == 0:
			s.Idle++
			s.Capacity += pc.streams
		default:
			s.Capacity += pc.streams
		}
	}
	return s
}

// String names the pool in logs.
func (p *Pool) String() string { return fmt.Sprintf("pool %s (loop %d)", p.addr, p.loop) }
