package balance

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/workload"
)

func policyConfig(p Policy) Config {
	c := DefaultConfig()
	c.Policy = p
	return c
}

// pickSequence returns the indices (last address octet) of n picks, each
// request ended at once; the clock moves 1 ms per pick.
func pickSequence(f *fixture, p *Picker, n int) []int {
	seq := make([]int, n)
	for i := range seq {
		ep, err := p.Pick()
		if err != nil {
			f.t.Fatal(err)
		}
		fmt.Sscanf(ep.Address(), "10.0.0.%d:80", &seq[i])
		f.clk.Advance(time.Millisecond)
		ep.Done(10*time.Millisecond, Success)
	}
	return seq
}

// TestExactSequences pins each policy's choices for a seed: the same seed and
// the same clock give the same picks, and a change of algorithm shows up
// here. Weights are 1, 2, 3, 4 so the weighted paths run too.
func TestExactSequences(t *testing.T) {
	want := map[Policy][]int{
		// EDF on weight 1..4: ties go to the lower index.
		RoundRobin:   {3, 2, 1, 3, 2, 3, 0, 1, 2, 3, 3, 2, 1, 3, 2, 3},
		LeastRequest: {3, 2, 1, 3, 2, 3, 0, 1, 2, 3, 3, 2, 1, 3, 2, 3},
		Random:       {3, 0, 2, 2, 0, 3, 3, 3, 2, 3, 2, 2, 3, 1, 3, 1},
		// Nothing stays in flight, so the heavier of the two sampled
		// endpoints always costs less: 0 (weight 1) can never win.
		P2C: {3, 3, 1, 2, 2, 1, 3, 3, 2, 3, 3, 3, 3, 2, 3, 3},
		// The first candidate is the rotation's (from a random start), the
		// second random; equal latencies are a tie, so the lower
		// (active+1)/weight wins: 0 still never does.
		PeakEWMA: {3, 2, 3, 3, 1, 2, 3, 1, 3, 2, 3, 1, 1, 3, 3, 2},
		// The same candidates and peak_ewma's choices: a tie compares
		// (work + cost) / weight, which with nothing in flight orders as
		// (active+1)/weight does; an endpoint that has not answered ties
		// with any other.
		LeastWork: {3, 2, 3, 3, 1, 2, 3, 1, 3, 2, 3, 1, 1, 3, 3, 2},
	}
	for _, pol := range Policies() {
		t.Run(string(pol), func(t *testing.T) {
			ms := members(4)
			for i := range ms {
				ms[i].Weight = i + 1
			}
			run := func() []int {
				f := newFixture(t, policyConfig(pol), ms, 42)
				return pickSequence(f, f.o.NewPicker(nil), 16)
			}
			got := run()
			if again := run(); !slices.Equal(got, again) {
				t.Fatalf("same seed, different picks:\n%v\n%v", got, again)
			}
			if !slices.Equal(got, want[pol]) {
				t.Errorf("picks %v, want %v", got, want[pol])
			}
		})
	}
}

// TestEqualEndpointsShareEvenly: with 5 equal endpoints under the seed's
// 70/30 mix (2000 req/s, about 20 requests in flight per endpoint) every
// policy gives each endpoint 20 % ± 1 percentage point of 10^5 picks.
func TestEqualEndpointsShareEvenly(t *testing.T) {
	for _, pol := range Policies() {
		t.Run(string(pol), func(t *testing.T) {
			ms := members(5)
			f := newFixture(t, policyConfig(pol), ms, 7)
			s := &sim{clk: f.clk, r: rng.New(8), p: f.o.NewPicker(nil), rate: 2000, mix: workload.Default(),
				latency: func(_ *Endpoint, base time.Duration) time.Duration { return base }}
			got := s.run(epoch.Add(50 * time.Second))
			n := total(got)
			if n < 95_000 {
				t.Fatalf("only %d picks", n)
			}
			for _, m := range ms {
				within(t, m.Address, float64(got[m.Address])/float64(n), 0.2, 0.01)
			}
		})
	}
}

