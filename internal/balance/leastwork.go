package balance

import (
	"math/bits"

	"github.com/corput/corput/internal/rng"
)

// leastWork is cost-aware least request: of its candidates,
// the one where this request is expected to finish first,
//
//		slowness × (work in flight / capacity + cost of this request)
//
//	  - work in flight is the sum of the costs of the requests picked for the
//	    endpoint and not yet done (cost 1 is a request of the lightest class,
//	    or of no known class), so a heavy request loads an endpoint by its
//	    cost and not as one request;
//	  - slowness is the endpoint's latency per unit of cost: the moving
//	    average of latency ÷ the request's cost (about the last 64 answers;
//	    decayed by exp(−idle/ewma_decay) while none comes, so a slow
//	    endpoint is tried again), so a heavy request does not make an
//	    endpoint look slow — or, when it is higher, the queue signal (the age
//	    of the work in flight per unit of its cost, Endpoint.queue), which
//	    rises as soon as requests wait at the endpoint, before any answer
//	    shows it. There is no peak: a light request that waited 30 ms reads
//	    as 3× slow per unit of cost, and a peak would keep that for seconds;
//	    the queue signal is the quick reaction instead;
//	  - capacity is the endpoint's learned concurrency limit (Endpoint.learn:
//	    the requests in flight at which its latency starts to rise; a newcomer
//	    starts from its peers' median) times its slow-start factor.
//
// Candidates: with choices 2, the loop's next endpoint in rotation and a
// random other one (as peak_ewma); a request of cost c > 1 samples
// ⌈log2 c⌉ more distinct random endpoints (a heavy one of 9.33, six): its
// misplacement costs c times more, and two candidates that are both slow
// leave it no good choice.
//
// Slow start also bounds what an endpoint in slow start holds, by requests
// and by work: once this request would take it above factor × the
// concurrency limit it entered slow start with (its peers' median for a
// newcomer; Endpoint.rampCap), or above factor × its fair share (by
// weight) of the work in flight at the loop's candidates, it is not a
// candidate: a random other entry is drawn in its place (redraw), or it
// loses to any candidate that is not bounded. It always may hold one
// request. The count is what a cold origin's workers bound: the work
// bound alone let a newcomer take many light requests within a share that
// its peers' heavy ones set, and reach its peers' limit, all its workers,
// by 28 s of a 60 s window (bench/peers' cold join: 8 in service, 2 or 3
// waiting); the count bound holds it to factor × 8, 4 at 30 s, as
// HAProxy's slowstart ramps a server's maxconn.
//
// The tie rule of peak_ewma applies: two candidates whose mean latencies
// per unit of cost are within tie_ratio of each other (an endpoint whose
// mean has averaged fewer than trustSamples answers ties on latency with
// any other: before, its mean is its seed — default_rtt when every endpoint
// joined at once, and unmeasured endpoints 2× above measured ones got
// nothing for the first 5 s of the spread run — or its first answers'
// noise), neither with a queue
// signal above tie_ratio × its mean, are compared by load alone: (work in
// flight + this request's cost) ÷ (weight × slow-start factor), as least
// request compares (active + 1) ÷ weight; the first candidate wins a tie, so that identical
// endpoints follow the rotation and share evenly. The tie does not divide
// by the learned concurrency limit: endpoints whose latencies tie show no
// sign of being past their limits, and a limit learned by an endpoint whose
// latency never rose is only the most requests it happened to hold —
// identical endpoints hold limits of 1 and 2 by chance, and dividing by
// them drew the requests to the ones at 2 (0.89–1.17× the mean over 400
// identical endpoints, against 0.89–1.14× without).
type leastWork struct{}

func (leastWork) choose(g *group, now int64, r *rng.Source, units int64) *entry {
	es := g.entries
	n := len(es)
	if n == 1 {
		return &es[0]
	}
	w := workPick{g: g, now: now, units: units, cost: float64(units) / workScale, total: -1}
	k := g.prm.choices
	if units > workScale {
		// One more candidate per doubling of the cost: a heavy request
		// misplaced costs its cost × the slowness, so it is worth looking
		// at more endpoints (9.33 → 6 candidates).
		k += bits.Len64(uint64((units - 1) / workScale))
	}
	if k == 2 || n == 2 {
		i := int((g.next.Add(1) - 1) % uint64(n))
		j := r.IntN(n - 1)
		if j >= i {
			j++
		}
		a, b := w.view(&es[i]), w.view(&es[j])
		if a.bounded && !b.bounded {
			a = w.redraw(a, j, r)
		} else if b.bounded && !a.bounded {
			b = w.redraw(b, i, r)
		}
		if w.better(&b, &a) {
			a = b
		}
		return w.warmer(&a)
	}
	var idx [maxChoices]int
	m := sampleDistinct(n, min(k, n, maxChoices), r, &idx)
	best := w.view(&es[idx[0]])
	for _, k := range idx[1:m] {
		if v := w.view(&es[k]); w.better(&v, &best) {
			best = v
		}
	}
	return w.warmer(&best)
}

