package balance

import (
	"math"
	"slices"
	"sync/atomic"
)

// workScale is how finely work is counted: one unit of cost (a request of
// the lightest class, or of no known class) is workScale work units, so
// that work in flight is an exact integer sum however costs are written.
const workScale = 1024

// maxCost bounds a request's cost (in units of the lightest class).
const maxCost = 1 << 20

// workUnits converts a request's cost to work units: at least one unit
// of workScale; a cost that is not a positive number counts as 1.
func workUnits(cost float64) int64 {
	if !(cost > 0) {
		return workScale
	}
	return max(1, int64(min(cost, maxCost)*workScale+0.5))
}

// Ticket is what the balancer counted at an endpoint for one request
// placed by PickCost: the request's work, the instant it was picked (for
// least_work's queue signal) and how many requests the endpoint had in
// flight then, itself included (for the learned concurrency limit).
// Endpoint.End gives it all back. The zero Ticket belongs to no pick.
type Ticket struct {
	work int64 // the request's cost in work units
	at   int64 // pick instant, ms since the origin's epoch; -1: not timed
	n    int64 // requests in flight at the endpoint when picked, this one included
	// counted: placed on a sticky snapshot, so counted in the origin's
	// in-flight requests (Origin.inflight) until End.
	counted bool
	// ramp: the endpoint was in slow start when picked. A warming
	// endpoint answers faster than its lagging mean every time, which the
	// limit would read as room for more: its answers only lower the limit.
	ramp bool
	// probe: a health check's probe (Probe): End counts it for nothing.
	probe bool
}

// unitTicket is what Pick counts: one unit of work, untimed.
var unitTicket = Ticket{work: workScale, at: -1}

// Cost returns the request's cost, in units of the lightest class.
func (t Ticket) Cost() float64 { return t.cost() }

func (t Ticket) cost() float64 { return float64(t.work) / workScale }

// PickCost is Pick for a request of the given cost (in units of the
// lightest workload class; 1 for a request of no known class): least_work
// weighs it (see leastWork), and every policy counts it in the endpoint's
// work in flight. The request must end with End(ticket, …), not Done.
func (p *Picker) PickCost(cost float64) (*Endpoint, Ticket, error) {
	s := p.snap.Load()
	g := s.group(p.rand)
	if len(g.entries) == 0 {
		return nil, Ticket{}, ErrNoHealthy
	}
	var now int64
	if s.clock {
		now = p.origin.nowNs()
	}
	units := workUnits(cost)
	e := s.choose.choose(g, now, p.rand, units)
	ep, t := p.place(s, e, units, now, true)
	return ep, t, nil
}

// place counts a request of units work as active on e's endpoint and
// returns its ticket; timed (a PickCost, which ends with End) records the
// pick instant when the policy reads it and, on a sticky snapshot, counts
// the request in the origin's in flight.
func (p *Picker) place(s *snapshot, e *entry, units, now int64, timed bool) (*Endpoint, Ticket) {
	ep := e.ep
	t := Ticket{work: units, at: -1, n: ep.active.Add(1), ramp: e.from != warm && now < e.from+s.groups[0].prm.window}
	if timed && s.keyed != nil {
		p.origin.inflight.Add(1)
		t.counted = true
	}
	ep.work.Add(units)
	if timed && s.timed {
		if ms := now / 1e6; ep.ages.add(ms) {
			t.at = ms
		}
	}
	if s.count {
		p.origin.obs.ZonePick(e.local)
	}
	return ep, t
}

// ageSum is the number of timed requests in flight at an endpoint and the
// sum of their pick instants (ms since the origin's epoch), in one word so
// that a reader sees both of one moment: the count in the top ageCountBits
// bits, the sum modulo 2^ageSumBits below. The ages of the requests in
// flight add up to count × now − sum, computed modulo 2^ageSumBits: exact
// while that total stays below 2^43 ms (278 years), whatever the sum of
// the instants. A request that would overflow the count is not timed.
type ageSum struct {
	word atomic.Uint64
}

const (
	ageSumBits   = 44
	ageCountBits = 64 - ageSumBits
	ageSumMask   = 1<<ageSumBits - 1
	ageMaxCount  = 1<<ageCountBits - 1
)

// add counts a request picked at ms; false when the count is full.
func (a *ageSum) add(ms int64) bool {
	for {
		old := a.word.Load()
		n := old >> ageSumBits
		if n == ageMaxCount {
			return false
		}
		next := (n+1)<<ageSumBits | (old+uint64(ms))&ageSumMask
		if a.word.CompareAndSwap(old, next) {
			return true
		}
	}
}

// remove takes back a request that add counted at ms.
func (a *ageSum) remove(ms int64) {
	for {
		old := a.word.Load()
		n := old >> ageSumBits
		next := (n-1)<<ageSumBits | (old-uint64(ms))&ageSumMask
		if a.word.CompareAndSwap(old, next) {
			return
		}
	}
}

