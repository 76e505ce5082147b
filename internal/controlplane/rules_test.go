package controlplane

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/waitfor"
)

// The control plane assigns indices by subset.Ring's rules: the initial
// set is shuffled (exactly as a Ring of the same origin shuffles it), a
// joining endpoint takes the next index, and a leaving one's hole is
// filled by the endpoint with the highest index — one endpoint moves. The
// gateway's own xDS client receives the membership.
func TestIndicesFollowTheRingRules(t *testing.T) {
	addrs := endpoints(10001, 120)
	f := newFixture(t, map[string][]string{"payments": addrs})
	cp := f.start()
	ads := dialADS(t, cp.Addr(), "gw-0", []string{"payments"}, nil)
	gw := runXDS(t, cp.Addr(), "gw-1", "payments")

	first, subsets := indicesOf(t, ads.wait(1).clusters["payments"])
	want, err := subset.NewRing(subset.Config{Origin: "payments", Fleet: unboundedFleet}, addrs)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(first, want.Indices()) {
		t.Fatalf("initial indices differ from a Ring of the same origin and endpoints")
	}
	if subsets != want.Subsets() || subsets != 4 {
		t.Fatalf("ring_subsets %d, want %d (the Ring's count for 120 endpoints: 4)", subsets, want.Subsets())
	}
	sorted := slices.Clone(addrs)
	slices.Sort(sorted)
	inOrder := 0
	for i, a := range sorted {
		if first[a] == i {
			inOrder++
		}
	}
	if inOrder > 10 {
		t.Errorf("%d of 120 endpoints hold their sorted position: the initial set is not shuffled", inOrder)
	}
	waitfor.Until(t, "the gateway's client to emit the membership", func() bool { return len(gw.emitted()) == 1 })
	if u := gw.emitted()[0]; len(u.Endpoints) != 120 || u.Endpoints[0].Zone != "z1" || u.Endpoints[0].Weight != 1 {
		t.Fatalf("the gateway's client got %d endpoints (%+v …)", len(u.Endpoints), u.Endpoints[0])
	}

	// A joining endpoint takes the next index; nobody else moves.
	joined := "127.0.0.1:20000"
	f.setSource(map[string][]string{"payments": append(slices.Clone(addrs), joined)})
	second, _ := indicesOf(t, ads.wait(2).clusters["payments"])
	if second[joined] != 120 {
		t.Fatalf("the joining endpoint has index %d, want 120 (the next)", second[joined])
	}
	delete(second, joined)
	if !maps.Equal(second, first) {
		t.Fatal("an add moved an endpoint")
	}

	// A leaving endpoint's hole is filled by the highest index (the one
	// that just joined): exactly one endpoint moves.
	var leaving string
	for a, i := range first {
		if i == 7 {
			leaving = a
		}
	}
	rest := slices.DeleteFunc(append(slices.Clone(addrs), joined), func(a string) bool { return a == leaving })
	f.setSource(map[string][]string{"payments": rest})
	third, _ := indicesOf(t, ads.wait(3).clusters["payments"])
	if len(third) != 120 || third[joined] != 7 {
		t.Fatalf("after removing index 7: %d endpoints, the highest (%s) has index %d; want 120 and 7", len(third), joined, third[joined])
	}
	moved := 0
	for a, i := range third {
		if a != joined && first[a] != i {
			moved++
		}
	}
	if moved != 0 {
		t.Fatalf("%d endpoints besides the highest moved", moved)
	}
	f.waitVersion("payments", 3)
	waitfor.Until(t, "the gateway's client to follow both changes", func() bool { return len(gw.emitted()) == 3 })
	if got := gw.emitted()[2].Endpoints; len(got) != 120 || slices.ContainsFunc(got, func(e discovery.Endpoint) bool { return e.Address == leaving }) {
		t.Fatalf("the gateway's client holds %d endpoints after the remove", len(got))
	}
}

// An origin whose ring emptied has no index to keep: the set that refills
// it is an initial set, shuffled as a new ring's.
func TestAnEmptiedRingRefillsShuffled(t *testing.T) {
	o, err := newOrigin("payments", subset.DefaultSizing, nil)
	if err != nil {
		t.Fatal(err)
	}
	addrs := endpoints(10001, 50)
	for _, eps := range [][]string{nil, addrs} {
		if err := o.setMembers(members(eps), nil); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := subset.NewRing(subset.Config{Origin: "payments", Fleet: unboundedFleet}, addrs)
	if !maps.Equal(o.ring.Indices(), want.Indices()) {
		t.Fatal("the refilled ring is not the initial shuffle")
	}
}

// A batch that both adds and removes places its joins first: a joining
// endpoint takes a leaving one's index, and the endpoints that stay keep
// theirs, where Ring.Sync alone would move the highest into the hole and
// add the joiner at the end. With more leaves than joins, only the
// endpoints that stay above the new size move, as with Sync.
func TestJoinsFillTheHolesOfLeaves(t *testing.T) {
	current := map[string]int{"a": 0, "b": 1, "c": 2, "d": 3, "e": 4}
	// One replaced (a rolling update's step): the joiner takes b's index.
	got := joinIntoHoles(current, []string{"a", "c", "d", "e", "f"})
	if want := map[string]int{"a": 0, "f": 1, "c": 2, "d": 3, "e": 4}; !maps.Equal(got, want) {
		t.Fatalf("one replaced: %v, want %v", got, want)
	}
	// Two leave (b and d), one joins: the joiner takes the lowest hole,
	// e (above the new size 4) the other; a and c stay.
	got = joinIntoHoles(current, []string{"a", "c", "e", "y"})
	if want := map[string]int{"a": 0, "y": 1, "c": 2, "e": 3}; !maps.Equal(got, want) {
		t.Fatalf("two out, one in: %v, want %v", got, want)
	}
	// More joiners than holes: the rest take the indices after.
	got = joinIntoHoles(map[string]int{"a": 0, "b": 1}, []string{"a", "c", "d"})
	if want := map[string]int{"a": 0, "c": 1, "d": 2}; !maps.Equal(got, want) {
		t.Fatalf("two joiners, one hole: %v, want %v", got, want)
	}
	// The result is always a dense ring a Ring accepts.
	if _, err := subset.OrderByIndex(got); err != nil {
		t.Fatal(err)
	}
}

// A gateway asking for a cluster the control plane does not serve is
// logged once, naming the node and the cluster.
func TestUnknownClusterIsLogged(t *testing.T) {
	f := newFixture(t, map[string][]string{"payments": endpoints(10001, 3)})
	cp := f.start()
	ads := dialADS(t, cp.Addr(), "gw-7", []string{"payments", "paymnets"}, nil)
	ads.wait(1)
	waitfor.Until(t, "the unknown cluster to be logged", func() bool {
		return strings.Contains(f.log.String(), "does not serve") && strings.Contains(f.log.String(), "clusters=[paymnets]")
	})
	if strings.Count(f.log.String(), "does not serve") != 1 {
		t.Errorf("logged more than once per stream:\n%s", f.log.String())
	}
}
