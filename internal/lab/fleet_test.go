package lab

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// tinyFleet is the fleet experiment at docs/discovery.md's size: 8
// gateways × 2 loops in front of 200 endpoints (4 subsets of 50, more
// than the loops), 30 % of the gateways restarting during a deploy of
// every endpoint; requests are counted after the last batch's slow start.
func tinyFleet(seed uint64) Scenario {
	sc := DefaultScenario(ScaleSmall, seed)
	sc.Run = []string{ExpFleet}
	sc.FleetRings = FleetRingsScenario{
		Gateways: 8, Loops: 2, Endpoints: 200, RatePerGateway: 200,
		Variants: []FleetVariant{{}}, Restart: 0.3,
		DeployAt: 2 * time.Second, DeployBatch: 20, DeployEvery: time.Second,
		MeasureFrom: 75 * time.Second, Duration: 100 * time.Second, Limit: 1.05,
	}
	return sc
}

func TestFleetSharedIndicesExact(t *testing.T) {
	const seed = 1 // a seed whose local placement is uneven (most are)
	res, err := Simulate(context.Background(), tinyFleet(seed), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	local, shared := res.fleetRing(FleetVariant{}, placementLocal), res.fleetRing(FleetVariant{}, placementShared)
	if local == nil || shared == nil {
		t.Fatalf("runs: %+v", res.FleetRings)
	}
	for _, x := range []*FleetRingsResult{local, shared} {
		if x.Restarted != 2 || x.Subsets != 4 || x.Endpoints != 200 || len(x.CoverageSorted) != 200 {
			t.Errorf("%s: %d restarted, %d subsets, %d endpoints (%d counted)", x.Placement, x.Restarted, x.Subsets, x.Endpoints, len(x.CoverageSorted))
		}
		if len(x.CoverageOverTime) != 100 || x.WindowRequests == 0 || x.Errors != 0 || x.Shed != 0 {
			t.Errorf("%s: %d coverage samples, %d window requests, %d errors, %d shed", x.Placement, len(x.CoverageOverTime), x.WindowRequests, x.Errors, x.Shed)
		}
		if x.CoverageMean != 4 { // 16 frontends over 4 subsets
			t.Errorf("%s: mean coverage %v, want 4", x.Placement, x.CoverageMean)
		}
	}
	if shared.CoverageMin != shared.CoverageMax || shared.Rings != 1 || shared.CoverageMaxOver != 1 {
		t.Errorf("shared indices: coverage %d–%d over %d distinct rings, want exactly equal on one ring", shared.CoverageMin, shared.CoverageMax, shared.Rings)
	}
	for i, v := range shared.CoverageOverTime {
		if v != 1 {
			t.Fatalf("shared indices: coverage max/mean %v at second %d", v, i+1)
		}
	}
	if local.CoverageMin == local.CoverageMax || local.Rings < 2 {
		t.Errorf("local placement: coverage %d–%d over %d rings; seed %d should leave it uneven", local.CoverageMin, local.CoverageMax, local.Rings, seed)
	}
	if local.RequestsMaxOver <= shared.RequestsMaxOver {
		t.Errorf("requests max/mean: local %v, shared %v: the uneven coverage should show in the load", local.RequestsMaxOver, shared.RequestsMaxOver)
	}
}

// TestFleetChecksFail feeds the checks results that break them.
func TestFleetChecksFail(t *testing.T) {
	sc := tinyFleet(1)
	sc.FleetRings.Variants = []FleetVariant{{}, {SubsetSize: 25}}
	good := func(size int, placement string) FleetRingsResult {
		return FleetRingsResult{Placement: placement, SubsetSize: size, Deploy: deployReplace, Subsets: 4, Endpoints: 200, CoverageMaxOver: 1, RequestsMaxOver: 1.02}
	}
	local := good(25, placementLocal)
	local.CoverageMaxOver, local.RequestsMaxOver = 1.4, 1.45
	all := []FleetRingsResult{good(0, placementLocal), good(0, placementShared), local, good(25, placementShared)}
	check := func(rs []FleetRingsResult) []Check {
		r := &Results{Scenario: sc, FleetRings: rs}
		r.evaluate()
		var out []Check
		for _, c := range r.Checks {
			if strings.HasPrefix(c.Name, "fleet: ") {
				out = append(out, c)
			}
		}
		if len(out) != 2 {
			t.Fatalf("%d fleet checks, want 2", len(out))
		}
		return out
	}
	for _, c := range check(all) {
		if c.Status() != "PASS" || !strings.Contains(c.Detail, "(local 1.4") {
			t.Errorf("good results: %s %s: %s", c.Status(), c.Name, c.Detail)
		}
	}
	badCov := append([]FleetRingsResult(nil), all...)
	badCov[3].CoverageMaxOver = 1.051
	if cs := check(badCov); cs[0].Status() != "FAIL" || cs[1].Status() != "PASS" {
		t.Errorf("shared coverage 1.051: %s / %s", cs[0].Status(), cs[1].Status())
	}
	badReq := append([]FleetRingsResult(nil), all...)
	badReq[1].RequestsMaxOver = 1.2
	if cs := check(badReq); cs[0].Status() != "PASS" || cs[1].Status() != "FAIL" {
		t.Errorf("shared requests 1.2: %s / %s", cs[0].Status(), cs[1].Status())
	}
	if cs := check(all[:3]); cs[0].Status() != "FAIL" || !strings.Contains(cs[0].Detail, "no shared run") {
		t.Errorf("a sizing without its shared run: %s: %s", cs[0].Status(), cs[0].Detail)
	}
	r := &Results{Scenario: sc}
	r.evaluate()
	if c := r.Checks[len(r.Checks)-1]; c.Status() != "SKIP" || !r.Passed() {
		t.Errorf("fleet not run: %s %s", c.Status(), c.Detail)
	}
}

func TestFleetRestartPlan(t *testing.T) {
	a := restartPlan(3, 100, 0.3, 30*time.Second, 80*time.Second)
	if len(a) != 30 {
		t.Fatalf("%d restarts of 100 gateways at 30 %%", len(a))
	}
	for g, at := range a {
		if g < 0 || g >= 100 || at < 30*time.Second || at >= 80*time.Second {
			t.Errorf("gateway %d restarts at %v", g, at)
		}
	}
	b := restartPlan(3, 100, 0.3, 30*time.Second, 80*time.Second)
	for g, at := range a {
		if b[g] != at {
			t.Fatalf("the same seed planned gateway %d at %v and %v", g, at, b[g])
		}
	}
	if len(restartPlan(3, 1, 0.3, 0, time.Second)) != 0 {
		t.Error("30 % of one gateway is none")
	}
}

func TestFleetScenario(t *testing.T) {
	full := DefaultScenario(ScaleFull, 1)
	if fr := full.FleetRings; fr.Gateways != 100 || fr.Loops != 16 || fr.Endpoints != 800 || fr.Restart != 0.3 || fr.Variants[0] != (FleetVariant{}) {
		t.Fatalf("full scale fleet: %+v", fr)
	}
	if err := full.Select("fleet"); err != nil || !full.Runs(ExpFleet) || full.Runs(ExpSteps) {
		t.Fatalf("select fleet: %v, runs %v", err, full.Run)
	}
	bad := DefaultScenario(ScaleSmall, 1)
	bad.FleetRings.Variants, bad.FleetRings.MeasureFrom, bad.FleetRings.Restart = []FleetVariant{{SubsetSize: 1, Surge: true}}, time.Second, 2
	bad.FleetRings.SurgeOverlap = bad.FleetRings.DeployEvery
	err := bad.Validate()
	for _, want := range []string{"fleet_rings.variants", "deploy over before measure_from", "restart_share", "surge_overlap"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want it to name %s", err, want)
		}
	}
	if got := sizingLabel(25, 32, 800); got != "32 subsets of 25 (subset.size 25)" {
		t.Errorf("sizing label %q", got)
	}
}