// total returns the timed requests in flight and the sum of their ages in
// ms at instant nowMs (0 when a request picked after nowMs makes it
// negative).
func (a *ageSum) total(nowMs int64) (n int64, ageMs int64) {
	w := a.word.Load()
	c := w >> ageSumBits
	sum := (c*uint64(nowMs) - w) & ageSumMask
	if sum >= 1<<(ageSumBits-1) {
		return int64(c), 0
	}
	return int64(c), int64(sum)
}

// queue is least_work's queue signal at instant now: the age of the work
// in flight per unit of its cost, ns. A request answered without waiting
// is younger than its own service time, so while nothing waits the signal
// stays below the endpoint's latency per unit of cost; a request that
// waits for a worker keeps ageing, and lifts it at once, before any answer
// shows the wait (docs/balancing.md, "Cold endpoints").
func (e *Endpoint) queue(now int64, workUnits int64) float64 {
	if workUnits <= 0 {
		return 0
	}
	n, ages := e.ages.total(now / 1e6)
	if n == 0 || ages == 0 {
		return 0
	}
	return float64(ages) * 1e6 * workScale / float64(workUnits)
}

// limitNow is the endpoint's learned concurrency limit.
func (e *Endpoint) limitNow() float64 { return math.Float64frombits(e.limit.Load()) }

// maxLimit bounds the learned concurrency limit.
const maxLimit = 1 << 20

// learn adjusts the endpoint's concurrency limit from one success: x is
// its latency per unit of cost, n the requests in flight at the endpoint
// when it was picked, itself included. The limit is the most requests in
// flight at which the endpoint still answers at its usual speed (its mean
// latency per unit of cost): a request at least that fast, picked with more
// in flight than the limit, raises the limit to that count at once; one
// slower than tie × the mean, picked within the limit, shows the latency
// rising below it and lowers the limit an eighth of the way to what was in
// flight before it (n − 1), never below 1. A request picked while the
// endpoint was in slow start (ramp) only lowers it.
func (e *Endpoint) learn(n int64, x, tie float64, ramp bool) {
	ref := e.speed.load()
	if !(ref > 0) {
		return
	}
	for {
		old := e.limit.Load()
		l := math.Float64frombits(old)
		var next float64
		switch k := float64(n); {
		case k > l && x <= ref && !ramp:
			next = min(k, maxLimit)
		case k <= l && x > tie*ref:
			next = max(1, l-(l-(k-1))/8)
		default:
			return
		}
		if next == l || e.limit.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

// seedLocked starts least_work's estimates of an endpoint that joins:
// its latency per unit of cost at the origin's current median (of the
// endpoints in service that have answered), and its concurrency limit at
// the median limit per unit of weight times its own weight. With no such
// endpoint, default_rtt and the weight.
func (o *Origin) seedLocked(e *Endpoint, now int64) {
	var speeds, limits []float64
	for _, x := range o.list {
		if x == e || x.state.Load() == ejected || x.speed.samples() == 0 {
			continue
		}
		speeds = append(speeds, x.speed.load())
		limits = append(limits, x.limitNow()/float64(x.weight))
	}
	speed, limit := o.t().prm.rttNs, float64(e.weight)
	if len(speeds) > 0 {
		speed, limit = median(speeds), max(1, median(limits)*float64(e.weight))
	}
	e.speed.reset(speed)
	e.seen.Store(now / 1e6)
	e.limit.Store(math.Float64bits(limit))
	e.rampLimit.Store(math.Float64bits(limit))
}

// rampCap is how many requests an endpoint in slow start may hold at
// slow-start factor f: f × the concurrency limit it entered slow start
// with, at least 1. The limit at entry, not the learned one: in slow start
// the learned limit only falls, and on a busy machine each stall cut it
// an eighth, until a newcomer held one request at a time for its whole
// window (bench/peers at load 17: limit 10.1 at the join, 1.0 at 41 s).
func (e *Endpoint) rampCap(f float64) float64 {
	l := math.Float64frombits(e.rampLimit.Load())
	if l == 0 {
		l = e.limitNow()
	}
	return max(1, f*l)
}

// slowness is least_work's latency per unit of cost at instant now, ns:
// the endpoint's moving average of latency ÷ cost, decayed by
// exp(−idle/τ) while no answer came (τ = ewma_decay), so that an endpoint
// avoided for its slowness is tried again, as Peak EWMA's estimate decays.
func (e *Endpoint) slowness(now int64, tauMs float64) float64 {
	return e.speed.load() * decay(msOf(now), uint32(e.seen.Load()), tauMs)
}

// observeSpeed folds in one answer's latency per unit of cost, x ns, at
// instant now.
func (e *Endpoint) observeSpeed(x float64, now int64) {
	e.speed.observe(x)
	e.seen.Store(now / 1e6)
}

// median of a non-empty slice, which it sorts.
func median(vs []float64) float64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}
