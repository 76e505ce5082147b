// Package dispatch is the request driver: it places a request on one of an
// origin's loops, gives each loop's picker its warm rule, and turns each of
// the request's picks into a stream of a pool — the loop's own, or one
// borrowed from the endpoint's home loop — for package forward's Attempt.
// It does no I/O of its own: the gateway drives it with blocking calls
// (Acquire), the lab with callbacks on its virtual time (Prepare, then
// AcquireAsync), so the lab's figures come from the same decisions that
// serve traffic.
//
// A request's way through a Driver, with what the caller does between:
//
//	l := d.Place()                          // a loop for the request
//	d.Begin(l); defer d.Finish(l)           // counted in the loop's requests in flight
//	a.Start(policy, picker(l), ...)         // forward.Attempt
//	for {
//		step := d.Acquire(ctx, a, l, trust, tr) // Pick, borrow or acquire: Send, Again, Answer, Gone
//		... on Send: the exchange on a.Conn(), then a.Failed or a.Settle ...
//	}
//
// Invariants:
//   - Place is round robin where the loops are equally busy: of the next
//     loop in rotation and one other drawn at random, the one with fewer
//     requests in flight (Begin to Finish) wins, and a tie keeps the
//     rotation's (docs/decisions.md, "A loop per request"). Two atomic
//     loads and an add; no lock.
//   - Warm and Prepare look at the loop's own pool first; the home loop's
//     pool (two map lookups) only when the own pool has no free stream
//     (docs/decisions.md, "Borrowing from the home loop" and "Preferring an
//     endpoint with a connection ready").
//   - Prepare borrows a free stream of the home loop before the own pool
//     dials, and, for an origin whose connections may multiplex, waits on
//     the home loop's connection when the loop holds none (pool.Share): an
//     HTTP/2 endpoint gets one connection per gateway, not one per loop.
//   - Every step the Attempt returns is passed on unchanged: the retry and
//     answer decisions are package forward's.
//   - Nothing here allocates per request.
package dispatch

import (
	"context"
	"sync/atomic"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/tracing"
)

// Pools is an origin's pools, per loop, by endpoint address, as the driver
// reads them.
type Pools interface {
	// Pool is loop l's pool for addr, nil when it has none. The warm rule
	// asks it of every candidate of every pick: it must not lock or
	// allocate.
	Pool(l int, addr string) *pool.Pool
	// Open is loop l's pool for addr, made on demand when the loop has
	// none (an endpoint outside the loop's subset, or one the lab's loop
	// has not used yet).
	Open(l int, addr string) (*pool.Pool, error)
}

// Driver drives one origin's requests over its loops.
type Driver struct {
	name  string
	pools Pools
	intn  func(n int) int // Place's draw: uniform in [0, n)
	mux   atomic.Bool     // the origin's connections may carry many streams
	homes atomic.Pointer[map[string]int]
	next  atomic.Uint64 // Place's rotation
	loops []loopLoad
}

// loopLoad is one loop's requests in flight. Padded: every request of
// every loop writes one of these.
type loopLoad struct {
	_        [64]byte
	inflight atomic.Int64
	_        [56]byte
}

// New is the driver of origin name's loops (at least one) over pools.
// intn draws Place's other loop; the lab passes its seeded source's.
func New(name string, loops int, pools Pools, intn func(n int) int) *Driver {
	return &Driver{name: name, pools: pools, intn: intn, loops: make([]loopLoad, max(loops, 1))}
}

// SetMultiplexes says whether the origin's connections may carry many
// streams (HTTP/2, or ALPN that may choose it): a loop that holds no
// connection of an endpoint then waits on its home loop's (pool.Share).
func (d *Driver) SetMultiplexes(m bool) { d.mux.Store(m) }

// SetHomes sets each endpoint's home loop (subset.Snapshot.Homes), replaced
// whole when the placement changes; nil: no endpoint has one, and no loop
// borrows.
func (d *Driver) SetHomes(h map[string]int) {
	if h == nil {
		d.homes.Store(nil)
		return
	}
	d.homes.Store(&h)
}

