package plan

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corput/corput/internal/subset"
)

// seeds is the example: an 800-endpoint origin behind 100 gateways
// with 16 loops each, sized to survive 5 failed endpoints per subset.
var seeds = Input{Origins: 800, Gateways: 100, Loops: 16, Failures: 5, FloorPercent: 80, Concurrency: 64,
	H2Streams: 100, HandshakeMs: 2, Lifetime: 10 * time.Minute, Trials: 10, Seed: 1}

// seedsPlan is the plan for seeds, made once: no-subsetting baselines of
// 1.28 million pools are slow under -race.
var seedsPlan = sync.OnceValues(func() (Plan, error) { return Make(seeds) })

func planSeeds(t *testing.T) Plan {
	t.Helper()
	p, err := seedsPlan()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustMake(t *testing.T, in Input) Plan {
	t.Helper()
	p, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRecommendsTheSmallestSubsetThatKeepsTheFloor(t *testing.T) {
	p := planSeeds(t)
	if !p.Recommended || p.Size != 25 {
		t.Fatalf("recommended subset.size %d (recommended=%v), want 25: (25−5)/25 = 80 %% is the smallest size at the floor", p.Size, p.Recommended)
	}
	c := p.Chosen
	if c.Subsets != 32 || c.SubsetMin != 25 || c.SubsetMax != 25 || c.CapacityLeftPercent != 80 || !c.MeetsFloor {
		t.Fatalf("chosen = %+v, want 32 subsets of 25 keeping 80 %%", c)
	}
	if c.LoopsPerSubsetMin != 50 || c.LoopsPerSubsetMax != 50 {
		t.Fatalf("loops per subset %d–%d, want 1600/32 = 50", c.LoopsPerSubsetMin, c.LoopsPerSubsetMax)
	}
	// Every smaller candidate is below the floor, every larger one above.
	for _, k := range p.Candidates {
		if want := k.Size >= p.Size; k.MeetsFloor != want {
			t.Errorf("candidate %d meets floor = %v, want %v (capacity %.1f %%)", k.Size, k.MeetsFloor, want, k.CapacityLeftPercent)
		}
	}
}

func TestCandidatesAreWhatTheSizingRuleProduces(t *testing.T) {
	p := planSeeds(t)
	wantSizes := []int{800, 400, 200, 100, 50, 25, 13, 7, 4, 2}
	var got []int
	for i, c := range p.Candidates {
		got = append(got, c.Size)
		frontends := seeds.Gateways * seeds.Loops
		if s := subset.FixedSize(c.Size).Subsets(seeds.Origins, frontends, 0); s != c.Subsets {
			t.Errorf("candidate %d: %d subsets, the sizing rule gives %d", c.Size, c.Subsets, s)
		}
		if i > 0 && c.Subsets != 2*p.Candidates[i-1].Subsets {
			t.Errorf("candidate %d: %d subsets after %d, want doubling", c.Size, c.Subsets, p.Candidates[i-1].Subsets)
		}
		if c.SubsetMax-c.SubsetMin > 1 {
			t.Errorf("candidate %d: subsets of %d–%d endpoints differ by more than one", c.Size, c.SubsetMin, c.SubsetMax)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(wantSizes) {
		t.Fatalf("candidate sizes %v, want %v", got, wantSizes)
	}
}

// The connection counts are the ring's own members: a gateway's h2
// connections are the sum of its loops' subset sizes in a ring built here
// independently.
func TestConnectionsCountTheRingsMembers(t *testing.T) {
	p := planSeeds(t)
	ring, err := subset.NewRing(subset.Config{Origin: "elsewhere", Sizing: subset.FixedSize(p.Size),
		Fleet: subset.Fleet{Gateways: seeds.Gateways, Loops: seeds.Loops}}, endpoints(seeds.Origins))
	if err != nil {
		t.Fatal(err)
	}
	snap := ring.Snapshot()
	var fleet, busiest int
	for g := range seeds.Gateways {
		n := 0
		for l := range seeds.Loops {
			n += len(snap.Members(g, l))
		}
		fleet += n
		busiest = max(busiest, n)
	}
	if p.Subsetting.PerGateway.H2 != float64(busiest) || p.Subsetting.Fleet.H2 != float64(fleet) {
		t.Fatalf("h2 connections per gateway %v, fleet %v; the ring's members say %d, %d",
			p.Subsetting.PerGateway.H2, p.Subsetting.Fleet.H2, busiest, fleet)
	}
	// h1: 64 in flight over 25 endpoints needs ceil(64/25) = 3 per pool.
	if p.Subsetting.PerGateway.H1 != 3*float64(busiest) {
		t.Fatalf("h1 connections per gateway %v, want 3 × %d", p.Subsetting.PerGateway.H1, busiest)
	}
	// Without subsetting each of the 16 loops holds all 800: the seed's
	// 12,800 per instance and 1.28 million for the fleet.
	if p.None.PerGateway.H2 != 12800 || p.None.Fleet.H2 != 1_280_000 || p.None.PerGateway.H1 != 12800 {
		t.Fatalf("no subsetting: %+v per gateway, %+v fleet; want 12800 and 1280000", p.None.PerGateway, p.None.Fleet)
	}
	// A sticky origin holds every endpoint in every loop: no subsetting's
	// connections, so many times the subset's.
	if st := p.Sticky; st.PerGateway != p.None.PerGateway || st.Fleet != p.None.Fleet || st.Times.H2 != p.None.Fleet.H2/p.Subsetting.Fleet.H2 || st.Times.H2 < 10 {
		t.Fatalf("sticky cost %+v; want no subsetting's %+v / %+v, ≥ 10× the subset's %+v", st, p.None.PerGateway, p.None.Fleet, p.Subsetting.Fleet)
	}
	var out strings.Builder
	if err := p.WriteText(&out); err != nil || !strings.Contains(out.String(), "sticky origin (balancer.policy maglev or ring_hash)") {
		t.Fatalf("the text does not show the sticky cost (%v):\n%s", err, out.String())
	}
}

// The churn is subset.Compare's — the ringsteady row of a ranking (the
// full five-algorithm ranking `corput subsets` prints is checked against
// the command in cmd/corput; here one comparator keeps the test quick).
func TestChurnIsSubsetCompares(t *testing.T) {
	in := seeds
	in.Trials = 2
	p := mustMake(t, in)
	rep, err := subset.Compare(in.scenario(p.Size), []subset.Algorithm{subset.HashMod, subset.Ringsteady})
	if err != nil {
		t.Fatal(err)
	}
	var ring subset.Result
	for _, r := range rep.Algorithms {
		if r.Name == subset.NameRingsteady {
			ring = r
		}
	}
	ch := p.Subsetting
	if ch.AddEndpoint.Churn != ring.Churn.AddEndpoint || ch.RemoveEndpoint.Churn != ring.Churn.RemoveEndpoint ||
		ch.AddGateway.Churn != ring.Churn.AddGateway || p.Coverage != ring.Coverage {
		t.Fatalf("plan churn %+v / coverage %+v differ from subset.Compare's ringsteady row %+v", ch, p.Coverage, ring)
	}
	if ring.Subsets != p.Chosen.Subsets || ring.SubsetSize != p.Chosen.SubsetMax {
		t.Fatalf("Compare has %d subsets of %d, the plan %d of %d", ring.Subsets, ring.SubsetSize, p.Chosen.Subsets, p.Chosen.SubsetMax)
	}
	// One endpoint added opens pools for exactly the loops of its subset.
	if ch.AddEndpoint.PairsCreated != float64(p.Chosen.LoopsPerSubsetMax) {
		t.Fatalf("add endpoint opened %v pools, want the %d loops of one subset", ch.AddEndpoint.PairsCreated, p.Chosen.LoopsPerSubsetMax)
	}
}

func TestSavingsAreTheDifferenceToNoSubsetting(t *testing.T) {
	p := planSeeds(t)
	s := p.Saved
	if s.DeployHandshakes.H2 != p.None.FleetDeploy.H2-p.Subsetting.FleetDeploy.H2 || s.DeployHandshakes.H2 != 1_240_000 {
		t.Fatalf("deploy handshakes saved %v, want 1280000 − 40000", s.DeployHandshakes.H2)
	}
	if s.DeployCPUSeconds.H2 != 2480 {
		t.Fatalf("deploy CPU saved %v s, want 1240000 × 2 ms = 2480 s", s.DeployCPUSeconds.H2)
	}
	// 1280000 − 40000 connections re-made every 600 s at 2 ms each.
	if got, want := s.RecycleCores.H2, 1_240_000.0/600*0.002; fmt.Sprintf("%.6f", got) != fmt.Sprintf("%.6f", want) {
		t.Fatalf("recycling cores saved %v, want %v", got, want)
	}
	if s.AddEndpointCPUSecond.H2 != (1600-50)*0.002 {
		t.Fatalf("add-endpoint CPU saved %v, want (1600 − 50) × 2 ms", s.AddEndpointCPUSecond.H2)
	}
}

func TestChosenSizeIsMeasuredEvenBelowTheFloor(t *testing.T) {
	in := seeds
	in.Subset = 13
	p := mustMake(t, in)
	if p.Recommended || p.Size != 13 || p.Chosen.MeetsFloor || p.Chosen.Subsets != 64 {
		t.Fatalf("plan for subset.size 13: %+v", p.Chosen)
	}
	var out bytes.Buffer
	if err := p.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "BELOW the 80 % floor") {
		t.Fatalf("text does not warn about the floor:\n%s", out.String())
	}
}

func TestUnreachableFloorRecommendsTheLargestSubset(t *testing.T) {
	p := mustMake(t, Input{Origins: 10, Gateways: 2, Loops: 2, Failures: 5})
	if p.Size != 10 || p.Chosen.MeetsFloor || p.Chosen.CapacityLeftPercent != 50 {
		t.Fatalf("plan = size %d, %+v; want everything (10) at 50 %%", p.Size, p.Chosen)
	}
	var out bytes.Buffer
	if err := p.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no subset size keeps 80 %") {
		t.Fatalf("text does not say the floor is unreachable:\n%s", out.String())
	}
}

func TestTextNamesTheRecommendationAndTheSubsetsCommand(t *testing.T) {
	p := planSeeds(t)
	var out bytes.Buffer
	if err := p.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"recommended subset.size: 25",
		"capacity left when 5 endpoints of a loop's subset fail: 80.0 % (20 of 25)",
		"corput subsets --origins 800 --gateways 100 --loops 16 --size 25 --trials 10 --seed 1",
		"per fleet deploy   2480 / 2320 CPU-seconds",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
}

func TestInvalidInputNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Input)
		flag string
	}{
		{func(in *Input) { in.Origins = 1 }, "--origins"},
		{func(in *Input) { in.Gateways = 0 }, "--gateways"},
		{func(in *Input) { in.Loops = -1 }, "--loops"},
		{func(in *Input) { in.Subset = 1 }, "--subset"},
		{func(in *Input) { in.Subset = 801 }, "--subset"},
		{func(in *Input) { in.Failures = 800 }, "--failures"},
		{func(in *Input) { in.FloorPercent = 101 }, "--floor"},
		{func(in *Input) { in.Concurrency = -2 }, "--concurrency"},
		{func(in *Input) { in.H2Streams = -1 }, "--h2-streams"},
		{func(in *Input) { in.HandshakeMs = -1 }, "--handshake-ms"},
		{func(in *Input) { in.Lifetime = -time.Second }, "--lifetime"},
	} {
		in := seeds
		tc.mod(&in)
		_, err := Make(in)
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s: error %v does not name the flag", tc.flag, err)
		}
	}
}

