package subset

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// One suite, run against every Algorithm: what any subsetting placement must
// do, whatever its balance and churn.
func TestAlgorithmSuite(t *testing.T) {
	for _, alg := range Algorithms() {
		t.Run(alg.Name(), func(t *testing.T) {
			p := Params{Origin: "o", Fleet: Fleet{Gateways: 6, Loops: 4}, Seed: 9}
			list := addrs(120) // S = 4 by the default sizing: k = 30
			a, err := alg.Place(p, list)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := alg.Place(p, list)
			first := a.Assignment()
			if !slices.EqualFunc(first, b.Assignment(), slices.Equal) {
				t.Fatal("two placements of the same input differ: not deterministic")
			}
			checkAssignment(t, first, list, p.Fleet, 30)
			snap := a.Snapshot()
			checkSnapshotMatches(t, snap, first)
			kept := cloneAssignment(first)

			if err := a.Add("new:80"); err != nil {
				t.Fatal(err)
			}
			if err := a.Remove(addr(7)); err != nil {
				t.Fatal(err)
			}
			members := slices.DeleteFunc(append(slices.Clone(list), "new:80"), func(s string) bool { return s == addr(7) })
			checkAssignment(t, a.Assignment(), members, p.Fleet, 30)

			if err := a.Add(addr(1)); !errors.Is(err, ErrDuplicate) {
				t.Errorf("Add(existing) = %v, want ErrDuplicate", err)
			}
			if err := a.Remove("nope:1"); !errors.Is(err, ErrUnknown) {
				t.Errorf("Remove(unknown) = %v, want ErrUnknown", err)
			}

			grown := Fleet{Gateways: 7, Loops: 4}
			if err := a.SetFleet(grown); err != nil {
				t.Fatal(err)
			}
			checkAssignment(t, a.Assignment(), members, grown, 30)

			if err := a.Resize(8); err != nil {
				t.Fatal(err)
			}
			checkAssignment(t, a.Assignment(), members, grown, 15)
			checkSnapshotMatches(t, a.Snapshot(), a.Assignment())
			checkSnapshotMatches(t, snap, kept) // published before the changes: unchanged
		})
	}
}

func TestNoneUsesEverything(t *testing.T) {
	a, err := None.Place(Params{Origin: "o", Fleet: Fleet{Gateways: 2, Loops: 2}}, addrs(10))
	if err != nil {
		t.Fatal(err)
	}
	a.Add("9:1") // grows the membership's capacity
	placed := append(addrs(10), "9:1")
	snap := a.Snapshot()
	a.Add("0.0.0.1:1") // sorts first: shifts the membership in place
	for g := range 2 {
		for l := range 2 {
			if got := snap.Members(g, l); !slices.Equal(got, placed) {
				t.Fatalf("Members(%d,%d) = %v, want all 11 as placed", g, l, got)
			}
		}
	}
	if got := a.Snapshot().Members(1, 1); len(got) != 12 || got[0] != "0.0.0.1:1" {
		t.Fatalf("after Add: %v", got)
	}
	if _, err := Lookup(NameNone); err != nil {
		t.Fatal(err)
	}
	for _, alg := range Algorithms() {
		if alg.Name() == NameNone {
			t.Fatal("none is ranked")
		}
	}
}

// checkSnapshotMatches asserts that snap serves exactly assignment a.
func checkSnapshotMatches(t *testing.T, snap *Snapshot, a [][]string) {
	t.Helper()
	fleet := snap.Fleet()
	if len(a) != fleet.Frontends() {
		t.Fatalf("snapshot fleet %+v, assignment of %d frontends", fleet, len(a))
	}
	for f, want := range a {
		fe := fleet.Frontend(f)
		if got := snap.Members(fe.Gateway, fe.Loop); !slices.Equal(got, want) {
			t.Fatalf("snapshot frontend %d: %v, want %v", f, got, want)
		}
		if !slices.Contains(snap.Users(snap.SubsetOf(fe.Gateway, fe.Loop)), fe) {
			t.Fatalf("frontend %+v not among the users of its own subset", fe)
		}
	}
}

func cloneAssignment(a [][]string) [][]string {
	out := make([][]string, len(a))
	for i, ms := range a {
		out[i] = slices.Clone(ms)
	}
	return out
}

// checkAssignment asserts that every frontend of fleet has about size
// distinct members, all from members, and that together they use every
// member.
func checkAssignment(t *testing.T, a [][]string, members []string, fleet Fleet, size int) {
	t.Helper()
	if len(a) != fleet.Frontends() {
		t.Fatalf("%d frontends assigned, want %d", len(a), fleet.Frontends())
	}
	valid := make(map[string]bool, len(members))
	for _, m := range members {
		valid[m] = true
	}
	used := make(map[string]bool)
	for f, ms := range a {
		if len(ms) < size-1 || len(ms) > size+1 {
			t.Fatalf("frontend %d has %d members, want %d±1", f, len(ms), size)
		}
		own := make(map[string]bool, len(ms))
		for _, m := range ms {
			if !valid[m] || own[m] {
				t.Fatalf("frontend %d: member %q is not a member or repeats", f, m)
			}
			own[m] = true
			used[m] = true
		}
	}
	// Random choices may leave an endpoint unused; the deterministic
	// algorithms must not.
	if len(used) < len(members)*9/10 {
		t.Fatalf("frontends use %d of %d endpoints", len(used), len(members))
	}
}

func TestLookup(t *testing.T) {
	for _, alg := range Algorithms() {
		got, err := Lookup(alg.Name())
		if err != nil || got.Name() != alg.Name() {
			t.Fatalf("Lookup(%q) = %v, %v", alg.Name(), got, err)
		}
	}
	if _, err := Lookup("consistent"); err == nil || !strings.Contains(err.Error(), "ringsteady") {
		t.Fatalf("Lookup(unknown) = %v, want an error listing the algorithms", err)
	}
}

func TestSelectSmallest(t *testing.T) {
	for n := 1; n < 60; n++ {
		for k := 0; k <= n; k++ {
			s := make([]keyed, n)
			for i := range s {
				s[i] = keyed{key: uint64((i * 37) % 11), pos: i} // many equal keys
			}
			selectSmallest(s, k)
			keys := make([]uint64, n)
			for i := range s {
				keys[i] = s[i].key
			}
			sorted := slices.Clone(keys)
			slices.Sort(sorted)
			if k > 0 && k < n && slices.Max(keys[:k]) > slices.Min(keys[k:]) {
				t.Fatalf("n=%d k=%d: first k %v not the smallest", n, k, keys[:k])
			}
			slices.Sort(keys)
			if !slices.Equal(keys, sorted) {
				t.Fatalf("n=%d k=%d: select lost elements", n, k)
			}
		}
	}
}
