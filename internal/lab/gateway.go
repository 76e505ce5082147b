package lab

import (
	"errors"
	"fmt"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/rng"
)

// gateway is one simulated gateway instance: a balancer shared by its loops,
// a Picker per loop, and pools per (endpoint, loop) or per endpoint.
type gateway struct {
	e     *engine
	idx   int
	bal   *balance.Origin
	loops []*gwLoop
	pools []*pool.Pool // by instance id, for the perGateway and perRequest scopes

	rate  float64                         // arrivals per second at full share
	share func(now time.Duration) float64 // share of rate taken now; nil: all
	next  clock.Timer                     // the next arrival, re-armed by each
}

type gwLoop struct {
	idx    int
	picker *balance.Picker
	pools  []*pool.Pool // by instance id, for the perLoop scope
}

func (e *engine) newGateway(g int) (*gateway, error) {
	bal, err := balance.NewOrigin("origin", e.o.balance, membersOf(e.members), balance.Options{
		Clock: e.clk, Rand: rng.New(e.rnd.Uint64()),
	})
	if err != nil {
		return nil, fmt.Errorf("gateway %d: %w", g, err)
	}
	gw := &gateway{e: e, idx: g, bal: bal}
	for l := range e.o.loops {
		gw.loops = append(gw.loops, &gwLoop{idx: l, picker: bal.NewPicker(e.snap.Members(g, l))})
	}
	return gw, nil
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
	r.gw, r.loop, r.class = g, g.loops[e.rnd.IntN(len(g.loops))], class
	r.base, r.arrived, r.tries = e.mix.Classes[class].Latency, e.clk.Now(), 1+e.o.retries
	e.rec.arrived(e)
	r.attempt()
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

// request is one downstream request on its way through a gateway, following
// gateway.origin.try step by step: Pick, TryAdmit, acquire a stream,
// Release the admission, send, Done with latency and outcome, release the
// stream.
type request struct {
	e       *engine
	gw      *gateway
	loop    *gwLoop
	class   int
	base    time.Duration
	arrived time.Time
	tries   int

	ep      *balance.Endpoint
	in      *instance
	lease   pool.Lease
	asked   time.Time // acquisition started
	sent    time.Time
	onLease func(pool.Lease, error) // r.leased, bound once

	// Bound to this request object once and re-armed at each use: a
	// recycled request allocates nothing.
	service, deadline clock.Timer

	started, cancelled, fail, timedOut bool
}

// newRequest returns a blank request, recycled when one is free.
func (e *engine) newRequest() *request {
	if n := len(e.spare); n > 0 {
		r := e.spare[n-1]
		e.spare = e.spare[:n-1]
		return r
	}
	r := &request{e: e}
	r.onLease = r.leased
	return r
}

// recycle keeps r for a later request once nothing refers to it any more:
// the gateway has answered and the origin has let go of it.
func (r *request) recycle() {
	svc, dl, onLease := r.service, r.deadline, r.onLease
	*r = request{e: r.e, service: svc, deadline: dl, onLease: onLease}
	r.e.spare = append(r.e.spare, r)
}

func (r *request) attempt() {
	e := r.e
	r.tries--
	ep, err := r.loop.picker.Pick()
	if err != nil {
		r.shed(balance.ReasonNoHealthy)
		return
	}
	if !ep.TryAdmit() {
		ep.Done(0, balance.Shed)
		r.shed(balance.ReasonPendingFull)
		return
	}
	r.ep, r.in = ep, e.byAddr[ep.Address()]
	r.asked = e.clk.Now()
	r.gw.poolFor(r.loop, r.in).AcquireAsync(r.onLease)
}

// leased is the acquisition's answer (gateway.origin.acquireFailed for the
// errors).
func (r *request) leased(l pool.Lease, err error) {
	e := r.e
	r.ep.Release()
	var de *pool.DialError
	switch {
	case err == nil:
	case errors.As(err, &de), errors.Is(err, pool.ErrClosed):
		out := balance.Shed
		if de != nil {
			out = balance.ConnectFailure
		}
		r.ep.Done(0, out)
		if r.tries > 0 {
			r.attempt()
			return
		}
		r.shed("connect_failed")
		return
	default:
		r.ep.Done(0, balance.Shed)
		reason := "acquire_timeout"
		if errors.Is(err, pool.ErrPendingFull) {
			reason = balance.ReasonPendingFull
		}
		r.shed(reason)
		return
	}
	now := e.clk.Now()
	r.lease, r.sent = l, now
	e.rec.waited(now.Sub(r.asked))
	if t := e.o.timeout; t > 0 {
		if d := r.arrived.Add(t).Sub(now); r.deadline == nil {
			r.deadline = e.clk.AfterFunc(d, r.timeout)
		} else {
			r.deadline.Reset(d)
		}
	}
	r.in.accept(r)
}

// shed answers 503 from the gateway: the request never reached an origin.
func (r *request) shed(reason string) {
	r.e.rec.shed(r.e, r, reason)
	r.recycle()
}

// served is the origin's answer.
func (r *request) served() {
	r.in.served()
	if r.timedOut {
		r.recycle() // the gateway answered 504 already; the response is dropped
		return
	}
	if r.deadline != nil {
		r.deadline.Stop()
	}
	e := r.e
	now := e.clk.Now()
	out := balance.Success
	if r.fail {
		out = balance.ServerError
	}
	r.ep.Done(now.Sub(r.sent), out)
	if e.o.scope == perRequest {
		r.closeConn()
	}
	r.lease.Release()
	e.rec.answered(e, r, now, r.fail)
	r.recycle()
}

// timeout is the gateway's request timeout: 504 to the client, a 5xx for
// the balancer, and the stream given up (an HTTP/1.1 connection cannot be
// reused after a cancelled request).
func (r *request) timeout() {
	e := r.e
	r.timedOut = true
	now := e.clk.Now()
	r.ep.Done(now.Sub(r.sent), balance.ServerError)
	if r.lease.Conn().Streams() == 1 {
		r.closeConn()
	}
	r.lease.Release()
	r.in.cancel(r)
	e.rec.answered(e, r, now, true)
}

// closeConn makes the origin close the leased connection: the pool closes
// it (reason remote) when the stream comes back.
func (r *request) closeConn() {
	if c, ok := r.lease.Conn().(*memconn.Conn); ok {
		c.ClosePeer()
	}
}