func BenchmarkMake(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Make(seeds); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRollout: one gateway replaced. A StatefulSet's new pod opens its
// position's pools (the fleet's pairs ÷ G) and nobody else moves. Through
// the control plane, the gateways that stay open nothing while loops ×
// size caps no subset count, G+1 included (800 endpoints, 10 × 16, 64
// subsets ≤ 160 frontends); where the cap binds (400 endpoints of 50 want
// 8 subsets, 3 × 2 loops give 6 frontends, so 4 subsets, and 8 at the
// surge), the staying gateways open pools at both resizes. The new pod
// opens at least its own position's pools, plus those its move adds.
func TestRollout(t *testing.T) {
	for _, c := range []struct {
		in         Input
		othersZero bool
	}{
		{Input{Origins: 800, Gateways: 10, Loops: 16, Subset: 13}, true},
		{Input{Origins: 400, Gateways: 3, Loops: 2, Subset: 50}, false},
	} {
		p, err := Make(c.in)
		if err != nil {
			t.Fatal(err)
		}
		r := p.Rollout
		pl, err := placement(p.Input, subset.Ringsteady, endpoints(c.in.Origins), p.Size)
		if err != nil {
			t.Fatal(err)
		}
		if want := float64(pl.pairs) / float64(c.in.Gateways); r.StatefulSetNew != want {
			t.Errorf("%+v: a StatefulSet's new pod opens %v pools, want its position's %v", c.in, r.StatefulSetNew, want)
		}
		if r.ControlPlaneNew < r.StatefulSetNew {
			t.Errorf("%+v: through the control plane the new pod opens %v pools, fewer than its position holds (%v)", c.in, r.ControlPlaneNew, r.StatefulSetNew)
		}
		if (r.ControlPlaneOthers == 0) != c.othersZero {
			t.Errorf("%+v: the staying gateways open %v pools; want 0: %v", c.in, r.ControlPlaneOthers, c.othersZero)
		}
		t.Logf("%d × %d over %d, subset.size %d: StatefulSet %v new; control plane %v new, %v others",
			c.in.Gateways, c.in.Loops, c.in.Origins, p.Size, r.StatefulSetNew, r.ControlPlaneNew, r.ControlPlaneOthers)
	}
}

// TestHealthProbesScaleWithTheSubset: 100 gateways × 16 loops × 800
// endpoints at a 5 s interval — without subsetting every gateway probes
// every endpoint (100 / 5 s = 20 per endpoint per second); with the
// planned subsets each endpoint is probed only by the gateways that hold
// it, once per gateway. No interval, no probes.
func TestHealthProbesScaleWithTheSubset(t *testing.T) {
	in := Defaults
	in.Origins, in.Gateways, in.Loops, in.Trials = 800, 100, 16, 2
	p, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	sub, none := p.Subsetting.Probes, p.None.Probes
	t.Logf("probes per endpoint per second at 5 s: subset.size %d mean %.2f (max %.2f), none %.2f; fleet %.0f vs %.0f per s",
		p.Size, sub.PerEndpointMean, sub.PerEndpointMax, none.PerEndpointMean, sub.Fleet, none.Fleet)
	if none.PerEndpointMean != 20 || none.PerEndpointMax != 20 || none.Fleet != 16000 {
		t.Fatalf("no subsetting: %+v; want 20 per endpoint per second, 16000 fleet-wide", none)
	}
	if sub.PerEndpointMean <= 0 || sub.PerEndpointMean > none.PerEndpointMean/2 || sub.PerEndpointMax > none.PerEndpointMax {
		t.Fatalf("subsetting: %+v; want under half of no subsetting's %+v", sub, none)
	}
	// A gateway probes an endpoint once, however many of its loops hold
	// it: never more than per loop.
	if sub.PerEndpointMean > sub.PerLoopMean {
		t.Fatalf("per gateway %.2f above per loop %.2f", sub.PerEndpointMean, sub.PerLoopMean)
	}
	in.HealthInterval = 0
	if p, err = Make(in); err != nil || p.Subsetting.Probes != (Probes{}) {
		t.Fatalf("no health checks: %+v, %v", p.Subsetting.Probes, err)
	}
}
