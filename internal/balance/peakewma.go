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

// warmer returns c, or when c has no connection ready on the loop
// (Picker.SetWarm) and so would dial or wait, the first of up to warmScan
// other entries, from a random one on, that has one and beats c by
// ewmaBetter (its mean latency near c's, its load within warmSlack of
// c's when they tie).
// It runs only on that cold path: a loop dials only when none of the
// endpoints it looked at that are about as fast as its choice could take
// the request at once. With it a loop's HTTP/1.1 pools hold about the loop's
// peak concurrency, not the sum of every endpoint's own peak.
func warmer(g *group, c *entry, now int64, r *rng.Source) *entry {
	if g.warm == nil || g.warm(c.ep) {
		return c
	}
	es := g.entries
	n := len(es)
	k := r.IntN(n)
	for range min(n, warmScan) {
		if e := &es[k]; e != c && g.warm(e.ep) && ewmaBetter(g, e, c, now) {
			return e
		}
		if k++; k == n {
			k = 0
		}
	}
	return c
}

// ewmaBetter reports whether a is the better of candidates a and b: by
// load when their mean latencies tie (tied), else by ewmaCost. A
// candidate with a connection ready on the loop (Picker.SetWarm) beats one
// without when their mean latencies are near (within warmNear) and, if
// they tie, its load is at most warmSlack times the other's.
func ewmaBetter(g *group, a, b *entry, now int64) bool {
	var wa, wb bool
	if g.warm != nil && near(a, b, warmNear) {
		wa, wb = g.warm(a.ep), g.warm(b.ep)
	}
	if !tied(g, a, b) {
		if wa != wb {
			return wa
		}
		return ewmaCost(g, a, now) < ewmaCost(g, b, now)
	}
	ca, cb := loadCost(g, a, now), loadCost(g, b, now)
	switch {
	case wa && !wb:
		return ca <= warmSlack*cb
	case wb && !wa:
		return ca*warmSlack < cb
	}
	return ca < cb
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
