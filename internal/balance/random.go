package balance

import "github.com/corput/corput/internal/rng"

// random is the uniform-draw baseline. With unequal effective weights it
// draws in proportion to weight by rejection: a uniformly drawn candidate is
// kept with probability weight/maxWeight. The expected number of draws is
// maxWeight/meanWeight (10 when every candidate is at the 10 % slow-start
// floor); after maxDraws the last candidate drawn is taken.
type random struct{}

const maxDraws = 64

func (random) choose(g *group, now int64, r *rng.Source, _ int64) *entry {
	n := len(g.entries)
	if g.uniform(now) {
		return &g.entries[r.IntN(n)]
	}
	var e *entry
	for range maxDraws {
		e = &g.entries[r.IntN(n)]
		if r.Float64()*g.maxWeight < g.weight(e, now) {
			break
		}
	}
	return e
}
