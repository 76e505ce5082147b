package controlplane

import (
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/testlog"
)

// fleetRig is a fleet on a fake clock whose persist and publish record
// what they get; persist fails while fail is set.
type fleetRig struct {
	t   *testing.T
	clk *clock.Fake
	m   *Metrics
	f   *fleet
	log *testlog.Buffer

	mu        sync.Mutex
	fail      bool
	persisted []string
	served    map[string]position // the positions as published
	updates   []map[string]position
	removed   [][]string
}

// connect opens a fleet stream for each node, in order.
func (r *fleetRig) connect(nodes ...string) {
	for _, node := range nodes {
		r.f.connect(node)
	}
}

func newFleetRig(t *testing.T, restored ...string) *fleetRig {
	t.Helper()
	logger, buf := testlog.New(slog.LevelDebug)
	r := &fleetRig{t: t, clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), m: NewMetrics(), log: buf,
		persisted: slices.Clone(restored), served: map[string]position{}}
	f, err := newFleet(&fleet{clk: r.clk, grace: 30 * time.Second, log: logger, metrics: r.m,
		persist: r.persist, publish: r.publish}, restored)
	if err != nil {
		t.Fatal(err)
	}
	r.f = f
	r.updates, r.removed = nil, nil // the restore's publish is not a change
	t.Cleanup(f.close)
	return r
}

func (r *fleetRig) persist(slots []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return errors.New("disk full")
	}
	r.persisted = slices.Clone(slots)
	return nil
}

// publish checks that what it is given was persisted first.
func (r *fleetRig) publish(changed map[string]position, removed []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for node, p := range changed {
		if p.instance >= len(r.persisted) || r.persisted[p.instance] != node || p.size != len(r.persisted) {
			r.t.Errorf("published %s at %+v before persisting it (persisted %v)", node, p, r.persisted)
		}
		r.served[node] = p
	}
	for _, node := range removed {
		delete(r.served, node)
	}
	r.updates = append(r.updates, maps.Clone(changed))
	r.removed = append(r.removed, slices.Clone(removed))
	return nil
}

func (r *fleetRig) setFail(fail bool) {
	r.mu.Lock()
	r.fail = fail
	r.mu.Unlock()
}

// want checks the slots, the persisted slots and every served position.
func (r *fleetRig) want(slots ...string) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var got []string
	for _, m := range r.f.members() {
		got = append(got, m.Node)
	}
	if !slices.Equal(got, slots) || !slices.Equal(r.persisted, slots) {
		r.t.Fatalf("slots %v, persisted %v; want %v", got, r.persisted, slots)
	}
	want := map[string]position{}
	for i, node := range slots {
		want[node] = position{i, len(slots)}
	}
	if !maps.Equal(r.served, want) {
		r.t.Fatalf("served %v, want %v", r.served, want)
	}
	if v := value(r.m.FleetSize); v != float64(len(slots)) {
		r.t.Fatalf("fleet_size %v, want %d", v, len(slots))
	}
}

func (r *fleetRig) updateCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.updates)
}

// Nodes join at the end in the order they come: 0, 1, 2; each join is
// one update holding every node, since the size changed for all.
func TestFleetJoinsAtTheEnd(t *testing.T) {
	r := newFleetRig(t)
	for i, node := range []string{"gw-a", "gw-b", "gw-c"} {
		r.f.connect(node)
		if got := r.updates[i]; len(got) != i+1 {
			t.Fatalf("join %d published %v; want every node at the new size", i, got)
		}
	}
	r.want("gw-a", "gw-b", "gw-c")
	if v := value(r.m.FleetConnected); v != 3 {
		t.Fatalf("fleet_connected %v, want 3", v)
	}
	// A second stream of a node changes nothing.
	r.f.connect("gw-b")
	r.f.disconnect("gw-b")
	if r.updateCount() != 3 || value(r.m.FleetConnected) != 3 {
		t.Fatalf("a node's second stream changed the fleet: %d updates, %v connected", r.updateCount(), value(r.m.FleetConnected))
	}
	r.clk.Advance(time.Hour)
	r.want("gw-a", "gw-b", "gw-c")
	if !strings.Contains(r.log.String(), "gateway joined") || !strings.Contains(r.log.String(), "node=gw-c instance=2 size=3") {
		t.Fatalf("the join is not logged with node, instance and size:\n%s", r.log.String())
	}
}

// A node whose stream closes holds its position for the grace; back
// within it, nothing changes, and the expired timer releases nothing.
func TestFleetReconnectWithinTheGrace(t *testing.T) {
	r := newFleetRig(t)
	r.connect("gw-a", "gw-b", "gw-c")
	r.f.disconnect("gw-b")
	if value(r.m.FleetConnected) != 2 {
		t.Fatalf("fleet_connected %v after a disconnect, want 2", value(r.m.FleetConnected))
	}
	r.clk.Advance(30*time.Second - time.Millisecond)
	r.want("gw-a", "gw-b", "gw-c")
	r.f.connect("gw-b")
	r.clk.Advance(time.Hour)
	r.want("gw-a", "gw-b", "gw-c")
	if n := r.updateCount(); n != 3 || value(r.m.FleetMoves) != 0 {
		t.Fatalf("%d updates and %v moves after a reconnect within the grace; want the 3 joins and none", n, value(r.m.FleetMoves))
	}
	if !strings.Contains(r.log.String(), "held for the grace") || !strings.Contains(r.log.String(), "grace=30s") {
		t.Fatalf("the hold is not logged with the grace:\n%s", r.log.String())
	}
}

