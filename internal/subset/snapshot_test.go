package subset

import (
	"slices"
	"testing"
)

// Frontends replicate subsets evenly: each subset used by F/S ± 1
// frontends, and the frontends cover every endpoint.
func TestFrontendMappingReplicatesEvenly(t *testing.T) {
	for _, fleet := range []Fleet{{100, 16}, {3, 16}, {7, 3}, {1, 1}, {5, 1}} {
		r := mustRing(t, Config{Origin: "o", Fleet: fleet}, addrs(800))
		snap := r.Snapshot()
		S, F := snap.Subsets(), fleet.Frontends()
		users := make([]int, S)
		for g := range fleet.Gateways {
			for l := range fleet.Loops {
				j := snap.SubsetOf(g, l)
				users[j]++
				if !slices.Equal(snap.Members(g, l), snap.Subset(j)) {
					t.Fatalf("%+v: Members(%d,%d) is not subset %d", fleet, g, l, j)
				}
			}
		}
		for j, u := range users {
			if u < F/S || u > F/S+1 {
				t.Fatalf("%+v: subset %d used by %d frontends, want %d±1", fleet, j, u, F/S)
			}
			if got := len(snap.Users(j)); got != u {
				t.Fatalf("%+v: Users(%d) lists %d frontends, counted %d", fleet, j, got, u)
			}
		}
	}
}

// A gateway with K ≥ S uses every subset across its loops.
func TestGatewayWithEnoughLoopsCoversAll(t *testing.T) {
	fleet := Fleet{Gateways: 5, Loops: 16}
	r := mustRing(t, Config{Origin: "o", Fleet: fleet}, addrs(400)) // S = 8
	snap := r.Snapshot()
	for g := range fleet.Gateways {
		seen := map[string]bool{}
		for l := range fleet.Loops {
			for _, a := range snap.Members(g, l) {
				seen[a] = true
			}
		}
		if len(seen) != 400 {
			t.Fatalf("gateway %d reaches %d of 400 endpoints", g, len(seen))
		}
	}
}

// Doubling S only splits subsets: each frontend keeps a subset of what it had.
func TestDoublingSubsetsOnlyRemovesPairs(t *testing.T) {
	fleet := Fleet{Gateways: 10, Loops: 16}
	r := mustRing(t, Config{Origin: "o", Fleet: fleet}, addrs(800))
	before := r.Snapshot()
	if err := r.SetSizing(FixedSize(25)); err != nil {
		t.Fatal(err)
	}
	after := r.Snapshot()
	if before.Subsets() != 16 || after.Subsets() != 32 {
		t.Fatalf("S %d→%d, want 16→32", before.Subsets(), after.Subsets())
	}
	for g := range fleet.Gateways {
		for _, c := range Diff(before, after, g) {
			if len(c.Added) != 0 || len(c.Removed) != 25 {
				t.Fatalf("gateway %d loop %d gained %d, lost %d; want 0 and 25", g, c.Loop, len(c.Added), len(c.Removed))
			}
		}
	}
}

func TestSnapshotIsImmutable(t *testing.T) {
	r := mustRing(t, Config{Origin: "o", Fleet: Fleet{2, 2}}, addrs(200))
	snap := r.Snapshot()
	if r.Snapshot() != snap {
		t.Fatal("an unchanged ring built a second snapshot")
	}
	members := slices.Clone(snap.Members(0, 0))
	for i := range 50 {
		r.Remove(r.addrs[0])
		r.Add(addr(1000 + i))
	}
	if !slices.Equal(snap.Members(0, 0), members) {
		t.Fatal("a published snapshot changed under later deltas")
	}
	if r.Snapshot().Version() <= snap.Version() {
		t.Fatal("version did not grow")
	}
}

// Diff after one added endpoint names exactly the loops of its subset, each
// gaining only that endpoint: the gateway dials only there.
func TestDiffAfterAdd(t *testing.T) {
	fleet := Fleet{Gateways: 4, Loops: 8}
	r := mustRing(t, Config{Origin: "o", Fleet: fleet}, addrs(200)) // S = 4
	old := r.Snapshot()
	r.Add("new:80")
	cur := r.Snapshot()
	j := subsetOf(cur)["new:80"]
	for g := range fleet.Gateways {
		changes := Diff(old, cur, g)
		var want []int
		for l := range fleet.Loops {
			if cur.SubsetOf(g, l) == j {
				want = append(want, l)
			}
		}
		var got []int
		for _, c := range changes {
			got = append(got, c.Loop)
			if !slices.Equal(c.Added, []string{"new:80"}) || len(c.Removed) != 0 {
				t.Fatalf("gateway %d loop %d: +%v -%v", g, c.Loop, c.Added, c.Removed)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("gateway %d: changed loops %v, want %v", g, got, want)
		}
	}
	if got := Diff(nil, cur, 0); len(got) != fleet.Loops || len(got[0].Added) != len(cur.Members(0, 0)) {
		t.Fatalf("Diff from nil: %d loops", len(got))
	}
}

func TestEndpointsAndUsersAgree(t *testing.T) {
	fleet := Fleet{Gateways: 3, Loops: 4}
	r := mustRing(t, Config{Origin: "o", Fleet: fleet, Sizing: FixedSize(4)}, addrs(30)) // S = 8
	snap := r.Snapshot()
	for _, e := range snap.Endpoints() {
		if e.Position != Position(e.Index) {
			t.Fatalf("%+v: position is not VdC(index)", e)
		}
		for _, fe := range snap.Users(e.Subset) {
			if !slices.Contains(snap.Members(fe.Gateway, fe.Loop), e.Address) {
				t.Fatalf("%+v listed as a user of %s, which it does not use", fe, e.Address)
			}
		}
	}
}

func TestMembersPanicsOutsideFleet(t *testing.T) {
	snap := mustRing(t, Config{Origin: "o", Fleet: Fleet{2, 2}}, addrs(10)).Snapshot()
	defer func() {
		if recover() == nil {
			t.Fatal("Members(0, 2) on a 2-loop fleet did not panic")
		}
	}()
	snap.Members(0, 2)
}
