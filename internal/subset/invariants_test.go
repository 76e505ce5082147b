package subset

import (
	"fmt"
	"math/bits"
	"testing"
)

// addr is the test address of endpoint number i.
func addr(i int) string { return fmt.Sprintf("10.%d.%d.%d:8080", byte(i>>16), byte(i>>8), byte(i)) }

func addrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = addr(i)
	}
	return out
}

// checkRing asserts every Ringsteady invariant of r and its snapshot: dense
// indices, a power-of-two S within its caps, each endpoint in exactly the one
// subset whose arc holds its position, subset sizes within one of each other.
func checkRing(t testing.TB, r *Ring) {
	t.Helper()
	n, S := r.Len(), r.Subsets()
	if len(r.index) != n {
		t.Fatalf("index has %d entries for %d endpoints", len(r.index), n)
	}
	for i, a := range r.addrs {
		if r.index[a] != i {
			t.Fatalf("index[%q] = %d, want %d", a, r.index[a], i)
		}
	}
	if S < 1 || S&(S-1) != 0 || S > max(1, n) || S > floorPow2(r.fleet.Frontends()) {
		t.Fatalf("S = %d for N = %d, F = %d", S, n, r.fleet.Frontends())
	}
	snap := r.Snapshot()
	if snap.Subsets() != S || snap.Len() != n {
		t.Fatalf("snapshot S = %d N = %d, ring S = %d N = %d", snap.Subsets(), snap.Len(), S, n)
	}
	seen := make(map[string]int, n)
	lo, hi := n, 0
	for j := range S {
		members := snap.Subset(j)
		lo, hi = min(lo, len(members)), max(hi, len(members))
		for _, a := range members {
			seen[a]++
			i := r.index[a]
			if p := Position(i); p < float64(j)/float64(S) || p >= float64(j+1)/float64(S) {
				t.Fatalf("%q (index %d, position %g) in subset %d of %d", a, i, p, j, S)
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("%d endpoints in subsets, want %d", len(seen), n)
	}
	for a, c := range seen {
		if c != 1 {
			t.Fatalf("%q in %d subsets", a, c)
		}
	}
	if n > 0 && hi-lo > 1 {
		t.Fatalf("subset sizes range %d..%d", lo, hi)
	}
}

// subsetOf maps every endpoint of s to its subset.
func subsetOf(s *Snapshot) map[string]int {
	out := make(map[string]int, s.Len())
	for _, e := range s.Endpoints() {
		out[e.Address] = e.Subset
	}
	return out
}

// checkStep asserts what one change may do, given the snapshots before and
// after it: with S unchanged, at most two subsets change and at most one
// surviving endpoint changes subset; when S changes (by any power of two,
// which the caps S ≤ N and S ≤ F can force on tiny rings), every surviving
// endpoint that did not move stays in the nested arc.
func checkStep(t testing.TB, before, after *Snapshot, d Delta) {
	t.Helper()
	if len(d.Moved) > max(1, len(d.Removed)) {
		t.Fatalf("%d survivors moved for %d removals", len(d.Moved), len(d.Removed))
	}
	was, is := subsetOf(before), subsetOf(after)
	moved := make(map[string]bool)
	for _, m := range d.Moved {
		moved[m.Address] = true
	}
	Sb, Sa := before.Subsets(), after.Subsets()
	switch {
	case Sa == Sb:
		touched := make(map[int]bool)
		shifted := 0
		for a, j := range was {
			k, ok := is[a]
			if !ok {
				touched[j] = true
				continue
			}
			if k != j {
				touched[j], touched[k] = true, true
				shifted++
			}
		}
		for a, k := range is {
			if _, ok := was[a]; !ok {
				touched[k] = true
			}
		}
		if single := len(d.Added)+len(d.Removed) == 1; single && (len(touched) > 2 || shifted > 1) {
			t.Fatalf("one change touched subsets %v and shifted %d survivors", touched, shifted)
		}
	default:
		// Arcs of the larger count nest in arcs of the smaller one:
		// arc j of S holds arcs j·m … j·m+m−1 of m·S.
		shift := bits.TrailingZeros(uint(max(Sa, Sb))) - bits.TrailingZeros(uint(min(Sa, Sb)))
		for a, j := range was {
			k, ok := is[a]
			if !ok || moved[a] {
				continue
			}
			if (Sa > Sb && k>>shift != j) || (Sa < Sb && j>>shift != k) {
				t.Fatalf("S %d→%d: %q went from arc %d to arc %d", Sb, Sa, a, j, k)
			}
		}
	}
}