// Homes is the home loops SetHomes set last (nil for none); it must not be
// changed.
func (d *Driver) Homes() map[string]int {
	if hp := d.homes.Load(); hp != nil {
		return *hp
	}
	return nil
}

// Home is the pool of addr's home loop, nil when addr has none.
func (d *Driver) Home(addr string) *pool.Pool {
	hp := d.homes.Load()
	if hp == nil {
		return nil
	}
	h, ok := (*hp)[addr]
	if !ok {
		return nil
	}
	return d.pools.Pool(h, addr)
}

// Loops is the number of loops.
func (d *Driver) Loops() int { return len(d.loops) }

// Place returns the loop for a new request (see the package invariants).
func (d *Driver) Place() int {
	n := uint64(len(d.loops))
	i := (d.next.Add(1) - 1) % n
	if n == 1 {
		return 0
	}
	j := (i + 1 + uint64(d.intn(int(n-1)))) % n
	if d.loops[j].inflight.Load() < d.loops[i].inflight.Load() {
		return int(j)
	}
	return int(i)
}

// Begin counts a request on loop l in flight until Finish.
func (d *Driver) Begin(l int) { d.loops[l].inflight.Add(1) }

// Finish ends what Begin counted.
func (d *Driver) Finish(l int) { d.loops[l].inflight.Add(-1) }

// InFlight is loop l's requests between Begin and Finish.
func (d *Driver) InFlight(l int) int64 { return d.loops[l].inflight.Load() }

// Warm is loop l's warm rule for its picker (balance.Warm): whether the
// loop's own pool for an endpoint, or its home loop's, from which a request
// borrows, has a stream ready now (ready), or holds a connection at all
// (held).
func (d *Driver) Warm(l int) balance.Warm {
	return func(e *balance.Endpoint) (ready, held bool) { return d.warm(l, e.Address()) }
}

func (d *Driver) warm(l int, addr string) (ready, held bool) {
	own := d.pools.Pool(l, addr)
	if own != nil && own.Free() > 0 {
		return true, true
	}
	return pool.Ready(own, d.Home(addr))
}

// Prepare makes the next attempt of a's request on loop l ready to send:
// it picks the endpoint (forward.Attempt.Pick) and, when the loop's own
// pool has no free stream, borrows one of the home loop's. On Acquire the
// caller acquires a stream of p (AcquireTrusting when trust) and reports it
// to a.Acquired; any other step is the Attempt's, a borrowed stream
// included (Send). mayTrust lets an attempt take an idle connection
// unprobed when the Attempt allows it. tr, when tracing, hears the
// attempt's start; the caller tells it Acquired.
func (d *Driver) Prepare(a *forward.Attempt, l int, mayTrust bool, tr *tracing.Request) (step forward.Step, p *pool.Pool, trust bool) {
	ep, trust, step := a.Pick()
	trust = trust && mayTrust
	if step != forward.Acquire {
		return step, nil, false
	}
	addr := ep.Address()
	tr.StartAttempt(d.name, l, a.Attempts(), addr)
	p, err := d.pools.Open(l, addr)
	if err != nil {
		tr.Acquired()
		return a.Acquired(pool.Lease{}, forward.ErrNoPool), nil, false
	}
	if p.Free() == 0 {
		home := d.Home(addr)
		if lease, ok := pool.Borrow(p, home, trust); ok {
			tr.Acquired()
			return a.Acquired(lease, nil), nil, false
		}
		if d.mux.Load() {
			p = pool.Share(p, home)
		}
	}
	return forward.Acquire, p, trust
}

// Acquire is Prepare with a blocking acquisition, waiting at most until ctx
// ends: the gateway's way. It returns the Attempt's step: Send with a
// stream held, or Again, Answer or Gone.
func (d *Driver) Acquire(ctx context.Context, a *forward.Attempt, l int, mayTrust bool, tr *tracing.Request) forward.Step {
	step, p, trust := d.Prepare(a, l, mayTrust, tr)
	if step != forward.Acquire {
		return step
	}
	var lease pool.Lease
	var err error
	if trust {
		lease, err = p.AcquireTrusting(ctx)
	} else {
		lease, err = p.Acquire(ctx)
	}
	tr.Acquired()
	return a.Acquired(lease, err)
}