// warmer is least_work's warm pick (docs/decisions.md, "Preferring an
// endpoint with a connection ready"), as peak_ewma's warmer:
// c's entry, or when c's connections on the loop are all busy
// (NewWarmPicker), so that a request there would dial or wait, the first
// of the rotation's next warmScan entries that has a stream ready and
// beats c by better (warm against busy). It runs only on that busy path,
// so a loop dials only when none of the endpoints it looked at that are
// about as good as its choice could take the request at once.
func (w *workPick) warmer(c *candidate) *entry {
	if w.g.warm == nil || c.warmth(w.g) != busy {
		return c.e
	}
	es := w.g.entries
	n := uint64(len(es))
	next := w.g.next.Load()
	for d := range min(n, warmScan) {
		// The rotation's next entries, without taking their turns
		// (random stand-ins spread the picks as a random draw does:
		// 0.89–1.21× the mean over the lab's 400 endpoints; taking the
		// turns of those looked at, 0.84–1.14×): the first that is
		// ready stands in; it takes its own turn when it is the next.
		if e := &es[(next+d)%n]; e != c.e {
			if v := w.view(e); !v.bounded && v.warmth(w.g) == ready && w.better(&v, c) {
				if d == 0 {
					w.g.next.CompareAndSwap(next, next+1)
				}
				return e
			}
		}
	}
	return c.e
}

// redrawTries is how many random entries a pick draws in place of a
// candidate at its slow-start share, looking for one that is not.
const redrawTries = 3

// redraw replaces c, a candidate at its slow-start share of the work in
// flight, by a random other entry that is not (nor the other candidate,
// at index other), so that the pick still compares two endpoints: without
// it, the bound would hand the request to the other candidate whatever it
// is — a 5× slow endpoint would get the heavy requests the newcomer may
// not take. c stays when no such entry turns up in redrawTries draws.
func (w *workPick) redraw(c candidate, other int, r *rng.Source) candidate {
	es := w.g.entries
	for range redrawTries {
		k := r.IntN(len(es))
		if k == other || &es[k] == c.e {
			continue
		}
		if v := w.view(&es[k]); !v.bounded {
			return v
		}
	}
	return c
}

// workPick is one least_work pick: the group, the instant, the request's
// cost, and the group's total work in flight once a slow-start candidate
// needed it.
type workPick struct {
	g     *group
	now   int64
	units int64
	cost  float64
	total int64 // work units in flight at the group's endpoints; -1: not summed yet
}

// candidate is what a least_work pick reads of one entry, once.
type candidate struct {
	e       *entry
	work    float64 // work in flight, in units of cost
	cap     float64 // capacity: the concurrency limit × the slow-start factor
	wcap    float64 // weight × the slow-start factor: what the tie rule divides by
	mean    float64 // mean latency per unit of cost, ns
	queue   float64 // the queue signal, ns per unit of cost
	bounded bool    // in slow start and at its share of the work in flight
	// measured: the mean is the endpoint's own, averaged over at least
	// trustSamples answers, not its seed or its first answers' noise.
	measured bool
	answered bool   // the endpoint has answered at least once
	warm     warmth // what the loop's pools hold for it; read once, when a rule needs it
}

// warmth is what a loop's pools hold for an endpoint (Warm): unread
// (not asked yet), ready (a free stream), busy (connections open or
// dialling, none free) or empty (nothing open or dialling).
type warmth uint8

const (
	unread warmth = iota
	ready
	busy
	empty
)

// warmth reads (once) what g's loop holds for c's endpoint.
func (c *candidate) warmth(g *group) warmth {
	if c.warm == unread {
		switch r, h := g.warm(c.e.ep); {
		case r:
			c.warm = ready
		case h:
			c.warm = busy
		default:
			c.warm = empty
		}
	}
	return c.warm
}

func (w *workPick) view(e *entry) candidate {
	ep := e.ep
	units := ep.work.Load()
	factor := 1.0
	slow := e.from != warm && w.now < e.from+w.g.prm.window
	if slow {
		factor = w.g.weight(e, w.now) / e.weight
	}
	mean, n := ep.speed.loadN()
	c := candidate{e: e, mean: mean, measured: n >= trustSamples, answered: n > 0}
	c.work, c.cap, c.wcap = float64(units)/workScale, ep.limitNow()*factor, e.weight*factor
	if units > 0 {
		c.queue = ep.queue(w.now, units)
		if slow {
			c.bounded = float64(ep.active.Load()+1) > ep.rampCap(factor) || w.overShare(e, units, factor)
		}
	}
	return c
}

