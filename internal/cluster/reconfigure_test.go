package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/telemetry"
)

// TestAFleetMoveCommitsOnTheMembershipOfTheMoment: a reload's new placement
// (a new subset size, with a new fleet position) is built by Prepare; when discovery applies a new membership between
// Prepare and Commit, Commit places the endpoints there are then, so the
// placement and the members never disagree. The endpoints are never
// dialled (no pre-warming).
func TestAFleetMoveCommitsOnTheMembershipOfTheMoment(t *testing.T) {
	addrs := make([]string, 41)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.0.0.%d:80", i+1)
	}
	oc, o := discoveredOrigin(t, 2, config.Fleet{Instance: 0, Size: 1})
	if err := o.ApplyMembership(members(addrs[:40])); err != nil {
		t.Fatal(err)
	}
	next := *oc
	next.Subset.Size = 10 // a new placement, built by Prepare
	c, err := o.Prepare(&next, config.Fleet{Instance: 3, Size: 4})
	if err != nil || c == nil {
		t.Fatalf("Prepare of a new subset size and fleet position: %v, %v", c, err)
	}
	if err := o.ApplyMembership(members(addrs[1:])); err != nil { // one gone, one new
		t.Fatal(err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	var placed []string
	for _, e := range o.Snapshot().Endpoints() {
		placed = append(placed, e.Address)
	}
	if slices.Sort(placed); !slices.Equal(placed, slices.Sorted(slices.Values(addrs[1:]))) {
		t.Errorf("after the commit the placement holds %v, not the members of the moment (%s gone, %s new)", placed, addrs[0], addrs[40])
	}
	if v := o.Subsets(); v.Gateway != 3 || v.Fleet.Gateways != 4 {
		t.Errorf("after the commit the origin is at gateway %d of %d, want 3 of 4", v.Gateway, v.Fleet.Gateways)
	}
}

// TestAResizeKeepsTheRingsHistory: an origin whose membership changed since
// it started (5 of 200 endpoints replaced) holds a ring no fresh start
// would build. A resize that the subset count does not feel (2 loops × 2
// gateways already cover its 4 subsets) moves no endpoint of any loop: the
// ring is told the new fleet, not rebuilt from the current members (which
// would reshuffle this one).
func TestAResizeKeepsTheRingsHistory(t *testing.T) {
	addrs := make([]string, 205)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.0.%d.%d:80", i/250, i%250+1)
	}
	oc, o := discoveredOrigin(t, 2, config.Fleet{Instance: 1, Size: 2})
	for _, m := range [][]string{addrs[:200], addrs[5:]} {
		if err := o.ApplyMembership(members(m)); err != nil {
			t.Fatal(err)
		}
	}
	loops := func(o *Origin) [][]string {
		o.mu.Lock()
		defer o.mu.Unlock()
		var out [][]string
		for l := range o.loops {
			out = append(out, slices.Sorted(slices.Values(o.subsetOf(l))))
		}
		return out
	}
	before := loops(o)
	if s := o.Snapshot().Subsets(); s != 4 {
		t.Fatalf("%d subsets, want 4", s)
	}
	_, fresh := discoveredOrigin(t, 2, config.Fleet{Instance: 1, Size: 2})
	if err := fresh.ApplyMembership(members(addrs[5:])); err != nil {
		t.Fatal(err)
	}
	if slices.EqualFunc(loops(fresh), before, slices.Equal) {
		t.Fatal("a fresh origin holds the same subsets: the membership's history moves nothing, and the test shows nothing")
	}
	c, err := o.Prepare(oc, config.Fleet{Instance: 1, Size: 4})
	if err != nil || c == nil {
		t.Fatalf("Prepare of a resize: %v, %v", c, err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if after := loops(o); !slices.EqualFunc(after, before, slices.Equal) {
		t.Errorf("the resize moved the loops' subsets: the ring was rebuilt, losing its history")
	}
	if v := o.Subsets(); v.Fleet.Gateways != 4 || v.Subsets != 4 {
		t.Errorf("after the resize: %d gateways, %d subsets; want 4 and 4", v.Fleet.Gateways, v.Subsets)
	}
}

// discoveredOrigin is origin "app" of a gateway of loops loops at fleet
// position fl, its membership to come from discovery (none yet) and its
// pools not pre-warmed (the endpoints are never dialled); it is closed
// when the test ends.
func discoveredOrigin(t *testing.T, loops int, fl config.Fleet) (*config.Origin, *Origin) {
	t.Helper()
	oc := config.DefaultOrigin()
	oc.Name = "app"
	oc.Discovery.Type = config.DiscoveryFile
	oc.Pool.Prewarm = 0
	o, err := New(&oc, &Env{Clock: clock.Real(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: telemetry.New(),
		Loops: loops, Fleet: fl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	return &oc, o
}

// members is a membership of addrs, weight 1 each.
func members(addrs []string) Membership {
	var m Membership
	for _, a := range addrs {
		m.Members = append(m.Members, balance.Member{Address: a, Weight: 1})
	}
	return m
}
