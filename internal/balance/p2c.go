package balance

import "github.com/corput/corput/internal/rng"

// p2c is "power of two choices": of Choices distinct random candidates, the
// one with the fewest in-flight requests per unit of effective weight, so
// with equal weights it never picks the busier of two. Ties go to a random
// one of them.
type p2c struct{}

func (p2c) choose(g *group, now int64, r *rng.Source, _ int64) *entry {
	return bestOf(g, g.prm.choices, now, r, loadCost)
}