// TestFleetSurgeSplitsSubsetCounts: in a surge deploy the endpoint count
// rises by a batch during each step. A gateway that restarts then sizes
// its ring afresh for the larger count and keeps that count, by
// hysteresis, once the old batch has left, while the others keep theirs:
// with local placement the fleet ends on two subset counts; with shared
// indices every gateway takes the control plane's.
func TestFleetSurgeSplitsSubsetCounts(t *testing.T) {
	const seed = 1 // a seed where a restart falls inside a surge
	sc := tinyFleet(seed)
	sc.FleetRings.Variants = []FleetVariant{{Surge: true}}
	sc.FleetRings.SurgeOverlap = 500 * time.Millisecond
	res, err := Simulate(context.Background(), sc, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	local, shared := res.fleetRing(FleetVariant{Surge: true}, placementLocal), res.fleetRing(FleetVariant{Surge: true}, placementShared)
	if local == nil || shared == nil {
		t.Fatalf("runs: %+v", res.FleetRings)
	}
	if !slices.Equal(local.SubsetCounts, []int{4, 8}) || local.CoverageMin == local.CoverageMax {
		t.Errorf("local placement: subset counts %v, coverage %d–%d; want 4 and 8 (a gateway restarted at 220 endpoints), uneven", local.SubsetCounts, local.CoverageMin, local.CoverageMax)
	}
	if !slices.Equal(shared.SubsetCounts, []int{4}) || shared.CoverageMin != shared.CoverageMax || shared.Rings != 1 {
		t.Errorf("shared indices: subset counts %v, coverage %d–%d over %d rings; want one ring of 4 subsets, exact", shared.SubsetCounts, shared.CoverageMin, shared.CoverageMax, shared.Rings)
	}
	if local.Endpoints != 200 || shared.Endpoints != 200 {
		t.Errorf("the surge left %d and %d endpoints, want 200", local.Endpoints, shared.Endpoints)
	}
}
