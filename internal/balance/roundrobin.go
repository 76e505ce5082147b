package balance

import "github.com/corput/corput/internal/rng"

// roundRobin is the rotation baseline. With equal effective weights it walks
// the candidates in order from a random start (one atomic add per pick);
// with unequal ones (configured weights, or slow start in progress) it is
// weighted round robin by EDF on 1/weight.
type roundRobin struct{}

func (roundRobin) choose(g *group, now int64, _ *rng.Source, _ int64) *entry {
	if g.uniform(now) {
		return &g.entries[(g.next.Add(1)-1)%uint64(len(g.entries))]
	}
	return edf(g, now, rrStep)
}

func rrStep(g *group, e *entry, now int64) float64 { return 1 / g.weight(e, now) }
