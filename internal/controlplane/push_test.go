package controlplane

import (
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/waitfor"
)

func members(addrs []string) []discovery.Endpoint {
	out := make([]discovery.Endpoint, len(addrs))
	for i, a := range addrs {
		out[i] = discovery.Endpoint{Address: a, Weight: 1}
	}
	sortEndpoints(out)
	return out
}

// The writer's debounce, on a fake clock: a burst of changes is one
// publish of the last one; a change that undoes itself within the window
// publishes nothing; continuous changes are published at most five
// windows after the first; an origin's first membership is published at
// once; and an origin whose assignment did not change is never pushed.
func TestWriterDebounce(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	logger, _ := testlog.New(slog.LevelDebug)
	m := NewMetrics()
	fs, st, err := openFileStore(filepath.Join(t.TempDir(), "state.json"), logger)
	if err != nil {
		t.Fatal(err)
	}
	w, err := openWriter(fs, st, time.Second, clk, logger, m)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if err := w.start(NewServer("1.", m, logger), nil); err != nil {
		t.Fatal(err)
	}
	pushes := func(o string) int { return int(value(m.Pushes.WithLabelValues(o))) }
	version := func(o string) uint64 {
		if a := w.snapshot().Origins[o]; a != nil {
			return a.Version
		}
		return 0
	}
	z := subset.DefaultSizing
	w.setOrigins([]Origin{{Name: "a", Sizing: z}, {Name: "b", Sizing: z}})
	a := endpoints(15001, 10)
	w.offerMembers("a", members(a))
	w.offerMembers("b", members(endpoints(16001, 10)))
	if version("a") != 1 || version("b") != 1 {
		t.Fatalf("first memberships published at versions %d, %d; want 1, 1 at once", version("a"), version("b"))
	}

	for i := range 3 { // three changes, half a window apart
		w.offerMembers("a", members(append(slices.Clone(a), endpoints(17001, i+1)...)))
		clk.Advance(500 * time.Millisecond)
	}
	if version("a") != 1 {
		t.Fatalf("published within the window (version %d)", version("a"))
	}
	clk.Advance(500 * time.Millisecond)
	if version("a") != 2 || len(w.snapshot().Origins["a"].Endpoints) != 13 {
		t.Fatalf("after the window: version %d with %d endpoints; want 2 with the last change's 13", version("a"), len(w.snapshot().Origins["a"].Endpoints))
	}
	if pushes("a") != 2 || pushes("b") != 1 {
		t.Fatalf("pushes a=%d b=%d, want 2 and 1: b did not change", pushes("a"), pushes("b"))
	}

	// A flap within one window publishes nothing.
	last := w.snapshot().Origins["a"].Endpoints
	lastAddrs := make([]string, len(last))
	for i, e := range last {
		lastAddrs[i] = e.Address
	}
	w.offerMembers("a", members(lastAddrs[1:]))
	clk.Advance(300 * time.Millisecond)
	w.offerMembers("a", members(lastAddrs))
	clk.Advance(2 * time.Second)
	if version("a") != 2 || pushes("a") != 2 {
		t.Fatalf("a flap published: version %d, pushes %d", version("a"), pushes("a"))
	}

	// Changes that never pause are published five windows after the first.
	for i := range 12 {
		w.offerMembers("a", members(append(slices.Clone(lastAddrs), endpoints(18001, i+1)...)))
		clk.Advance(500 * time.Millisecond)
		if i == 8 && version("a") != 2 {
			t.Fatalf("published after %v of continuous changes, before the cap", time.Duration(i+1)*500*time.Millisecond)
		}
		if i == 9 && version("a") != 3 {
			t.Fatalf("not published 5 s after the first of continuous changes (version %d)", version("a"))
		}
	}
	if pushes("b") != 1 {
		t.Fatalf("b pushed %d times; it never changed", pushes("b"))
	}
}

