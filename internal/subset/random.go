package subset

import "github.com/corput/corput/internal/rng"

// Random gives every frontend k endpoints drawn at random (seeded per
// frontend) from the sorted membership. Coverage is binomial, so some
// endpoints get far more frontends than others, and a membership change
// shifts the list under the same draws, so most choices change.
var Random Algorithm = comparatorAlgorithm{name: NameRandom, assign: assignRandom}

func assignRandom(c *comparator) [][]string {
	out := make([][]string, c.fleet.Frontends())
	perm := make([]string, len(c.sorted))
	for f := range out {
		copy(perm, c.sorted)
		src := rng.New(c.frontendSeed(f))
		// A partial Fisher–Yates: the first k places get k distinct
		// endpoints, uniformly.
		for i := 0; i < c.k; i++ {
			j := i + src.IntN(len(perm)-i)
			perm[i], perm[j] = perm[j], perm[i]
		}
		out[f] = append([]string(nil), perm[:c.k]...)
	}
	return out
}
