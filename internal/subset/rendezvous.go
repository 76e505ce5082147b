package subset

import "github.com/corput/corput/internal/rng"

// Rendezvous is gRPC A68 random subsetting: every frontend hashes each
// endpoint with its own seed and keeps the k smallest hashes. One endpoint
// added or removed changes at most one member of any frontend's subset, but
// nothing evens out how many frontends pick a given endpoint.
var Rendezvous Algorithm = comparatorAlgorithm{name: NameRendezvous, assign: assignRendezvous}

// keyed is an endpoint (by sorted position) with a frontend's hash of it.
type keyed struct {
	key uint64
	pos int
}

func assignRendezvous(c *comparator) [][]string {
	h := make([]uint64, len(c.sorted))
	for i, a := range c.sorted {
		h[i] = hashString(a)
	}
	out := make([][]string, c.fleet.Frontends())
	scratch := make([]keyed, len(h))
	for f := range out {
		seed := c.frontendSeed(f)
		for i := range h {
			scratch[i] = keyed{key: rng.Mix64(seed ^ h[i]), pos: i}
		}
		selectSmallest(scratch, c.k)
		members := make([]string, c.k)
		for i := range members {
			members[i] = c.sorted[scratch[i].pos]
		}
		out[f] = members
	}
	return out
}

// selectSmallest reorders s so that its k smallest keys come first, in no
// particular order (quickselect; keys are hashes, so the middle element is a
// fine pivot).
func selectSmallest(s []keyed, k int) {
	lo, hi := 0, len(s)
	for hi-lo > 1 {
		pivot := s[lo+(hi-lo)/2].key
		// Three-way partition: [lo, lt) < pivot, [lt, gt) == pivot, [gt, hi) > pivot.
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch {
			case s[i].key < pivot:
				s[lt], s[i] = s[i], s[lt]
				lt++
				i++
			case s[i].key > pivot:
				gt--
				s[gt], s[i] = s[i], s[gt]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k > gt:
			lo = gt
		default:
			return
		}
	}
}
