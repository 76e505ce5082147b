package subset

import "github.com/corput/corput/internal/rng"

// SRE is the deterministic subsetting of the SRE book (ch. 20): with
// subset_count = N/k, frontend f belongs to round f/subset_count; each round
// shuffles the sorted endpoints with its own seed and cuts them into
// subset_count subsets of k, dealing the N mod k leftovers round-robin so
// every endpoint serves every round; frontend f takes subset f mod
// subset_count of its round. Balanced, but any membership change reshuffles
// every round.
var SRE Algorithm = comparatorAlgorithm{name: NameSRE, assign: assignSRE}

func assignSRE(c *comparator) [][]string {
	n := len(c.sorted)
	count := max(1, n/max(1, c.k))
	out := make([][]string, c.fleet.Frontends())
	var subsets [][]string
	for f := range out {
		round, id := f/count, f%count
		if id == 0 {
			subsets = sreRound(c, round, count)
		}
		out[f] = subsets[id]
	}
	return out
}

// sreRound deals one round's shuffled endpoints into count subsets.
func sreRound(c *comparator, round, count int) [][]string {
	order := append([]string(nil), c.sorted...)
	shuffle(order, rng.New(rng.Mix64(c.seed^uint64(round))))
	subsets := make([][]string, count)
	k := len(order) / count
	for id := range subsets {
		subsets[id] = order[id*k : (id+1)*k : (id+1)*k]
	}
	for m, a := range order[count*k:] {
		subsets[m%count] = append(subsets[m%count], a)
	}
	return subsets
}
