package balance

import (
	"math"

	"github.com/corput/corput/internal/rng"
)

// leastRequest is Envoy's weighted least request: with equal effective
// weights it is p2c on in-flight requests; with unequal ones it is EDF where
// an entry's weight at each pick is weight / (active+1)^bias.
type leastRequest struct{}

func (leastRequest) choose(g *group, now int64, r *rng.Source, _ int64) *entry {
	if g.uniform(now) {
		return bestOf(g, g.prm.choices, now, r, loadCost)
	}
	return edf(g, now, lrStep)
}

// lrStep is the inverse of weight / (active+1)^bias.
func lrStep(g *group, e *entry, now int64) float64 {
	a := float64(e.ep.active.Load() + 1)
	switch g.prm.bias {
	case 0:
		a = 1
	case 1:
	default:
		a = math.Pow(a, g.prm.bias)
	}
	return a / g.weight(e, now)
}
