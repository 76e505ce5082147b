package balance

import (
	"testing"
	"time"
)

func zoneConfig(local string) Config {
	c := DefaultConfig()
	c.Zone.Local = local
	return c
}

// zoneShares picks 10^5 times and returns the share of each zone.
func zoneShares(t *testing.T, f *fixture, p *Picker) map[string]float64 {
	t.Helper()
	byAddr := shares(t, p, 100_000, 10*time.Millisecond)
	out := map[string]float64{}
	for a, s := range byAddr {
		out[f.o.Endpoint(a).Status().Zone] += s
	}
	return out
}

// TestZoneLocal85: 9 endpoints over zones a, b, c; a gateway in zone a keeps
// 85 % ± 1 pp of its requests in a while a is healthy, spreads the rest
// evenly over b and c, and counts local and remote picks.
func TestZoneLocal85(t *testing.T) {
	f := newFixture(t, zoneConfig("a"), members(9, "a", "b", "c"), 41)
	got := zoneShares(t, f, f.o.NewPicker(nil))
	within(t, "zone a", got["a"], 0.85, 0.01)
	within(t, "zone b", got["b"], 0.075, 0.01)
	within(t, "zone c", got["c"], 0.075, 0.01)
	if f.obs.local+f.obs.remote != 100_000 {
		t.Fatalf("counted %d picks, want 100000", f.obs.local+f.obs.remote)
	}
	within(t, "counted local", float64(f.obs.local)/100_000, got["a"], 1e-9)
}

// TestZoneSpill: when the local zone loses capacity its share shrinks in
// proportion (one of three ejected: 85 % × 2/3) and the rest spills to the
// other zones by their healthy capacity; with no healthy local endpoint
// everything goes remote.
func TestZoneSpill(t *testing.T) {
	ms := members(9, "a", "b", "c") // zone a: 0, 3, 6
	f := newFixture(t, zoneConfig("a"), ms, 42)
	p := f.o.NewPicker(nil)
	failRun(t, f.o, ms[0].Address) // cap 20 % of 9 → 1
	got := zoneShares(t, f, p)
	within(t, "zone a, one third ejected", got["a"], 0.85*2/3, 0.01)
	within(t, "zone b", got["b"], (1-0.85*2/3)/2, 0.01)

	cfg := zoneConfig("a")
	cfg.Outlier.MaxEjectionPercent = 40 // 3 of 9
	cfg.PanicThresholdPercent = 50
	f = newFixture(t, cfg, ms, 43)
	p = f.o.NewPicker(nil)
	for _, i := range []int{0, 3, 6} {
		failRun(t, f.o, ms[i].Address)
	}
	got = zoneShares(t, f, p)
	if got["a"] != 0 {
		t.Errorf("zone a fully ejected still got %.4f", got["a"])
	}
	within(t, "zone b", got["b"], 0.5, 0.01)
	within(t, "zone c", got["c"], 0.5, 0.01)
}

// TestZoneNeedsMinimumOriginSize: an origin smaller than 6 is not
// zone-routed: zone a's 2 of 5 endpoints get 40 %.
func TestZoneNeedsMinimumOriginSize(t *testing.T) {
	f := newFixture(t, zoneConfig("a"), members(5, "a", "b", "c"), 44)
	got := zoneShares(t, f, f.o.NewPicker(nil))
	within(t, "zone a", got["a"], 0.4, 0.01)
}

// TestZoneLoopWithoutLocalEndpoints: a loop whose subset has no local
// endpoint sends everything remote, and says so.
func TestZoneLoopWithoutLocalEndpoints(t *testing.T) {
	ms := members(9, "a", "b", "c")
	f := newFixture(t, zoneConfig("a"), ms, 45)
	p := f.o.NewPicker(addrs(ms[1:3]))
	got := zoneShares(t, f, p)
	if got["a"] != 0 || f.obs.local != 0 || f.obs.remote != 100_000 {
		t.Errorf("zone a share %v, counted local %d remote %d", got["a"], f.obs.local, f.obs.remote)
	}
}
