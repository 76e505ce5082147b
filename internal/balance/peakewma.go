package balance

import "github.com/corput/corput/internal/rng"

// peakEWMA is the default policy, LB-PAY-001's "Weighted Least Request
// with Peak EWMA" (MC-BN-01: score = active/weight × EWMA latency): of
// Choices distinct random candidates, the one with the least
//
//	ewma × (active+1) / effective weight
//
// where ewma is the endpoint's peak-sensitive latency estimate (see
// latencyEstimate). A 5×-slow endpoint is avoided until its estimate
// decays; then one request probes it, and it comes back as soon as it
// answers fast.
//
// Latency that differs only by noise does not steer: when two candidates'
// mean latencies (meanEstimate) are within TieRatio of each other, the
// one with the fewer requests in flight per weight wins, as least request
// would pick. Without the rule, identical endpoints drift apart: one slow
// sample lifts an endpoint's peak estimate for seconds, it gets less
// traffic meanwhile, and 800 identical endpoints spread from 0.46× to
// 1.53× the mean (docs/balancing.md).
//
// With two choices the first candidate is the loop's next endpoint in
// rotation and the second a random other one, and a tie keeps the first:
// where nothing tells the endpoints apart, the picks follow the rotation,
// which spreads them evenly over a subset; random pairs would leave each
// endpoint's count the spread of a random draw (±25 % over 800 endpoints
// at 150 requests each).
type peakEWMA struct{}

func (peakEWMA) choose(g *group, now int64, r *rng.Source, _ int64) *entry {
	es := g.entries
	if n := len(es); g.prm.choices == 2 && n > 2 {
		i := int((g.next.Add(1) - 1) % uint64(n))
		j := r.IntN(n - 1)
		if j >= i {
			j++
		}
		a, b := &es[i], &es[j]
		if ewmaBetter(g, b, a, now) {
			a = b
		}
		return warmer(g, a, now, r)
	}
	return warmer(g, bestBy(g, g.prm.choices, now, r, ewmaBetter), now, r)
}

// warmScan bounds how many more entries warmer looks at.
const warmScan = 8

// warmer returns c, or when c's connections on the loop are all busy
// (NewWarmPicker) and so a request there would dial or wait, the first of
// up to warmScan other entries, from a random one on, that has a stream
// ready, is warmComparable with c and beats c by ewmaBetter (its load
// within warmSlack of c's when they tie). An endpoint holding no
// connection at all is neutral: it is kept, so a dead one is still tried.
// It runs only on that busy path: a loop dials only when none of the
// endpoints it looked at that are about as fast as its choice could take
// the request at once. With it a loop's HTTP/1.1 pools hold about the loop's
// peak concurrency, not the sum of every endpoint's own peak.
func warmer(g *group, c *entry, now int64, r *rng.Source) *entry {
	if g.warm == nil {
		return c
	}
	if ready, held := g.warm(c.ep); ready || !held {
		return c
	}
	es := g.entries
	n := len(es)
	k := r.IntN(n)
	for range min(n, warmScan) {
		if e := &es[k]; e != c && warmComparable(e, c) && ewmaBetter(g, e, c, now) {
			if ready, _ := g.warm(e.ep); ready {
				return e
			}
		}
		if k++; k == n {
			k = 0
		}
	}
	return c
}

// ewmaBetter reports whether a is the better of candidates a and b: by
// load when their mean latencies tie (tied), else by ewmaCost. A
// candidate with a stream ready on the loop (NewWarmPicker) beats one
// whose connections are all busy when their mean latencies are near
// (within warmNear) and, if they tie, its load is at most warmSlack times
// the other's. A candidate that holds no connection at all, or that is
// not warmComparable with the other, is neutral: the pair is compared as
// without the rule.
func ewmaBetter(g *group, a, b *entry, now int64) bool {
	var wa, wb bool
	if g.warm != nil && warmComparable(a, b) {
		ra, ha := g.warm(a.ep)
		rb, hb := g.warm(b.ep)
		if ha && hb {
			wa, wb = ra, rb
		}
	}
	if !tied(g, a, b) {
		if wa != wb {
			return wa
		}
		return ewmaCost(g, a, now) < ewmaCost(g, b, now)
	}
	return warmLess(loadCost(g, a, now), loadCost(g, b, now), wa, wb)
}

// tied reports whether a's and b's mean latencies are within the tie
// ratio of each other: the difference is noise, not a slower endpoint.
func tied(g *group, a, b *entry) bool { return near(a, b, g.prm.tie) }

// near reports whether a's and b's mean latencies are within ratio of
// each other (false while either has none).
func near(a, b *entry, ratio float64) bool {
	ma, mb := a.ep.mean.load(), b.ep.mean.load()
	return ma < ratio*mb && mb < ratio*ma
}

// warmComparable reports whether the warm rule may decide between a and
// b: each has answered at least once, and their mean latencies are within
// warmNear of each other. An endpoint that has never answered — a black
// hole that accepts connections and holds every request — is left to the
// rules without it, which keep sending it requests until their timeouts
// eject it (internal/drill TestBlackhole); with the rule its hung
// connections, all busy, would keep it from being tried.
func warmComparable(a, b *entry) bool {
	ma, na := a.ep.mean.loadN()
	mb, nb := b.ep.mean.loadN()
	return na > 0 && nb > 0 && ma < warmNear*mb && mb < warmNear*ma
}

// warmNear is how far apart two candidates' mean latencies may be for a
// connection ready on the loop to decide between them: wider than the
// tie ratio (1.5), because a short request's mean moves with the
// scheduler's noise (a 1 ms request measured at 2 ms), and far below a
// degraded endpoint's 5×, which is still avoided
// (TestTieRuleStillAvoidsASlowEndpoint).
const warmNear = 2

// warmSlack is how much more loaded ((active+1)/weight) a latency-tied
// candidate with a connection ready on the loop may be and still win over
// one without: the request then reuses a connection instead of dialling
// one.
const warmSlack = 2

func ewmaCost(g *group, e *entry, now int64) float64 {
	return e.ep.rtt.at(now, g.prm.tauMs) * float64(e.ep.active.Load()+1) / g.weight(e, now)
}
