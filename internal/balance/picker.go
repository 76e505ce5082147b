package balance

import (
	"slices"
	"sync/atomic"

	"github.com/corput/corput/internal/rng"
)

// Picker chooses endpoints for one loop. It reads an immutable snapshot —
// the loop's subset intersected with the healthy set, zone-split, with
// weights — published by atomic swap whenever membership, health, panic or
// the subset change. Pick takes no lock and allocates nothing, and is safe
// for concurrent use by every goroutine of the loop.
type Picker struct {
	origin *Origin
	rand   *rng.Source
	snap   atomic.Pointer[snapshot]

	subset []string // guarded by origin.mu
	warm   Warm     // fixed at NewWarmPicker
}

// snapshot is what one loop may pick from until the next change.
type snapshot struct {
	choose    chooser  // the policy in force when it was built
	groups    [3]group // [0]: local zone (or everything); [1]: other zones; [2]: the down-weighted zone
	split     bool     // choose between groups 0 and 1 by localFrac
	localFrac float64
	probeFrac float64 // share of picks that go to group 2 (a zone PenalizeZone down-weights)
	count     bool    // report ZonePick
	clock     bool    // Pick needs the time (Peak EWMA, least_work, or slow start in progress)
	timed     bool    // PickCost records the pick instant (least_work's queue signal)
	// keyed: a sticky policy's order over groups[0], the whole origin's
	// candidates; nil for other policies.
	keyed *keyedView
}

// group is a set of candidates a policy chooses among.
type group struct {
	entries   []entry
	prm       *params
	equal     bool    // every configured weight is the same
	slowUntil int64   // no entry is in slow start from this instant on; warm: none is now
	maxWeight float64 // the largest configured weight
	sumWeight float64 // the configured weights' sum
	next      atomic.Uint64
	warm      Warm // the picker's (NewWarmPicker); nil: none
}

// entry is one candidate as of the snapshot.
type entry struct {
	ep       *Endpoint
	weight   float64       // configured
	from     int64         // slow start began, or warm
	local    bool          // in the gateway's zone
	deadline atomic.Uint64 // EDF virtual finish time (float64 bits)
}

// uniform reports whether every candidate has the same effective weight at
// instant now.
func (g *group) uniform(now int64) bool { return g.equal && now >= g.slowUntil }

// weight is e's slow-start weight at instant now.
func (g *group) weight(e *entry, now int64) float64 { return g.prm.effective(e.weight, e.from, now) }

// NewPicker returns a Picker for a loop whose subset holds the given
// addresses (the subset engine's choice for that loop). An empty subset means
// every endpoint of the origin. Addresses that are not members are ignored
// until they become members.
func (o *Origin) NewPicker(subset []string) *Picker { return o.NewWarmPicker(subset, nil) }

// Warm reports what a loop's pools hold for endpoint e now: ready, a free
// stream (a request there dials nothing and waits for nothing); held, any
// connection open or dialing. It runs on the request path: it must not
// block or allocate.
type Warm func(e *Endpoint) (ready, held bool)

// NewWarmPicker is NewPicker for a loop whose pools warm describes (nil:
// none). Peak EWMA then prefers, between candidates of near latency, an
// endpoint with a stream ready over one whose connections are all busy, so
// the loop reuses the connections it has before it opens more
// (peakewma.go). An endpoint that holds no connection at all is neutral:
// it is compared as without the rule, so a dead or black-holed endpoint,
// whose connections are gone, is still tried and seen to fail (outlier
// ejection).
func (o *Origin) NewWarmPicker(subset []string, warm Warm) *Picker {
	p := &Picker{origin: o, rand: rng.New(o.rand.Uint64()), warm: warm}
	o.mu.Lock()
	defer o.mu.Unlock()
	p.subset = slices.Clone(subset)
	o.pickers = append(o.pickers, p)
	p.snap.Store(o.buildLocked(p))
	return p
}

// SetSubset replaces the loop's subset.
func (p *Picker) SetSubset(subset []string) {
	o := p.origin
	o.mu.Lock()
	defer o.mu.Unlock()
	p.subset = slices.Clone(subset)
	if slices.Contains(o.pickers, p) {
		p.snap.Store(o.buildLocked(p))
	}
}

// Close detaches the picker from its origin; later Picks fail with
// ErrNoHealthy.
func (p *Picker) Close() {
	o := p.origin
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pickers = slices.DeleteFunc(o.pickers, func(q *Picker) bool { return q == p })
	p.snap.Store(&snapshot{})
}

// Pick chooses an endpoint and counts the request as active on it. Every
// successful Pick must be followed by exactly one Done on the endpoint
// (Done with Shed when the request never reaches it). Pick fails with
// ErrNoHealthy only when the origin has no endpoint the loop may use: while
// any endpoint of the origin is healthy it always returns one.
func (p *Picker) Pick() (*Endpoint, error) {
	s := p.snap.Load()
	g := s.group(p.rand)
	if len(g.entries) == 0 {
		return nil, ErrNoHealthy
	}
	var now int64
	if s.clock {
		now = p.origin.nowNs()
	}
	e := s.choose.choose(g, now, p.rand, workScale)
	ep, _ := p.place(s, e, workScale, now, false)
	return ep, nil
}

