package subset

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/corput/corput/internal/rng"
)

// TestPlaceAgreesWhateverTheHistory: a control plane's ring evolves by
// random adds, removes and syncs; gateways that joined at different times
// (each built its own ring from the membership it first saw, so each holds
// different indices of its own) place the control plane's indices after
// every change. Every gateway then holds exactly the control plane's ring —
// the same endpoint in the same subset for every frontend — and every
// Ringsteady property holds for the placed ring: dense indices, subsets
// within one of each other, and at most two subsets changed by one add or
// remove. The subset count is the control plane's, sent with the indices.
func TestPlaceAgreesWhateverTheHistory(t *testing.T) {
	src := rng.New(20261201)
	for trial := range 40 {
		cfg := Config{Origin: "o", Fleet: Fleet{Gateways: 1 + src.IntN(8), Loops: 1 + src.IntN(8)},
			Sizing: FixedSize([]int{0, 4, 10, 50}[src.IntN(4)])}
		next := 1 + src.IntN(200)
		cp := mustRing(t, cfg, addrs(next))
		var gws []*Ring
		var placed []bool // the gateway has placed shared indices before
		for step := range 120 {
			if step%30 == 0 { // a gateway starts now, from the membership it sees
				gws = append(gws, mustRing(t, cfg, slices.Clone(cp.addrs)))
				placed = append(placed, false)
			}
			single := false
			switch op := src.IntN(10); {
			case op < 4:
				_, _ = cp.Add(addr(next))
				next++
				single = true
			case op < 8 && cp.Len() > 1:
				_, _ = cp.Remove(cp.addrs[src.IntN(cp.Len())])
				single = true
			default:
				members := slices.Clone(cp.addrs)
				shuffle(members, src)
				members = members[:1+src.IntN(len(members))]
				members = append(members, addr(next))
				next++
				if _, err := cp.Sync(members); err != nil {
					t.Fatal(err)
				}
			}
			want := cp.Snapshot()
			for g, gw := range gws {
				before := gw.Snapshot()
				d, err := gw.Place(cp.Indices(), cp.Subsets())
				if err != nil {
					t.Fatalf("trial %d step %d gateway %d: %v", trial, step, g, err)
				}
				checkRing(t, gw)
				got := gw.Snapshot()
				if !maps.Equal(subsetOf(got), subsetOf(want)) || got.Subsets() != want.Subsets() {
					t.Fatalf("trial %d step %d: gateway %d placed the shared indices into other subsets than the control plane's", trial, step, g)
				}
				if single && placed[g] { // its own history was replaced by the first Place
					checkStep(t, before, got, d)
				}
				placed[g] = true
			}
		}
	}
}

// TestPlaceRefusesIndicesThatAreNotDense: a gap, a duplicate, a negative
// index and an empty address are refused, and the ring keeps its
// placement.
func TestPlaceRefusesIndicesThatAreNotDense(t *testing.T) {
	r := mustRing(t, Config{Origin: "o"}, addrs(4))
	keep := r.Indices()
	for name, in := range map[string]map[string]int{
		"a gap":       {addr(0): 0, addr(1): 1, addr(2): 3},
		"a duplicate": {addr(0): 0, addr(1): 1, addr(2): 1},
		"negative":    {addr(0): -1, addr(1): 0},
		"empty":       {"": 0},
	} {
		_, err := r.Place(in, 0)
		if err == nil || !(errors.Is(err, ErrIndices) || errors.Is(err, ErrEmpty)) {
			t.Errorf("%s: Place = %v, want ErrIndices", name, err)
		}
		if !maps.Equal(r.Indices(), keep) {
			t.Fatalf("%s: a refused Place changed the ring", name)
		}
	}
	d, err := r.Place(keep, 0)
	if err != nil || len(d.Added)+len(d.Removed)+len(d.Moved) != 0 {
		t.Errorf("placing the ring's own indices: %+v, %v; want no change", d, err)
	}
}
