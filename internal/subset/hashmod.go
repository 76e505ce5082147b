package subset

// HashMod is the naive deterministic scheme: endpoint at sorted position p
// joins subset p mod S, frontend f uses subset f mod S. Perfectly balanced,
// and maximally unstable: one endpoint added or removed shifts every endpoint
// sorted after it into another subset.
var HashMod Algorithm = comparatorAlgorithm{name: NameHashMod, assign: assignHashMod}

func assignHashMod(c *comparator) [][]string {
	subsets := make([][]string, c.subsets)
	for p, a := range c.sorted {
		subsets[p%c.subsets] = append(subsets[p%c.subsets], a)
	}
	return c.shared(subsets)
}
