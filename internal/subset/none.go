package subset

import "slices"

// None does not subset: every frontend uses every endpoint. It is config's
// subset.algorithm: none, and the baseline that subsetting is measured
// against (F·N pools); Compare does not rank it.
var None Algorithm = comparatorAlgorithm{name: NameNone, assign: assignNone}

func assignNone(c *comparator) [][]string {
	out := make([][]string, c.fleet.Frontends())
	all := slices.Clip(slices.Clone(c.sorted)) // c.sorted changes in place on Add
	for f := range out {
		out[f] = all
	}
	return out
}
