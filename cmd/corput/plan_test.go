package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corput/corput/internal/plan"
	"github.com/corput/corput/internal/subset"
)

// The issue's check: `corput plan --origins 800 --gateways 100 --loops 16
// --failures 5` recommends a subset size, and its figures agree with what
// `corput subsets` prints for the same inputs at that size. Two trials keep
// the full five-algorithm comparison quick under -race; the ringsteady
// figures do not depend on the trial count.
func TestPlanAgreesWithSubsets(t *testing.T) {
	common := []string{"--origins", "800", "--gateways", "100", "--loops", "16", "--trials", "2", "--json"}
	code, out, errOut := runCheckCLI(append([]string{"plan", "--failures", "5"}, common...)...)
	if code != 0 {
		t.Fatalf("plan exit %d: %s", code, errOut)
	}
	var p plan.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan --json: %v\n%s", err, out)
	}
	if !p.Recommended || p.Size != 25 {
		t.Fatalf("plan recommends subset.size %d (recommended=%v), want 25", p.Size, p.Recommended)
	}
	code, out, errOut = runCheckCLI(append([]string{"subsets", "--size", "25"}, common...)...)
	if code != 0 {
		t.Fatalf("subsets exit %d: %s", code, errOut)
	}
	var rep subset.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("subsets --json: %v\n%s", err, out)
	}
	var ring *subset.Result
	for i := range rep.Algorithms {
		if rep.Algorithms[i].Name == subset.NameRingsteady {
			ring = &rep.Algorithms[i]
		}
	}
	if ring == nil {
		t.Fatalf("subsets printed no ringsteady row:\n%s", out)
	}
	if ring.Subsets != p.Chosen.Subsets || ring.SubsetSize != p.Chosen.SubsetMax {
		t.Errorf("subsets: %d subsets of %d; plan: %d of %d", ring.Subsets, ring.SubsetSize, p.Chosen.Subsets, p.Chosen.SubsetMax)
	}
	if ring.Coverage != p.Coverage {
		t.Errorf("coverage: subsets %+v, plan %+v", ring.Coverage, p.Coverage)
	}
	for _, c := range []struct {
		name       string
		plan, subs subset.Churn
	}{
		{"add_endpoint", p.Subsetting.AddEndpoint.Churn, ring.Churn.AddEndpoint},
		{"remove_endpoint", p.Subsetting.RemoveEndpoint.Churn, ring.Churn.RemoveEndpoint},
		{"add_gateway", p.Subsetting.AddGateway.Churn, ring.Churn.AddGateway},
	} {
		if c.plan != c.subs {
			t.Errorf("%s churn: plan %+v, subsets %+v", c.name, c.plan, c.subs)
		}
	}
	if !strings.Contains(p.SameAs, "--size 25 --trials 2 --seed 1") {
		t.Errorf("plan names %q as its source, not the subsets command run here", p.SameAs)
	}
}

func TestPlanUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--gateways", "2", "--loops", "2"}, "--origins is required"},
		{[]string{"plan", "--origins", "10", "--gateways", "2", "--loops", "2", "--failures", "10"}, "--failures 10"},
		{[]string{"plan", "--origins", "10", "--gateways", "2", "--loops", "2", "extra"}, `unexpected argument "extra"`},
	} {
		code, _, errOut := runCheckCLI(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