// overShare reports whether a request of w.units more would take e's
// work above factor × its fair share of the group's work in flight.
func (w *workPick) overShare(e *entry, units int64, factor float64) bool {
	if w.total < 0 {
		w.total = 0
		for i := range w.g.entries {
			w.total += w.g.entries[i].ep.work.Load()
		}
	}
	fair := float64(w.total+w.units) * e.weight / w.g.sumWeight
	return float64(units+w.units) > factor*fair
}

// better reports whether candidate a is strictly better than b.
func (w *workPick) better(a, b *candidate) bool {
	if a.bounded != b.bounded {
		return b.bounded
	}
	wa, wb, near := w.warmPair(a, b)
	tie := w.g.prm.tie
	ma, mb := a.mean, b.mean
	if !a.measured {
		ma = mb
	} else if !b.measured {
		mb = ma
	}
	if ma < tie*mb && mb < tie*ma && a.queue <= tie*a.mean && b.queue <= tie*b.mean {
		// (work + cost) ÷ wcap, compared without dividing.
		return warmLess((a.work+w.cost)*b.wcap, (b.work+w.cost)*a.wcap, wa, wb)
	}
	if near {
		switch {
		case wa && !wb && a.queue <= tie*a.mean:
			return true
		case wb && !wa && b.queue <= tie*b.mean:
			return false
		}
	}
	return warmLess(w.score(a), w.score(b), wa, wb)
}

// warmLess compares a's figure xa with b's xb, lower better: a candidate
// with a stream ready (wa) against one without (wb false) wins while its
// figure is within warmSlack of the other's.
func warmLess(xa, xb float64, wa, wb bool) bool {
	switch {
	case wa && !wb:
		return xa <= warmSlack*xb
	case wb && !wa:
		return xa*warmSlack < xb
	}
	return xa < xb
}

// warmPair is the warm rule's reading of a pair (NewWarmPicker): whether
// each has a stream ready on the loop, when the rule may weigh it — each
// has answered, their latencies per unit of cost are within warmFar, and
// each holds a connection — and whether they are near (within warmNear).
// Otherwise both are false and the pair is compared as without the rule:
// an empty endpoint, and one that has never answered (a black hole that
// accepts and holds every request), keep getting their share until their
// timeouts eject them (internal/drill TestCrash, TestBlackhole).
//
// better weighs it so: where latency ties and no queue signal rises, the
// ready one wins unless its load is over warmSlack × the other's (the
// endpoints show no sign of being past their limits, so the extra load
// costs the request nothing, and reusing a connection saves a dial);
// where they are near but do not tie, the ready one wins outright unless
// its own requests are queueing; where they are farther apart, it wins
// while its completion score is within warmSlack of the other's. A heavy
// request is not sent where it would finish far later for the sake of a
// dial.
func (w *workPick) warmPair(a, b *candidate) (wa, wb, near bool) {
	if w.g.warm == nil || !a.answered || !b.answered ||
		a.mean >= warmFar*b.mean || b.mean >= warmFar*a.mean {
		return false, false, false
	}
	ta, tb := a.warmth(w.g), b.warmth(w.g)
	if ta == empty || tb == empty {
		return false, false, false
	}
	return ta == ready, tb == ready, a.mean < warmNear*b.mean && b.mean < warmNear*a.mean
}

// warmFar is how far apart least_work's two candidates' latencies per
// unit of cost may be for the warm rule to weigh a ready connection at
// all: beyond warmNear (2×) it only lets the ready one's completion score
// be up to warmSlack × the other's. Identical endpoints' means sit 2–4×
// apart on a loaded machine (a 1 ms request's mean includes its wait for
// a stream), and within 2× alone the rule found no stand-in for most busy
// choices (bench/peers raw: of 3 649 busy choices, 2 721 candidates
// looked at were "far"); a degraded endpoint (5×) is past it
// (TestTieRuleStillAvoidsASlowEndpoint).
const warmFar = 4

// score is the candidate's expected completion of this request, ns.
func (w *workPick) score(c *candidate) float64 {
	slowness := max(c.mean*decay(msOf(w.now), uint32(c.e.ep.seen.Load()), w.g.prm.tauMs), c.queue)
	return slowness * (c.work/c.cap + w.cost)
}

// trustSamples is how many answers an endpoint's mean latency per unit of
// cost must average before it can break a tie: a mean of fewer is mostly
// its first samples' noise (one slow answer out of a stalled process), and
// an endpoint whose first answer was slow was compared by that one sample,
// lost, got no second one, and waited for the decay.
const trustSamples = meanWindow / 4
