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

// TestAFleetMoveCommitsOnTheMembershipOfTheMoment: a reload's placement is
// built by Prepare; when discovery applies a new membership between
// Prepare and Commit, Commit places the endpoints there are then, so the
// placement and the members never disagree. The endpoints are never
// dialled (no pre-warming).
func TestAFleetMoveCommitsOnTheMembershipOfTheMoment(t *testing.T) {
	addrs := make([]string, 41)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.0.0.%d:80", i+1)
	}
	oc := config.DefaultOrigin()
	oc.Name = "app"
	oc.Discovery.Type = config.DiscoveryFile
	oc.Pool.Prewarm = 0
	o, err := New(&oc, &Env{Clock: clock.Real(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: telemetry.New(),
		Loops: 2, Fleet: config.Fleet{Instance: 0, Size: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	members := func(as []string) Membership {
		var m Membership
		for _, a := range as {
			m.Members = append(m.Members, balance.Member{Address: a, Weight: 1})
		}
		return m
	}
	if err := o.ApplyMembership(members(addrs[:40])); err != nil {
		t.Fatal(err)
	}
	c, err := o.Prepare(&oc, config.Fleet{Instance: 3, Size: 4})
	if err != nil || c == nil {
		t.Fatalf("Prepare of a new fleet position: %v, %v", c, err)
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
