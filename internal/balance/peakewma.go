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
		if a, b := &es[i], &es[j]; !ewmaBetter(g, b, a, now) {
			return a
		} else {
			return b
		}
	}
	return bestBy(g, g.prm.choices, now, r, ewmaBetter)
}

// ewmaBetter reports whether a is the better of candidates a and b.
func ewmaBetter(g *group, a, b *entry, now int64) bool {
	if ma, mb, tie := a.ep.mean.load(), b.ep.mean.load(), g.prm.tie; ma < tie*mb && mb < tie*ma {
		return loadCost(g, a, now) < loadCost(g, b, now)
	}
	return ewmaCost(g, a, now) < ewmaCost(g, b, now)
}

func ewmaCost(g *group, e *entry, now int64) float64 {
	return e.ep.rtt.at(now, g.prm.tauMs) * float64(e.ep.active.Load()+1) / g.weight(e, now)
}
