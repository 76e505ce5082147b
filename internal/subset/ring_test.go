package subset

import (
	"errors"
	"slices"
	"testing"

	"github.com/corput/corput/internal/rng"
)

func mustRing(t testing.TB, cfg Config, endpoints []string) *Ring {
	t.Helper()
	r, err := NewRing(cfg, endpoints)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPositionIsVanDerCorput(t *testing.T) {
	want := []float64{0, .5, .25, .75, .125, .625, .375, .875}
	for i, w := range want {
		if got := Position(i); got != w {
			t.Errorf("Position(%d) = %g, want %g", i, got, w)
		}
	}
}

// Every gateway must compute the same ring: it depends on the origin's name
// and the membership, not on the order discovery listed it in.
func TestNewRingDeterministic(t *testing.T) {
	list := addrs(100)
	reversed := slices.Clone(list)
	slices.Reverse(reversed)
	a := mustRing(t, Config{Origin: "payments"}, list)
	b := mustRing(t, Config{Origin: "payments"}, reversed)
	c := mustRing(t, Config{Origin: "ledger"}, list)
	if !slices.Equal(a.addrs, b.addrs) {
		t.Fatal("the same origin and membership gave two different rings")
	}
	if slices.Equal(a.addrs, c.addrs) {
		t.Fatal("two origins share a ring order: the shuffle ignores the origin name")
	}
	if slices.Equal(a.addrs, list) {
		t.Fatal("the ring order is the sorted order: not shuffled")
	}
	checkRing(t, a)
}

func TestAddTakesLowestFreeIndex(t *testing.T) {
	r := mustRing(t, Config{Origin: "o", Fleet: Fleet{Gateways: 4, Loops: 4}}, addrs(100))
	d, err := r.Add("new:80")
	if err != nil {
		t.Fatal(err)
	}
	if i, _ := r.Index("new:80"); i != 100 {
		t.Fatalf("new endpoint got index %d, want 100", i)
	}
	if len(d.Moved) != 0 || d.SubsetsBefore != d.SubsetsAfter {
		t.Fatalf("add moved %v, S %d→%d", d.Moved, d.SubsetsBefore, d.SubsetsAfter)
	}
	checkRing(t, r)
}

func TestRemoveFillsHoleFromTop(t *testing.T) {
	r := mustRing(t, Config{Origin: "o"}, addrs(10))
	victim, last := r.addrs[3], r.addrs[9]
	d, err := r.Remove(victim)
	if err != nil {
		t.Fatal(err)
	}
	want := []Move{{Address: last, From: 9, To: 3}}
	if !slices.Equal(d.Moved, want) {
		t.Fatalf("moved %v, want %v", d.Moved, want)
	}
	// Removing the top index moves nobody.
	d, _ = r.Remove(r.addrs[8])
	if len(d.Moved) != 0 {
		t.Fatalf("removing the last index moved %v", d.Moved)
	}
	checkRing(t, r)
}

func TestDeltaErrors(t *testing.T) {
	r := mustRing(t, Config{Origin: "o"}, addrs(3))
	if _, err := r.Add(addr(1)); !errors.Is(err, ErrDuplicate) {
		t.Errorf("Add(existing) = %v, want ErrDuplicate", err)
	}
	if _, err := r.Add(""); !errors.Is(err, ErrEmpty) {
		t.Errorf("Add(\"\") = %v, want ErrEmpty", err)
	}
	if _, err := r.Remove("nope:1"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Remove(unknown) = %v, want ErrUnknown", err)
	}
	if _, err := r.Sync([]string{"a:1", "a:1"}); !errors.Is(err, ErrDuplicate) {
		t.Errorf("Sync(with a repeat) = %v, want ErrDuplicate", err)
	}
	if _, err := NewRing(Config{Origin: "o"}, []string{"a:1", "a:1"}); !errors.Is(err, ErrDuplicate) {
		t.Errorf("NewRing(with a repeat) = %v, want ErrDuplicate", err)
	}
	if _, err := NewRing(Config{Origin: "o", Fleet: Fleet{Gateways: 0, Loops: 4}}, nil); err == nil {
		t.Error("NewRing accepted a fleet without gateways")
	}
	if r.Len() != 3 {
		t.Fatalf("failed deltas changed the ring: %d endpoints", r.Len())
	}
	checkRing(t, r)
}

// A batch removal moves only the survivors above the new top, each once.
func TestSyncBatchMovesEachSurvivorOnce(t *testing.T) {
	r := mustRing(t, Config{Origin: "o"}, addrs(8))
	// Remove indices 0 and 6: the survivor at 7 fills 0; 6 needs no fill.
	keep := slices.Clone(r.addrs)
	gone0, gone6, top := keep[0], keep[6], keep[7]
	keep = slices.DeleteFunc(keep, func(a string) bool { return a == gone0 || a == gone6 })
	keep = append(keep, "x:1", "y:1")
	d, err := r.Sync(keep)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Move{{Address: top, From: 7, To: 0}}; !slices.Equal(d.Moved, want) {
		t.Fatalf("moved %v, want %v", d.Moved, want)
	}
	if i, _ := r.Index("x:1"); i != 6 {
		t.Fatalf("first added endpoint at index %d, want 6", i)
	}
	if d, _ := r.Sync(keep); len(d.Added)+len(d.Removed) != 0 {
		t.Fatalf("re-syncing the same set changed %+v", d)
	}
	checkRing(t, r)
}

func TestSetFleetCapsSubsets(t *testing.T) {
	r := mustRing(t, Config{Origin: "o", Fleet: Fleet{Gateways: 100, Loops: 16}}, addrs(800))
	if r.Subsets() != 16 {
		t.Fatalf("S = %d, want 16", r.Subsets())
	}
	if err := r.SetFleet(Fleet{Gateways: 1, Loops: 4}); err != nil {
		t.Fatal(err)
	}
	if r.Subsets() != 4 {
		t.Fatalf("with 4 frontends S = %d, want 4", r.Subsets())
	}
	checkRing(t, r)
}

// Property: over random fleets, sizings and add/remove/sync sequences, every
// invariant holds after each step, and each single add or remove touches at
// most two subsets and shifts at most one survivor.
func TestRingProperties(t *testing.T) {
	src := rng.New(20260817)
	for trial := range 60 {
		fleet := Fleet{Gateways: 1 + src.IntN(20), Loops: 1 + src.IntN(16)}
		sizing := FixedSize([]int{0, 2, 4, 10, 50}[src.IntN(5)])
		next := src.IntN(300)
		r := mustRing(t, Config{Origin: "o", Fleet: fleet, Sizing: sizing}, addrs(next))
		checkRing(t, r)
		for range 200 {
			before := r.Snapshot()
			var d Delta
			var err error
			switch op := src.IntN(10); {
			case op < 5:
				d, err = r.Add(addr(next))
				next++
			case op < 9 && r.Len() > 0:
				d, err = r.Remove(r.addrs[src.IntN(r.Len())])
			default:
				members := slices.Clone(r.addrs)
				shuffle(members, src)
				members = members[:src.IntN(len(members)+1)]
				for range src.IntN(5) {
					members = append(members, addr(next))
					next++
				}
				d, err = r.Sync(members)
			}
			if err != nil {
				t.Fatalf("trial %d: %v", trial, err)
			}
			checkRing(t, r)
			checkStep(t, before, r.Snapshot(), d)
		}
	}
}
