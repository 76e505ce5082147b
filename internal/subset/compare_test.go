package subset

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestCoverageAndChurnByHand(t *testing.T) {
	// Endpoints 0..3; frontend 0 uses {0,1}, frontend 1 uses {0,2}.
	// Coverage: 2,1,1,0 → mean 1, max 2, min 0.
	before := assignment{{0, 1}, {0, 2}}
	c := coverage(before, []int32{0, 1, 2, 3}, 4)
	if c.MaxOverMean != 2 || c.MinOverMean != 0 || math.Abs(c.CV-math.Sqrt(0.5)) > 1e-12 {
		t.Fatalf("coverage = %+v", c)
	}
	// After: frontend 0 unchanged, frontend 1 swaps 2 for 3, frontend 2
	// appears with {1}: 2 created + 1 removed + 1 created.
	after := assignment{{1, 0}, {0, 3}, {1}}
	got := churn(before, after, 4)
	want := Churn{PairsChanged: 3, PairsCreated: 2, PairsRemoved: 1, Fraction: 0.75, FrontendsTouched: 2}
	if got != want {
		t.Fatalf("churn = %+v, want %+v", got, want)
	}
	if n := distinctSubsets(after); n != 3 {
		t.Fatalf("distinct subsets = %d, want 3", n)
	}
	if n := distinctSubsets(assignment{{1, 2}, {2, 1}}); n != 1 {
		t.Fatalf("distinct subsets of two equal sets = %d, want 1", n)
	}
}

// The "must show", measured on 800 endpoints × 100 gateways × 16
// loops: the ranking the seed predicts.
func TestCompareMustShow(t *testing.T) {
	sc := Scenario{Endpoints: 800, Fleet: Fleet{Gateways: 100, Loops: 16}, Trials: 3, Seed: 1}
	rep, err := Compare(sc, Algorithms())
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Result{}
	for _, r := range rep.Algorithms {
		by[r.Name] = r
	}
	ring := by[NameRingsteady]
	if rep.Algorithms[0].Name != NameRingsteady {
		t.Errorf("ranked first: %s, want ringsteady", rep.Algorithms[0].Name)
	}
	if ring.Subsets != 16 || ring.SubsetSize != 50 {
		t.Errorf("ringsteady: %d subsets of %d, want 16 of 50", ring.Subsets, ring.SubsetSize)
	}
	if ring.Coverage.MaxOverMean > 1.05 {
		t.Errorf("ringsteady coverage max/mean %.3f > 1.05", ring.Coverage.MaxOverMean)
	}
	// One added endpoint touches only the frontends of one subset: F/S = 100.
	if add := ring.Churn.AddEndpoint; math.Abs(add.FrontendsTouched-100) > 1e-9 || math.Abs(add.PairsChanged-100) > 1e-9 {
		t.Errorf("ringsteady add_endpoint: %+v, want 100 frontends and 100 pairs", add)
	}
	if rm := ring.Churn.RemoveEndpoint; rm.FrontendsTouched > 200 {
		t.Errorf("ringsteady remove_endpoint touched %.0f frontends, more than two subsets' 200", rm.FrontendsTouched)
	}
	if r := by[NameRandom].Coverage.MaxOverMean; r < ring.Coverage.MaxOverMean+0.15 {
		t.Errorf("random coverage max/mean %.3f not clearly above ringsteady's %.3f", r, ring.Coverage.MaxOverMean)
	}
	if f := by[NameHashMod].Churn.AddEndpoint.Fraction; f < 0.5 {
		t.Errorf("hashmod add_endpoint fraction %.3f < 0.5", f)
	}
	if by[NameSRE].Coverage.MaxOverMean > 1.05 || by[NameHashMod].Coverage.MaxOverMean > 1.05 {
		t.Errorf("deterministic comparators unbalanced: sre %.3f hashmod %.3f",
			by[NameSRE].Coverage.MaxOverMean, by[NameHashMod].Coverage.MaxOverMean)
	}
	for i, r := range rep.Algorithms {
		if r.Rank != i+1 || (i > 0 && r.Score < rep.Algorithms[i-1].Score) {
			t.Errorf("rank %d: %s score %.4f out of order", r.Rank, r.Name, r.Score)
		}
	}
}

// The JSON carries exactly the shape (more fields are allowed).
func TestReportJSONShape(t *testing.T) {
	rep, err := Compare(Scenario{Endpoints: 60, Fleet: Fleet{Gateways: 3, Loops: 4}, Trials: 1, Seed: 2}, Algorithms())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Origins, Gateways, Loops *int
		Algorithms               []struct {
			Name       *string
			Subsets    *int
			SubsetSize *int `json:"subset_size"`
			Coverage   struct {
				MaxOverMean *float64 `json:"max_over_mean"`
				MinOverMean *float64 `json:"min_over_mean"`
				CV          *float64 `json:"cv"`
			}
			Churn map[string]struct {
				PairsChanged     *float64 `json:"pairs_changed"`
				Fraction         *float64
				FrontendsTouched *float64 `json:"frontends_touched"`
			}
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Origins == nil || *doc.Origins != 60 || doc.Gateways == nil || doc.Loops == nil || len(doc.Algorithms) != 5 {
		t.Fatalf("top level wrong: %s", raw)
	}
	for _, a := range doc.Algorithms {
		if a.Name == nil || a.Subsets == nil || a.SubsetSize == nil || a.Coverage.MaxOverMean == nil ||
			a.Coverage.MinOverMean == nil || a.Coverage.CV == nil {
			t.Fatalf("algorithm fields missing: %s", raw)
		}
		for _, ev := range []string{"add_endpoint", "remove_endpoint", "add_gateway", "subset_count_change"} {
			c, ok := a.Churn[ev]
			if !ok || c.PairsChanged == nil || c.Fraction == nil || c.FrontendsTouched == nil {
				t.Fatalf("%s: churn %s missing: %s", *a.Name, ev, raw)
			}
		}
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "ringsteady") || !strings.Contains(table.String(), "score") {
		t.Fatalf("table:\n%s", table.String())
	}
}

func TestCompareDeterministic(t *testing.T) {
	sc := Scenario{Endpoints: 100, Fleet: Fleet{Gateways: 5, Loops: 4}, Trials: 2, Seed: 7}
	a, _ := Compare(sc, Algorithms())
	b, _ := Compare(sc, Algorithms())
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Fatal("the same seed gave two different reports")
	}
}

func TestScenarioValidate(t *testing.T) {
	ok := Scenario{Endpoints: 800, Fleet: Fleet{Gateways: 100, Loops: 16}, Trials: 1}
	for _, c := range []struct {
		mut  func(*Scenario)
		flag string
	}{
		{func(s *Scenario) { s.Endpoints = 1 }, "--origins"},
		{func(s *Scenario) { s.Fleet.Gateways = 0 }, "--gateways"},
		{func(s *Scenario) { s.Fleet.Loops = -1 }, "--loops"},
		{func(s *Scenario) { s.Size = 1 }, "--size"},
		{func(s *Scenario) { s.Trials = 0 }, "--trials"},
		{func(s *Scenario) { s.Endpoints, s.Fleet.Gateways = 100000, 10000 }, "lower one"},
	} {
		sc := ok
		c.mut(&sc)
		if _, err := Compare(sc, Algorithms()); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%+v: error %v, want one naming %s", sc, err, c.flag)
		}
	}
}
