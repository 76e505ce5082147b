package lab

import (
	"fmt"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/dispatch"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/subset"
)

// gateway is one simulated gateway instance: a balancer shared by its loops,
// a Picker per loop, pools per (endpoint, loop) or per endpoint, and the
// gateway's own request driver (package dispatch) over them: a request is
// placed, picks warm endpoints, borrows from home loops and acquires its
// streams exactly as it does in corput serve. What is simulated is only
// the arrivals and the origins.
type gateway struct {
	e     *engine
	idx   int
	bal   *balance.Origin
	loops []*gwLoop
	drv   *dispatch.Driver // places requests and acquires their streams, over set
	set   *poolSet
	pools []*pool.Pool // by instance id, for the perGateway and perRequest scopes

	policy forward.Policy // the retry rules and budget of its requests (as a gateway origin's)

	rate  float64                         // arrivals per second at full share
	share func(now time.Duration) float64 // share of rate taken now; nil: all
	next  clock.Timer                     // the next arrival, re-armed by each
}

type gwLoop struct {
	gw       *gateway
	idx      int
	requests int64 // placed on it
	picker   *balance.Picker
	pools    []*pool.Pool // by instance id, for the perLoop scope
}

// poolSet is where a gateway process keeps its pools, as its driver reads
// them (dispatch.Pools): per loop for the perLoop scope, per gateway for
// the baseline steps' scopes. A restarted gateway's new process gets a set
// of its own, while the old process's requests finish on the old one.
type poolSet struct {
	g     *gateway
	loops []*gwLoop
}

// Pool is loop l's pool for addr, nil before its first use.
func (s *poolSet) Pool(l int, addr string) *pool.Pool {
	return s.g.pool(s.loops[l], s.g.e.byAddr[addr])
}

// Open is loop l's pool for addr, created on its first use.
func (s *poolSet) Open(l int, addr string) (*pool.Pool, error) {
	return s.g.poolFor(s.loops[l], s.g.e.byAddr[addr]), nil
}

// newGateway builds gateway g with its loops' subsets from snap.
func (e *engine) newGateway(g int, snap *subset.Snapshot) (*gateway, error) {
	bc, opts := e.o.balance, balance.Options{Clock: e.clk, Rand: rng.New(e.rnd.Uint64())}
	if e.o.zoneOf != nil {
		bc.Zone.Local = e.o.zoneOf(g)
	}
	if e.o.observer != nil {
		opts.Observer = e.o.observer(g)
	}
	bal, err := balance.NewOrigin("origin", bc, membersOf(e.members), opts)
	if err != nil {
		return nil, fmt.Errorf("gateway %d: %w", g, err)
	}
	retry := config.DefaultOrigin().Retry
	retry.Attempts = e.o.retries
	gw := &gateway{e: e, idx: g, bal: bal, policy: forward.NewPolicy(retry, e.clk, nil)}
	gw.policy.Jitter = func(n int64) int64 { return int64(e.rnd.Uint64() % uint64(n)) } // seeded: a seed fixes every figure
	for l := range e.o.loops {
		gw.loops = append(gw.loops, &gwLoop{gw: gw, idx: l})
	}
	gw.set = &poolSet{g: gw, loops: gw.loops}
	gw.drv = dispatch.New("origin", e.o.loops, gw.set, e.rnd.IntN)
	gw.drv.SetMultiplexes(e.o.conn.Streams > 1) // as for an origin that may speak HTTP/2
	gw.placed(snap)
	for l, gl := range gw.loops {
		var warm balance.Warm
		if !e.o.baseline {
			warm = gw.drv.Warm(l)
		}
		gl.picker = bal.NewWarmPicker(snap.Members(g, l), warm)
	}
	return gw, nil
}

// placed takes the home loops of a new placement snap: only per-loop
// pools have homes to borrow from, and not in the baseline steps.
func (g *gateway) placed(snap *subset.Snapshot) {
	if g.e.o.scope != perLoop || g.e.o.baseline {
		g.drv.SetHomes(nil)
		return
	}
	g.drv.SetHomes(snap.Homes(g.idx))
}

// pool is the loop's pool for in, or nil before the first use.
func (g *gateway) pool(l *gwLoop, in *instance) *pool.Pool {
	pools := l.pools
	if g.e.o.scope != perLoop {
		pools = g.pools
	}
	if in.id < len(pools) {
		return pools[in.id]
	}
	return nil
}

// start begins the gateway's Poisson arrivals at rate per second.
func (g *gateway) start(rate float64) {
	g.rate = rate
	g.next = g.e.clk.AfterFunc(expGap(g.e.rnd, rate), g.arrival)
}