// A node away past the grace is released: the highest moves into its
// hole, in one update that removes it and sets the others' new size.
func TestFleetCompactionMovesTheHighest(t *testing.T) {
	r := newFleetRig(t)
	r.connect("gw-a", "gw-b", "gw-c")
	r.f.disconnect("gw-b")
	r.clk.Advance(30 * time.Second)
	r.want("gw-a", "gw-c")
	last := r.updates[len(r.updates)-1]
	if len(r.updates) != 4 || len(last) != 2 || !slices.Equal(r.removed[3], []string{"gw-b"}) {
		t.Fatalf("the release published %v removing %v in update %d; want gw-a and gw-c removing gw-b, in one update", last, r.removed[len(r.removed)-1], len(r.updates))
	}
	if v := value(r.m.FleetMoves); v != 1 {
		t.Fatalf("fleet_moves_total %v, want 1", v)
	}
	if !strings.Contains(r.log.String(), "node=gw-c from=2 to=1 size=2") {
		t.Fatalf("the move is not logged with node, from, to and size:\n%s", r.log.String())
	}
	// A newcomer takes the next position, not the released one.
	r.f.connect("gw-d")
	r.want("gw-a", "gw-c", "gw-d")
}

// The highest away past the grace: the size shrinks and nobody moves.
func TestFleetHighestLeaves(t *testing.T) {
	r := newFleetRig(t)
	r.connect("gw-a", "gw-b", "gw-c")
	r.f.disconnect("gw-c")
	r.clk.Advance(31 * time.Second)
	r.want("gw-a", "gw-b")
	if v := value(r.m.FleetMoves); v != 0 {
		t.Fatalf("fleet_moves_total %v, want 0", v)
	}
	// The last one leaving empties the fleet.
	r.f.disconnect("gw-a")
	r.f.disconnect("gw-b")
	r.clk.Advance(31 * time.Second)
	r.want()
}

// Restored positions are held for a fresh grace: a node back within it
// keeps its position, one that never comes back is compacted away.
func TestFleetRestoredPositionsAreHeld(t *testing.T) {
	r := newFleetRig(t, "gw-a", "gw-b", "gw-c")
	r.want("gw-a", "gw-b", "gw-c")
	if v := value(r.m.FleetConnected); v != 0 {
		t.Fatalf("fleet_connected %v after a restore, want 0", v)
	}
	r.f.connect("gw-c")
	r.f.connect("gw-b")
	r.clk.Advance(30 * time.Second)
	r.want("gw-c", "gw-b")
	if v := value(r.m.FleetMoves); v != 1 {
		t.Fatalf("fleet_moves_total %v, want 1 (gw-c into gw-a's 0)", v)
	}
}

// A change whose state write fails is not published and changes nothing;
// it is tried again a second later: a join waits (its gateway gets no
// position yet), a release stays held.
func TestFleetStateWriteFailure(t *testing.T) {
	r := newFleetRig(t)
	r.f.connect("gw-a")
	r.setFail(true)
	r.f.connect("gw-b")
	r.want("gw-a")
	if n := r.updateCount(); n != 1 {
		t.Fatalf("%d updates; a join whose write failed was published", n)
	}
	r.clk.Advance(fleetRetry) // still failing
	r.want("gw-a")
	r.setFail(false)
	r.clk.Advance(fleetRetry)
	r.want("gw-a", "gw-b")

	r.f.disconnect("gw-a")
	r.setFail(true)
	r.clk.Advance(30 * time.Second)
	r.want("gw-a", "gw-b")
	r.setFail(false)
	r.clk.Advance(fleetRetry)
	r.want("gw-b")
	if !strings.Contains(r.log.String(), "state write failed") {
		t.Fatalf("the failed write is not logged:\n%s", r.log.String())
	}

	// A waiting node that goes away before its write succeeds never joins.
	r.setFail(true)
	r.f.connect("gw-c")
	r.f.disconnect("gw-c")
	r.setFail(false)
	r.clk.Advance(time.Hour)
	r.want("gw-b")
}

// Nodes that subscribe within one join window join together: one state
// write and one update at the full size, never the sizes in between; one
// that comes after the window joins in the next. A write that fails is
// tried again fleetRetry later, with the nodes that came meanwhile.
func TestFleetJoinWindow(t *testing.T) {
	r := newFleetRig(t)
	r.f.join = time.Second
	r.connect("gw-a", "gw-b")
	r.clk.Advance(500 * time.Millisecond)
	r.connect("gw-c")
	if n := r.updateCount(); n != 0 {
		t.Fatalf("%d updates inside the join window, want none", n)
	}
	r.clk.Advance(500 * time.Millisecond)
	r.want("gw-a", "gw-b", "gw-c")
	if n := r.updateCount(); n != 1 {
		t.Fatalf("three joins within a window published %d updates, want 1", n)
	}
	for node, p := range r.updates[0] {
		if p.size != 3 {
			t.Errorf("%s was published at size %d, want 3: the fleet grows in one step", node, p.size)
		}
	}

	r.mu.Lock()
	r.fail = true
	r.mu.Unlock()
	r.connect("gw-d")
	r.clk.Advance(time.Second)
	r.connect("gw-e") // while the retry waits
	r.mu.Lock()
	r.fail = false
	r.mu.Unlock()
	r.clk.Advance(fleetRetry)
	r.want("gw-a", "gw-b", "gw-c", "gw-d", "gw-e")
	if n := r.updateCount(); n != 2 {
		t.Fatalf("%d updates, want 2: the retry admits gw-d and gw-e together", n)
	}
}
