package lab

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/workload"
)

// epoch is the virtual time every simulation starts at.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// poolScope says which pools a gateway keeps.
type poolScope uint8

const (
	// perLoop: one pool per (endpoint, loop), corput's design.
	perLoop poolScope = iota
	// perGateway: one pool per endpoint shared by a gateway's loops.
	perGateway
	// perRequest: like perGateway, but every response closes its
	// connection (Connection: close), so no connection is reused.
	perRequest
)

// fleetOptions is what one simulation runs: its gateways and how they reach
// the origin.
type fleetOptions struct {
	gateways, loops int
	algorithm       string // subset algorithm (subset.Name*)
	sizing          subset.Sizing
	scope           poolScope
	pool            pool.Config
	conn            memconn.Config
	balance         balance.Config
	workers         int           // per instance
	timeout         time.Duration // the gateway's request timeout; 0: none
	retries         int           // extra attempts after a connect failure or a drained pool
	noise           float64       // log-normal σ of every service time, around its median; 0: constant service times
	// variance is the σ of the variance model: every service time is
	// drawn log-normal around its mean (e^(σN − σ²/2)); 0: none.
	variance float64
	// zoneOf is gateway g's zone (balancer zone.local); nil: no zones.
	zoneOf func(g int) string
	// observer is gateway g's balance.Observer; nil: none.
	observer func(g int) balance.Observer
	// oneShot[c]: requests of class c are not replayable (a POST with a
	// body): a connection that breaks under one, or fails to open for it,
	// is answered 502 and not retried.
	oneShot []bool
	// keyed: the oneShot classes' requests carry an idempotency key
	// (retry.idempotency_header), as a payments client sends its
	// authorizations: one that may have reached a pod is replayed too.
	keyed bool
	// baseline: steps 0–5 (steps.go: the spec's connection-pool techniques
	// added one at a time, gw-04), the pools of the Zuul
	// progression, without the warm pick and borrowing from the home loop
	// (docs/decisions.md); every other experiment decides as the gateway
	// does.
	baseline bool
}

// engine is one discrete-event simulation on virtual time. It runs on one
// goroutine: the clock.Fake fires every callback on the goroutine that
// advances it.
type engine struct {
	clk   *clock.Fake
	rnd   *rng.Source // arrivals, classes, loops, injected errors
	prn   *rng.Source // the pools' jitter
	mix   workload.Mix
	costs []float64 // each class's cost (workload.Mix.Costs): what the gateway knows of a request
	o     fleetOptions

	placement subset.Placement
	snap      *subset.Snapshot
	members   []*instance // current membership, in order
	insts     []*instance // every instance ever created, by id
	byAddr    map[string]*instance
	gws       []*gateway

	spare []*request // finished requests, for reuse
	tally pool.Tally // every pool's events
	rec   recorder
	ts    timeSeries
	err   error // the first error of a callback; stops the run
}

// newEngine builds a simulation whose origin starts with the given
// instances (made by mk, called once per address) and whose gateways are
// created but not started.
func newEngine(seed uint64, mix workload.Mix, o fleetOptions) *engine {
	return &engine{
		clk:    clock.NewFake(epoch),
		rnd:    rng.New(seed),
		prn:    rng.New(rng.Mix64(seed ^ 0x706f6f6c)),
		mix:    mix,
		costs:  mix.Costs(),
		o:      o,
		byAddr: map[string]*instance{},
	}
}

// now is the virtual time elapsed since the start.
func (e *engine) now() time.Duration { return e.clk.Now().Sub(epoch) }

func (e *engine) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// place builds the subset placement of the initial membership and the
// gateways, each with its own balancer (shared by its loops) and one
// Picker per loop over that loop's subset.
func (e *engine) place(members []*instance) error {
	alg, err := subset.Lookup(e.o.algorithm)
	if err != nil {
		return err
	}
	addrs := addrsOf(members)
	fleet := subset.Fleet{Gateways: e.o.gateways, Loops: e.o.loops}
	e.placement, err = alg.Place(subset.Params{Origin: "origin", Fleet: fleet, Sizing: e.o.sizing, Seed: e.rnd.Uint64()}, addrs)
	if err != nil {
		return err
	}
	e.snap = e.placement.Snapshot()
	e.members = members
	for g := range e.o.gateways {
		gw, err := e.newGateway(g, e.snap)
		if err != nil {
			return err
		}
		e.gws = append(e.gws, gw)
	}
	return nil
}

func addrsOf(ins []*instance) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.addr
	}
	return out
}

func membersOf(ins []*instance) []balance.Member {
	out := make([]balance.Member, len(ins))
	for i, in := range ins {
		out[i] = balance.Member{Address: in.addr, Zone: in.zone, Weight: 1}
	}
	return out
}

// setMembers applies a membership change the way the gateway does
// (gateway.origin.apply): the balancers keep survivors' state and ramp
// newcomers up, the placement changes by deltas, and only loops whose
// subset changed touch their pools: departed members drain.
func (e *engine) setMembers(next []*instance) error {
	added, removed := delta(e.members, next)
	ms := membersOf(next)
	for _, g := range e.gws {
		if err := g.bal.Update(ms); err != nil {
			return fmt.Errorf("gateway %d: %w", g.idx, err)
		}
	}
	for _, a := range removed {
		if err := e.placement.Remove(a); err != nil {
			return err
		}
	}
	for _, a := range added {
		if err := e.placement.Add(a); err != nil {
			return err
		}
	}
	snap := e.placement.Snapshot()
	for _, g := range e.gws {
		for _, ch := range subset.Diff(e.snap, snap, g.idx) {
			// The new subset first: a request whose acquisition the drain
			// fails retries at once, and must not be placed on another
			// endpoint leaving the loop (least_work's heavy requests, six
			// candidates, found one: two requests shed no_healthy in the
			// reduced steps run).
			l := g.loops[ch.Loop]
			l.picker.SetSubset(snap.Members(g.idx, ch.Loop))
			for _, a := range ch.Removed {
				drain(l.pools, e.byAddr[a].id)
			}
		}
		g.placed(snap)
		for _, a := range removed {
			id := e.byAddr[a].id
			drain(g.pools, id)
			for _, l := range g.loops {
				drain(l.pools, id) // an on-demand pool outside the subset
			}
		}
	}
	e.snap, e.members = snap, next
	return nil
}

// delta returns, sorted, the addresses only next has and those only cur
// has.
func delta(cur, next []*instance) (added, removed []string) {
	count := make(map[string]int, len(cur)+len(next))
	for _, in := range cur {
		count[in.addr]--
	}
	for _, in := range next {
		count[in.addr]++
	}
	for a, n := range count {
		switch {
		case n > 0:
			added = append(added, a)
		case n < 0:
			removed = append(removed, a)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

func drain(pools []*pool.Pool, id int) {
	if id < len(pools) && pools[id] != nil {
		pools[id].Drain(nil)
		pools[id] = nil
	}
}

// run advances the simulation second by second to d after the start,
// sampling the connection counts after each second and calling tick.
func (e *engine) run(ctx context.Context, d time.Duration, tick func()) error {
	for s := e.now()/time.Second + 1; s <= d/time.Second; s++ {
		e.clk.AdvanceTo(epoch.Add(s * time.Second))
		e.ts.sample(e)
		if tick != nil {
			tick()
		}
		if e.err != nil {
			return e.err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// expGap draws the gap to the next Poisson arrival at rate per second.
func expGap(r *rng.Source, rate float64) time.Duration {
	return time.Duration(-math.Log(1-r.Float64()) / rate * float64(time.Second))
}
