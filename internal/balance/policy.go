package balance

import (
	"math"

	"github.com/corput/corput/internal/rng"
)

// chooser is one policy: it returns an entry of a non-empty group. It runs
// on the request path: no locks, no allocation, no blocking. now is the
// time in ns since the origin's epoch when the snapshot needs it, else 0.
// units is the request's cost in work units (workScale for a request of
// no known class); only least_work reads it.
type chooser interface {
	choose(g *group, now int64, r *rng.Source, units int64) *entry
}

func newChooser(p Policy) chooser {
	switch p {
	case RoundRobin:
		return roundRobin{}
	case Random:
		return random{}
	case P2C:
		return p2c{}
	case LeastRequest:
		return leastRequest{}
	case LeastWork:
		return leastWork{}
	default:
		return peakEWMA{}
	}
}

// costFn ranks an entry for the sampling policies; lower is better.
type costFn func(g *group, e *entry, now int64) float64

// loadCost is in-flight requests (counting this one) per unit of
// effective weight.
func loadCost(g *group, e *entry, now int64) float64 {
	return float64(e.ep.active.Load()+1) / g.weight(e, now)
}

// bestOf samples k distinct entries uniformly at random and returns the one
// of least cost. Among equal costs it keeps the one sampled first, which is
// itself a uniformly random choice, so ties cost no extra draw.
func bestOf(g *group, k int, now int64, r *rng.Source, cost costFn) *entry {
	return bestBy(g, k, now, r, func(g *group, a, b *entry, now int64) bool { return cost(g, a, now) < cost(g, b, now) })
}

// betterFn reports whether candidate a is strictly better than b.
type betterFn func(g *group, a, b *entry, now int64) bool

// bestBy samples k distinct entries uniformly at random and returns the
// best by better, keeping the one sampled first among equals.
func bestBy(g *group, k int, now int64, r *rng.Source, better betterFn) *entry {
	es := g.entries
	n := len(es)
	switch {
	case n == 1:
		return &es[0]
	case k == 2 || n == 2:
		i := r.IntN(n)
		j := r.IntN(n - 1)
		if j >= i {
			j++
		}
		a, b := &es[i], &es[j]
		if better(g, b, a, now) {
			return b
		}
		return a
	}
	var idx [maxChoices]int
	m := sampleDistinct(n, min(k, n), r, &idx)
	best := &es[idx[0]]
	for _, i := range idx[1:m] {
		if better(g, &es[i], best, now) {
			best = &es[i]
		}
	}
	return best
}

// sampleDistinct writes m ≤ maxChoices distinct indices of [0, n), in
// uniformly random order, to idx and returns m.
func sampleDistinct(n, m int, r *rng.Source, idx *[maxChoices]int) int {
	if n <= maxChoices {
		// Partial Fisher–Yates over the whole range.
		for i := range n {
			idx[i] = i
		}
		for i := range m {
			j := i + r.IntN(n-i)
			idx[i], idx[j] = idx[j], idx[i]
		}
		return m
	}
	// n > maxChoices ≥ m: rejection keeps the expected draws below 2m.
	for i := 0; i < m; {
		v := r.IntN(n)
		dup := false
		for _, u := range idx[:i] {
			dup = dup || u == v
		}
		if !dup {
			idx[i] = v
			i++
		}
	}
	return m
}

// stepFn is how far an EDF pick pushes the picked entry's deadline: the
// inverse of its weight at this instant.
type stepFn func(g *group, e *entry, now int64) float64

// edf picks the entry with the earliest virtual deadline and advances it by
// step (earliest deadline first, as Envoy's weighted pickers do). With
// constant weights w_i every window of Σw consecutive picks from a fresh
// snapshot picks entry i exactly w_i times. Deadlines are atomics: racing
// pickers retry a few times, then take the entry they found, so Pick never
// spins. The scan is O(n); subsets are small (25–50).
func edf(g *group, now int64, step stepFn) *entry {
	es := g.entries
	for try := 0; ; try++ {
		best := 0
		bits := es[0].deadline.Load()
		bd := math.Float64frombits(bits)
		for i := 1; i < len(es); i++ {
			b := es[i].deadline.Load()
			if d := math.Float64frombits(b); d < bd {
				best, bits, bd = i, b, d
			}
		}
		e := &es[best]
		if e.deadline.CompareAndSwap(bits, f64bits(bd+step(g, e, now))) || try == 3 {
			return e
		}
	}
}

func f64bits(f float64) uint64 { return math.Float64bits(f) }
