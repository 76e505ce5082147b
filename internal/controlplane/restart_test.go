package controlplane

import (
	"maps"
	"slices"
	"testing"

	"github.com/corput/corput/internal/waitfor"
)

// A control plane restarted on the same state file changes no index, its
// versions continue, and a connected gateway client (corput's xds.go)
// reconnects to the same assignment and sees no membership change. A
// change made while it was down is applied by the ring's rules on top of
// the persisted indices, not by a new shuffle.
func TestRestartChangesNoIndex(t *testing.T) {
	addrs := endpoints(11001, 60)
	f := newFixture(t, map[string][]string{"payments": addrs, "search": endpoints(12001, 30)})
	cp := f.start()
	gw := runXDS(t, cp.Addr(), "gw-0", "payments", "search")
	waitfor.Until(t, "the first membership of both origins", func() bool { return len(gw.emitted()) == 2 })
	// A change before the restart, so that the indices are not just the
	// initial shuffle and the version is past 1.
	f.setSource(map[string][]string{"payments": append(slices.Clone(addrs), "127.0.0.1:19999"), "search": endpoints(12001, 30)})
	f.waitVersion("payments", 2)
	waitfor.Until(t, "the change to reach the gateway", func() bool { return len(gw.emitted()) == 3 })
	before := cp.State()

	cp.Close()
	waitfor.Until(t, "the gateway's client to notice the control plane is gone", func() bool { return gw.x.Err() != nil })
	cp = f.start()
	waitfor.Until(t, "the gateway's client to take the restarted control plane's response", func() bool { return gw.x.Err() == nil })
	after := cp.State()
	if after.Generation != before.Generation+1 {
		t.Errorf("generation %d after a restart from %d, want +1", after.Generation, before.Generation)
	}
	for name, a := range before.Origins {
		b := after.Origins[name]
		if b == nil || b.Version != a.Version || !a.sameContent(b) {
			t.Fatalf("origin %s changed across the restart: %+v → %+v", name, a, b)
		}
	}
	served, _ := cp.server.Assignment("payments")
	idx, _ := indicesOf(t, served)
	if !maps.Equal(idx, before.Origins["payments"].Indices()) {
		t.Fatal("the restarted control plane serves other indices")
	}
	if n := len(gw.emitted()); n != 3 {
		t.Fatalf("the gateway's client emitted %d memberships, want still 3: the restart must change nothing it sees", n)
	}

	// The versions continue: the next change is version 3.
	f.setSource(map[string][]string{"payments": addrs, "search": endpoints(12001, 30)})
	f.waitVersion("payments", 3)
	waitfor.Until(t, "the change after the restart to reach the gateway", func() bool { return len(gw.emitted()) == 4 })
	if v := f.version("search"); v != 1 {
		t.Errorf("search at version %d, want 1: it never changed", v)
	}

	// A change while the control plane is down: one endpoint replaced.
	// The restart places the persisted indices, then applies the change
	// by the rules: the joining endpoint takes the leaving one's index,
	// and no other endpoint moves.
	prev := cp.State().Origins["payments"].Indices()
	cp.Close()
	var leaving string
	for a, i := range prev {
		if i == 3 {
			leaving = a
		}
	}
	replaced := append(slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == leaving }), "127.0.0.1:18888")
	f.setSource(map[string][]string{"payments": replaced, "search": endpoints(12001, 30)})
	cp = f.start()
	got := cp.State().Origins["payments"]
	if got.Version != 4 {
		t.Errorf("version %d after a change made while down, want 4", got.Version)
	}
	now := got.Indices()
	for a, i := range now {
		if j, ok := prev[a]; ok && i != j {
			t.Errorf("%s moved %d → %d; no endpoint that stays may move", a, j, i)
		}
	}
	if now["127.0.0.1:18888"] != 3 {
		t.Fatalf("the new endpoint has index %d; want 3, the leaving one's", now["127.0.0.1:18888"])
	}
}

// A second writer on the same state file is refused while the first
// holds it.
func TestOneWriterPerStateFile(t *testing.T) {
	f := newFixture(t, map[string][]string{"payments": endpoints(11001, 3)})
	f.start()
	opts := f.opts
	opts.Listen = "127.0.0.1:0"
	if cp, err := Start(opts); err == nil {
		cp.Close()
		t.Fatal("a second writer started on a state file the first holds")
	} else if IsConfigError(err) {
		t.Fatalf("a held lock is not an input error: %v", err)
	}
}
