package balance

import (
	"testing"
	"time"
)

// TestZoneLoadSpill: a gateway in zone a keeps 85 % local while a is idle;
// once every endpoint of a reports a utilization above 80 %, a keeps only
// its share of the capacity (a third of 9 endpoints) and the rest spills to
// b and c; reports under 80 % bring the 85 % back, and so does the expiry
// of the reports (LoadTTL) without any new one.
func TestZoneLoadSpill(t *testing.T) {
	ms := members(9, "a", "b", "c") // zone a: 0, 3, 6
	f := newFixture(t, zoneConfig("a"), ms, 43)
	p := f.o.NewPicker(nil)
	report := func(util float64, eps ...int) {
		for _, i := range eps {
			f.o.Endpoint(ms[i].Address).ReportLoad(util)
		}
	}
	within(t, "zone a before", zoneShares(t, f, p)["a"], 0.85, 0.01)

	report(0.9, 0, 3)
	within(t, "zone a, two of three loaded", zoneShares(t, f, p)["a"], 0.85, 0.01)
	report(0.9, 6)
	if !f.o.ZoneSpilling() {
		t.Fatal("every endpoint of zone a reports 0.9, and the origin does not spill")
	}
	got := zoneShares(t, f, p)
	within(t, "zone a, all loaded", got["a"], 1.0/3, 0.01)
	within(t, "zone b, a loaded", got["b"], 1.0/3, 0.01)

	report(0.5, 3)
	within(t, "zone a, one back under 80 %", zoneShares(t, f, p)["a"], 0.85, 0.01)

	report(0.95, 3)
	within(t, "zone a, loaded again", zoneShares(t, f, p)["a"], 1.0/3, 0.01)
	f.clk.Advance(LoadTTL)
	if f.o.ZoneSpilling() {
		t.Fatal("the load reports expired, and the origin still spills")
	}
	within(t, "zone a, reports expired", zoneShares(t, f, p)["a"], 0.85, 0.01)
}

// TestPenalizeZone: a down-weighted zone gets PenaltyFactor of its share
// (1 % of a third), the others share the rest, and lifting the penalty
// restores the even spread; a penalty that would leave nothing else is
// ignored.
func TestPenalizeZone(t *testing.T) {
	ms := members(9, "a", "b", "c")
	f := newFixture(t, DefaultConfig(), ms, 44)
	p := f.o.NewPicker(nil)
	f.o.PenalizeZone("b")
	got := zoneShares(t, f, p)
	within(t, "zone b down-weighted", got["b"], PenaltyFactor/3, 0.001)
	within(t, "zone a", got["a"], (1-PenaltyFactor/3)/2, 0.01)
	f.o.PenalizeZone("")
	within(t, "zone b lifted", zoneShares(t, f, p)["b"], 1.0/3, 0.01)

	one := newFixture(t, DefaultConfig(), members(3, "a"), 45)
	one.o.PenalizeZone("a")
	if got := zoneShares(t, one, one.o.NewPicker(nil))["a"]; got != 1 {
		t.Fatalf("the only zone, penalized, gets %.3f of the picks, want all", got)
	}
}

// TestZoneLatencies: the mean over each zone's endpoints of the higher of
// their Peak EWMA and typical latency.
func TestZoneLatencies(t *testing.T) {
	ms := members(4, "a", "b")
	f := newFixture(t, DefaultConfig(), ms, 46)
	for i, m := range ms {
		d := 40 * time.Millisecond // above the default RTT: the first sample is the estimate
		if i%2 == 1 {
			d = 90 * time.Millisecond
		}
		f.o.Endpoint(m.Address).Done(d, Success)
		f.o.Endpoint(m.Address).active.Add(1) // Done without a Pick
	}
	lat := f.o.ZoneLatencies()
	if lat["a"] != 40*time.Millisecond || lat["b"] != 90*time.Millisecond {
		t.Fatalf("zone latencies %v, want a 40ms, b 90ms", lat)
	}
}

// TestZoneLatenciesPerUnitOfCostUnderLeastWork: under least_work a zone
// is compared by latency per unit of cost, not by the mean of the mix it
// was sent. Zone b is 3× slow but answers mostly light requests (60 ms,
// cost 1) and a few heavy ones (180 ms, cost 3); zone a answers mostly
// heavy ones (60 ms) at the usual speed. Then both idle for a minute, as a
// down-weighted zone does between its probes, and the Peak EWMA estimates
// decay: by the mix's mean b reads 72 ms against a's 56 (1.3×, under the
// SLO guard's 1.5 — the drill's zone c came out of its down-weight that
// way); per unit of cost it reads 60 against 20.
func TestZoneLatenciesPerUnitOfCostUnderLeastWork(t *testing.T) {
	ms := members(2, "a", "b")
	f := newFixture(t, policyConfig(LeastWork), ms, 47)
	pa, pb := f.o.NewPicker([]string{ms[0].Address}), f.o.NewPicker([]string{ms[1].Address})
	serve := func(p *Picker, cost float64, d time.Duration) {
		ep, tk, _ := p.PickCost(cost)
		f.clk.Advance(time.Millisecond)
		ep.End(tk, d, Success)
	}
	for i := range 200 {
		if i%10 == 0 {
			serve(pa, 1, 20*time.Millisecond)
			serve(pb, 3, 180*time.Millisecond)
		} else {
			serve(pa, 3, 60*time.Millisecond)
			serve(pb, 1, 60*time.Millisecond)
		}
	}
	f.clk.Advance(time.Minute)
	lat := f.o.ZoneLatencies()
	if r := float64(lat["b"]) / float64(lat["a"]); r < 2.5 || r > 3.5 {
		t.Fatalf("zone latencies %v: b/a %.2f, want about 3 (latency per unit of cost)", lat, r)
	}
}