func (g *gateway) arrival() {
	e := g.e
	g.next.Reset(expGap(e.rnd, g.rate))
	if g.share != nil && e.rnd.Float64() >= g.share(e.now()) {
		return
	}
	class := e.classOf(e.mix.Pick(e.rnd.Float64()))
	r := e.newRequest()
	oneShot := class < len(e.o.oneShot) && e.o.oneShot[class]
	r.begin(g, g.loops[g.drv.Place()], class, e.mix.Classes[class].Latency,
		forward.Replay{Resend: !oneShot || e.o.keyed}, e.costs[class])
	e.rec.arrived(e)
	r.attempt()
}

// begin starts r on loop l of gateway g: counted in the loop's requests
// in flight, its attempts under the gateway's retry policy.
// A request's body is not modelled: it always fits the replay buffer.
func (r *request) begin(g *gateway, l *gwLoop, class int, base time.Duration, replay forward.Replay, cost float64) {
	r.gw, r.drv, r.loop, r.class, r.base, r.arrived = g, g.drv, l, class, base, r.e.clk.Now()
	l.requests++
	r.drv.Begin(l.idx)
	r.a.Start(&g.policy, l.picker, replay, cost, balance.Key{})
}

// poolFor returns the pool the request path uses for in on loop l, creating
// it on first use as the gateway does for an endpoint without a pool.
func (g *gateway) poolFor(l *gwLoop, in *instance) *pool.Pool {
	pools := &l.pools
	loop := l.idx
	if g.e.o.scope != perLoop {
		pools, loop = &g.pools, 0
	}
	if in.id >= len(*pools) {
		*pools = append(*pools, make([]*pool.Pool, len(g.e.insts)-len(*pools))...)
	}
	p := (*pools)[in.id]
	if p == nil {
		p = g.e.newPool(in, loop, g.e.o.pool)
		(*pools)[in.id] = p
	}
	return p
}

// newPool is pool.New for instance in on loop, counted by the run's tally.
func (e *engine) newPool(in *instance, loop int, cfg pool.Config) *pool.Pool {
	p, err := pool.New(in.addr, loop, cfg, in.dialer, e.clk, e.prn, &e.tally)
	if err != nil {
		e.fail(err) // the configuration was validated up front: a bug
		p, _ = pool.New(in.addr, loop, pool.DefaultConfig(), in.dialer, e.clk, e.prn, &e.tally)
	}
	return p
}

// request is one downstream request on its way through a gateway. Its
// steps are the gateway's own (a forward.Attempt: pick, admit, acquire,
// exchange, settle, release, and the retry decision); only the exchange is
// the model's: the instance serves it on virtual time.
type request struct {
	e       *engine
	gw      *gateway
	drv     *dispatch.Driver // the driver it was placed by (a restart replaces the gateway's)
	loop    *gwLoop
	class   int
	base    time.Duration
	arrived time.Time
	a       forward.Attempt

	in      *instance
	asked   time.Time               // acquisition started
	onLease func(pool.Lease, error) // r.leased, bound once

	// Bound to this request object once and re-armed at each use: a
	// recycled request allocates nothing.
	service, deadline, backoff clock.Timer
	onBackoff                  func() // r.attempt, bound once
	slot                       int    // index in its instance's serving list while in service
	visits                     int    // times an instance took it in: 2 or more, it reached a pod twice
	retried                    bool   // it went again after a failed attempt

	started, cancelled, fail, timedOut bool
	closeAfter                         bool // the origin closes the connection once it is idle (memconn.ServeThenClose)
}

// newRequest returns a blank request, recycled when one is free.
func (e *engine) newRequest() *request {
	if n := len(e.spare); n > 0 {
		r := e.spare[n-1]
		e.spare = e.spare[:n-1]
		return r
	}
	r := &request{e: e}
	r.onLease, r.onBackoff = r.leased, r.attempt
	return r
}

// recycle keeps r for a later request once nothing refers to it any more:
// the gateway has answered and the origin has let go of it.
func (r *request) recycle() {
	svc, dl, bo, onLease, onBackoff := r.service, r.deadline, r.backoff, r.onLease, r.onBackoff
	*r = request{e: r.e, service: svc, deadline: dl, backoff: bo, onLease: onLease, onBackoff: onBackoff}
	r.e.spare = append(r.e.spare, r)
}

// attempt makes the request's next attempt ready and acquires its stream
// on virtual time, through the gateway's driver.
func (r *request) attempt() {
	step, p, trust := r.drv.Prepare(&r.a, r.loop.idx, true, nil)
	if ep := r.a.Endpoint(); ep != nil {
		r.in = r.e.byAddr[ep.Address()]
	}
	r.asked = r.e.clk.Now()
	if step != forward.Acquire {
		r.proceed(step)
		return
	}
	if trust {
		p.AcquireTrustingAsync(r.onLease) // as the fast path does
	} else {
		p.AcquireAsync(r.onLease)
	}
}