// group draws the group a pick chooses in: the down-weighted zone's for
// probeFrac of picks, else the local or the remote one by localFrac.
func (s *snapshot) group(r *rng.Source) *group {
	if s.probeFrac > 0 && r.Float64() < s.probeFrac {
		return &s.groups[2]
	}
	if s.split && r.Float64() >= s.localFrac {
		return &s.groups[1]
	}
	return &s.groups[0]
}

// Candidates returns the addresses the picker chooses among now, for the
// admin API and tests.
func (p *Picker) Candidates() []string {
	s := p.snap.Load()
	var out []string
	for i := range s.groups {
		for j := range s.groups[i].entries {
			out = append(out, s.groups[i].entries[j].ep.addr)
		}
	}
	return out
}

// buildLocked computes p's snapshot from the origin's state:
//
//   - members: the subset's endpoints (every endpoint for an empty subset,
//     or for a sticky policy, whose key order spans the whole origin);
//   - in panic: all members, ejected ones included;
//   - otherwise the members that are not ejected, and when none is left,
//     every endpoint of the origin that is not ejected (the fallback);
//   - the zone PenalizeZone names, when other candidates remain, set
//     apart: it gets PenaltyFactor of its share of the weight;
//   - zone-split into local and remote when zone routing applies (never
//     for a sticky policy) and both sides have candidates.
func (o *Origin) buildLocked(p *Picker) *snapshot {
	members := o.list
	t := o.t()
	sticky := t.cfg.Policy.Sticky()
	if len(p.subset) > 0 && !sticky {
		members = make([]*Endpoint, 0, len(p.subset))
		for _, a := range p.subset {
			if e := o.byAddr[a]; e != nil {
				members = append(members, e)
			}
		}
	}
	cands := members
	if o.panic {
		if len(cands) == 0 {
			cands = o.list
		}
	} else {
		cands = inService(members)
		if len(cands) == 0 {
			cands = inService(o.list)
		}
	}
	var probe []*Endpoint
	if o.penalized != "" && !o.panic {
		if keep, pen := byZone(cands, o.penalized); len(keep) > 0 && len(pen) > 0 {
			cands, probe = keep, pen
		}
	}
	now := o.nowNs()
	s := &snapshot{choose: t.policy, count: t.cfg.Zone.Local != "" && !sticky, clock: t.peakEWMA || t.leastWork, timed: t.leastWork}
	var local, remote []*Endpoint
	if o.zoned && !o.panic && !sticky {
		for _, e := range cands {
			if e.zone == o.t().cfg.Zone.Local {
				local = append(local, e)
			} else {
				remote = append(remote, e)
			}
		}
	}
	if len(local) > 0 && len(remote) > 0 {
		s.split, s.localFrac = true, o.localFrac
		o.fillLocked(&s.groups[0], local, now, p.rand)
		o.fillLocked(&s.groups[1], remote, now, p.rand)
	} else {
		o.fillLocked(&s.groups[0], cands, now, p.rand)
	}
	if len(probe) > 0 {
		o.fillLocked(&s.groups[2], probe, now, p.rand)
		all := s.groups[0].sumWeight + s.groups[1].sumWeight + s.groups[2].sumWeight
		s.probeFrac = PenaltyFactor * s.groups[2].sumWeight / all
	}
	for i := range s.groups {
		s.clock = s.clock || s.groups[i].slowUntil != warm
		s.groups[i].warm = p.warm
	}
	if sticky && o.tab != nil {
		s.keyed = o.keyedLocked(&s.groups[0])
	}
	return s
}

// byZone splits eps into those outside zone and those in it.
func byZone(eps []*Endpoint, zone string) (out, in []*Endpoint) {
	for _, e := range eps {
		if e.zone == zone {
			in = append(in, e)
		} else {
			out = append(out, e)
		}
	}
	return out, in
}

// inService returns the endpoints of eps that are not ejected.
func inService(eps []*Endpoint) []*Endpoint {
	out := make([]*Endpoint, 0, len(eps))
	for _, e := range eps {
		if e.state.Load() != ejected {
			out = append(out, e)
		}
	}
	return out
}

func (o *Origin) fillLocked(g *group, eps []*Endpoint, now int64, r *rng.Source) {
	g.prm = &o.t().prm
	g.entries = make([]entry, len(eps))
	g.equal = true
	g.slowUntil = warm
	for i, ep := range eps {
		e := &g.entries[i]
		e.ep, e.weight, e.local = ep, float64(ep.weight), o.t().cfg.Zone.Local != "" && ep.zone == o.t().cfg.Zone.Local
		e.from = warm
		if at := o.t().prm.warmAt(ep.from); at > now {
			e.from = ep.from
			g.slowUntil = max(g.slowUntil, at)
		}
		g.equal = g.equal && e.weight == g.entries[0].weight
		g.maxWeight = max(g.maxWeight, e.weight)
		g.sumWeight += e.weight
		e.deadline.Store(f64bits(1 / g.weight(e, now)))
	}
	if len(eps) > 0 {
		g.next.Store(uint64(r.IntN(len(eps))))
	}
}