// Over gRPC: a burst of source edits inside the debounce is one
// response, and it holds only the origin that changed — the unchanged
// origin is not sent again.
func TestIncrementalPush(t *testing.T) {
	f := newFixture(t, map[string][]string{"a": endpoints(15001, 30), "b": endpoints(16001, 30)})
	f.opts.Debounce = 300 * time.Millisecond
	cp := f.start()
	ads := dialADS(t, cp.Addr(), "gw-0", []string{"a", "b"}, nil)
	if r := ads.wait(1); len(r.clusters) != 2 {
		t.Fatalf("the first response holds %d clusters, want both", len(r.clusters))
	}
	for i := range 5 {
		f.setSource(map[string][]string{"a": endpoints(15001, 31+i), "b": endpoints(16001, 30)})
		time.Sleep(20 * time.Millisecond)
	}
	r := ads.wait(2)
	if _, ok := r.clusters["b"]; ok || r.clusters["a"] == nil {
		t.Fatalf("the response to a change of a holds %v; want a only", slices.Sorted(mapsKeys(r.clusters)))
	}
	if idx, _ := indicesOf(t, r.clusters["a"]); len(idx) != 35 {
		t.Fatalf("a has %d endpoints, want the last edit's 35", len(idx))
	}
	time.Sleep(500 * time.Millisecond) // longer than a window: nothing more comes
	if n := ads.count(); n != 2 {
		t.Fatalf("%d responses for one burst, want 2 (the first, then one for the burst)", n)
	}
	if f.version("a") != 2 || f.version("b") != 1 {
		t.Fatalf("versions a=%d b=%d, want 2 and 1", f.version("a"), f.version("b"))
	}
	if got := value(cp.Metrics().Pushes.WithLabelValues("b")); got != 1 {
		t.Fatalf("b pushed %v times, want 1", got)
	}
}

// A NACK is logged and counted; the rejected version is not sent to that
// gateway again (it keeps its last accepted one), other gateways are not
// affected, and the next change is a new version that it takes.
func TestNACK(t *testing.T) {
	f := newFixture(t, map[string][]string{"a": endpoints(15001, 10)})
	cp := f.start()
	nacked := ""
	ads := dialADS(t, cp.Addr(), "gw-bad", []string{"a"}, func(resp *discoveryv3.DiscoveryResponse) bool {
		if nacked == "" && len(resp.GetResources()) > 0 && resp.GetVersionInfo() != "" && strings.HasSuffix(resp.GetVersionInfo(), ".2") {
			nacked = resp.GetVersionInfo()
			return true
		}
		return false
	})
	gw := runXDS(t, cp.Addr(), "gw-good", "a")
	ads.wait(1)
	waitfor.Until(t, "the good gateway's first membership", func() bool { return len(gw.emitted()) == 1 })

	f.setSource(map[string][]string{"a": endpoints(15001, 11)})
	ads.wait(2)
	waitfor.Until(t, "the NACK to be counted", func() bool { return value(cp.Metrics().NACKs) == 1 })
	if nacked == "" {
		t.Fatal("the client NACKed nothing")
	}
	waitfor.Until(t, "the NACK to be logged", func() bool {
		return strings.Contains(f.log.String(), "rejected (NACK)") && strings.Contains(f.log.String(), "rejected_version="+nacked)
	})
	if !strings.Contains(f.log.String(), "node=gw-bad") || !strings.Contains(f.log.String(), "clusters=[a]") {
		t.Errorf("the NACK log does not name the node and clusters:\n%s", f.log.String())
	}
	waitfor.Until(t, "the good gateway to take the version the other rejected", func() bool { return len(gw.emitted()) == 2 })
	time.Sleep(300 * time.Millisecond)
	if n := ads.count(); n != 2 {
		t.Fatalf("%d responses: the rejected version was sent again", n)
	}

	f.setSource(map[string][]string{"a": endpoints(15001, 12)})
	r := ads.wait(3)
	if r.version == nacked {
		t.Fatalf("the next change came as the rejected version %s", nacked)
	}
	if idx, _ := indicesOf(t, r.clusters["a"]); len(idx) != 12 {
		t.Fatalf("the next version holds %d endpoints, want 12", len(idx))
	}
	if value(cp.Metrics().NACKs) != 1 {
		t.Fatal("an ACK was counted as a NACK")
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