// next carries on after an attempt ended with s.
func (r *request) next(s forward.Step) {
	switch s {
	case forward.Again:
		r.started, r.fail, r.closeAfter = false, false, false
		r.again()
	case forward.Delivered:
		r.finish()
		r.e.rec.answered(r.e, r, r.e.clk.Now(), r.fail)
		r.recycle()
	default:
		r.answer()
	}
}

// again makes the request's next attempt after a failed one, once the
// Attempt's backoff has passed on virtual time, as the gateway sleeps it.
func (r *request) again() {
	r.retried = true
	d := r.a.Backoff()
	if d <= 0 {
		r.attempt()
		return
	}
	if r.backoff == nil {
		r.backoff = r.e.clk.AfterFunc(d, r.onBackoff)
	} else {
		r.backoff.Reset(d)
	}
}

// leased is the acquisition's answer: the request goes to the instance,
// or again, or is answered by the gateway.
func (r *request) leased(l pool.Lease, err error) { r.proceed(r.a.Acquired(l, err)) }

// proceed carries on after the attempt's acquisition ended with s: on Send
// the request goes to the instance.
func (r *request) proceed(s forward.Step) {
	switch s {
	case forward.Again:
		r.again()
		return
	case forward.Answer, forward.Gone:
		r.answer()
		return
	}
	e := r.e
	now := e.clk.Now()
	e.rec.waited(now.Sub(r.asked))
	c, _ := r.a.Conn().(*memconn.Conn)
	if c != nil && c.PeerGone() { // handed out unprobed, and the origin had closed it
		r.next(r.a.Failed(forward.Stale))
		return
	}
	switch r.in.dialer.Next() {
	case memconn.Unavailable:
		r.fail = true
		r.a.Respond(503, false)
		r.next(r.a.Settle())
		return
	case memconn.Reset:
		c.ClosePeer()
		r.next(r.a.Failed(forward.Broken))
		return
	case memconn.ServeThenClose:
		r.closeAfter = true
	}
	if t := e.o.timeout; t > 0 {
		if d := r.arrived.Add(t).Sub(now); r.deadline == nil {
			r.deadline = e.clk.AfterFunc(d, r.timeout)
		} else {
			r.deadline.Reset(d)
		}
	}
	r.in.accept(r)
}

// finish ends the request's attempts (forward.Attempt.Finish) and takes it
// off its loop's requests in flight, as cluster.Origin.Finish does.
func (r *request) finish() {
	r.a.Finish()
	r.drv.Finish(r.loop.idx)
}

// answer ends a request the gateway answered itself: it never reached an
// origin, or every attempt failed.
func (r *request) answer() {
	r.finish()
	r.e.rec.shed(r.e, r, r.a.Reason().String())
	r.recycle()
}

// served is the origin's answer.
func (r *request) served() {
	r.in.served(r)
	if r.timedOut {
		r.recycle() // the gateway answered 504 already; the response is dropped
		return
	}
	if r.deadline != nil {
		r.deadline.Stop()
	}
	e := r.e
	status := 200
	if r.fail {
		status = 500
	}
	r.a.Respond(status, false)
	if e.o.scope == perRequest {
		r.closeConn()
	}
	c, _ := r.a.Conn().(*memconn.Conn)
	step := r.a.Settle()
	if r.closeAfter && c != nil {
		c.ClosePeer() // after the stream went back: the connection sits idle, closed
	}
	r.next(step)
}

// timeout is the gateway's request timeout: 504 to the client, a 5xx for
// the balancer, and the stream given up (an HTTP/1.1 connection cannot be
// reused after a cancelled request).
func (r *request) timeout() {
	e := r.e
	r.timedOut = true
	if r.a.Conn().Streams() == 1 {
		r.closeConn()
	}
	r.a.Failed(forward.Timeout)
	r.finish()
	r.in.cancel(r)
	e.rec.answered(e, r, e.clk.Now(), true)
}

// closeConn makes the origin close the leased connection: the pool closes
// it (reason remote) when the stream comes back.
func (r *request) closeConn() {
	if c, ok := r.a.Conn().(*memconn.Conn); ok {
		c.ClosePeer()
	}
}

// broken is the gateway's side of an instance killed under the request:
// the connection broke with the request sent.
func (r *request) broken() {
	if r.deadline != nil {
		r.deadline.Stop()
	}
	if r.timedOut { // the gateway answered 504 already
		r.recycle()
		return
	}
	r.closeConn()
	r.next(r.a.Failed(forward.Broken))
}