// TestP2CNeverPicksBusier: of two distinct endpoints p2c (and least_request
// with equal weights) always takes the one with fewer requests in flight;
// when they are level either may win, each about half the time.
func TestP2CNeverPicksBusier(t *testing.T) {
	for _, pol := range []Policy{P2C, LeastRequest} {
		t.Run(string(pol), func(t *testing.T) {
			ms := members(2)
			f := newFixture(t, policyConfig(pol), ms, 9)
			p := f.o.NewPicker(nil)
			a, b := f.o.Endpoint(ms[0].Address), f.o.Endpoint(ms[1].Address)
			wins := 0
			var held []*Endpoint
			for i := range 10_000 {
				ep, _ := p.Pick()
				if ep.Active()-1 > other(ep, a, b).Active() {
					t.Fatalf("pick %d: chose %s with %d in flight over %d", i, ep.Address(), ep.Active()-1, other(ep, a, b).Active())
				}
				if ep.Active()-1 == other(ep, a, b).Active() && ep == a {
					wins++
				}
				held = append(held, ep)
				if len(held) > 5 { // keep a varying number in flight
					k := i % len(held)
					held[k].Done(time.Millisecond, Success)
					held = slices.Delete(held, k, k+1)
				}
			}
			if wins == 0 {
				t.Error("ties always went to the second endpoint: no random tie-break")
			}
		})
	}
}

func other(ep, a, b *Endpoint) *Endpoint {
	if ep == a {
		return b
	}
	return a
}

// TestChoicesCoveringAllPickTheLeastLoaded: when choices ≥ the number of
// candidates every candidate is compared, so the least loaded always wins.
func TestChoicesCoveringAllPickTheLeastLoaded(t *testing.T) {
	cfg := policyConfig(P2C)
	cfg.Choices = 8
	ms := members(6)
	f := newFixture(t, cfg, ms, 11)
	p := f.o.NewPicker(nil)
	for i := range 300 {
		ep, _ := p.Pick()
		for _, q := range f.o.Endpoints() {
			if q != ep && q.Active() < ep.Active()-1 {
				t.Fatalf("pick %d: %s has %d in flight, %s had only %d", i, ep.Address(), ep.Active()-1, q.Address(), q.Active())
			}
		}
	}
}

// TestEDFPicksEachExactlyWeightTimesPerCycle: with weights 1..4 and nothing
// left in flight, least_request and round_robin pick every endpoint exactly
// w times in every window of Σw = 10 picks.
func TestEDFPicksEachExactlyWeightTimesPerCycle(t *testing.T) {
	for _, pol := range []Policy{LeastRequest, RoundRobin} {
		t.Run(string(pol), func(t *testing.T) {
			ms := members(4)
			for i := range ms {
				ms[i].Weight = i + 1
			}
			f := newFixture(t, policyConfig(pol), ms, 5)
			p := f.o.NewPicker(nil)
			for cycle := range 1000 {
				count := map[string]int{}
				for range 10 {
					ep, _ := p.Pick()
					count[ep.Address()]++
					ep.Done(time.Millisecond, Success)
				}
				for i, m := range ms {
					if count[m.Address] != i+1 {
						t.Fatalf("cycle %d: %s picked %d times, want %d (%v)", cycle, m.Address, count[m.Address], i+1, count)
					}
				}
			}
		})
	}
}

// TestRandomFollowsWeights: random draws in proportion to weight, ±1 pp over
// 10^5 picks.
func TestRandomFollowsWeights(t *testing.T) {
	ms := members(4)
	for i := range ms {
		ms[i].Weight = i + 1
	}
	f := newFixture(t, policyConfig(Random), ms, 13)
	got := shares(t, f.o.NewPicker(nil), 100_000, time.Millisecond)
	for i, m := range ms {
		within(t, m.Address, got[m.Address], float64(i+1)/10, 0.01)
	}
}

// TestPickDoesNotAllocate guards the hot path: Pick and Done allocate
// nothing for any policy, with equal or unequal weights, zone split and
// slow start in progress.
func TestPickDoesNotAllocate(t *testing.T) {
	for _, pol := range Policies() {
		cfg := zoneConfig("a")
		cfg.Policy = pol
		ms := members(12, "a", "b")
		for i := range ms {
			ms[i].Weight = 1 + i%3
		}
		f := newFixture(t, cfg, ms[:10], 71)
		if err := f.o.Update(ms); err != nil { // two endpoints in slow start
			t.Fatal(err)
		}
		p := f.o.NewPicker(nil)
		allocs := testing.AllocsPerRun(1000, func() {
			ep, err := p.Pick()
			if err != nil {
				t.Fatal(err)
			}
			ep.Done(10*time.Millisecond, Success)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Pick+Done, want 0", pol, allocs)
		}
	}
}
