package balance

import "github.com/corput/corput/internal/rng"

// peakEWMA is the default policy, the seed's "Weighted Least Request with
// Peak EWMA" (MC-BN-01: score = active/weight × EWMA latency): of Choices
// distinct random candidates, the one with the least
//
//	ewma × (active+1) / effective weight
//
// where ewma is the endpoint's peak-sensitive latency estimate (see
// latencyEstimate). A 5×-slow endpoint is avoided until its estimate
// decays; then one request probes it, and it comes back as soon as it
// answers fast.
type peakEWMA struct{}

func (peakEWMA) choose(g *group, now int64, r *rng.Source) *entry {
	return bestOf(g, g.prm.choices, now, r, ewmaCost)
}

func ewmaCost(g *group, e *entry, now int64) float64 {
	return e.ep.rtt.at(now, g.prm.tauMs) * float64(e.ep.active.Load()+1) / g.weight(e, now)
}
