package balance

import (
	"testing"
	"time"

	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/workload"
)

// TestPeakEWMAStarvesSlowEndpointAndProbesIt: under the seed's 70/30 mix, an
// endpoint 5× slower than its 7 peers gets < 2 % of the picks in steady state
// but is still probed (it gets picks in every 10 s window), and once it is
// fast again its share returns to near 1/8.
func TestPeakEWMAStarvesSlowEndpointAndProbesIt(t *testing.T) {
	ms := members(8)
	slow := ms[3].Address
	f := newFixture(t, DefaultConfig(), ms, 1)
	factor := 5.0
	s := &sim{clk: f.clk, r: rng.New(2), p: f.o.NewPicker(nil), rate: 400, mix: workload.Default(),
		latency: func(ep *Endpoint, base time.Duration) time.Duration {
			if ep.Address() == slow {
				return time.Duration(float64(base) * factor)
			}
			return base
		}}
	s.run(epoch.Add(20 * time.Second)) // reach steady state
	for w := range 6 {
		got := s.run(f.clk.Now().Add(10 * time.Second))
		share := float64(got[slow]) / float64(total(got))
		t.Logf("slow window %d: %d of %d picks (%.2f %%)", w, got[slow], total(got), 100*share)
		if share >= 0.02 {
			t.Errorf("window %d: slow endpoint share %.2f %%, want < 2 %%", w, 100*share)
		}
		if got[slow] == 0 {
			t.Errorf("window %d: slow endpoint never probed", w)
		}
	}
	factor = 1
	checkRecovered(t, s, f.clk.Now(), slow)
}

// checkRecovered runs s for a minute from now, once its slow endpoint is
// fast again, and checks that the endpoint's share of the last 30 s is
// back near an even eighth.
func checkRecovered(t *testing.T, s *sim, now time.Time, slow string) {
	t.Helper()
	s.run(now.Add(30 * time.Second))
	got := s.run(now.Add(60 * time.Second))
	share := float64(got[slow]) / float64(total(got))
	t.Logf("recovered: %.2f %%", 100*share)
	if share < 0.09 {
		t.Errorf("recovered endpoint share %.2f %%, want near 12.5 %% (≥ 9 %%)", 100*share)
	}
}

// TestJITDrill replays the seed's INC-4929 / MC-BN-01 drill: a cold endpoint
// (10× slow at start, warming linearly over 40 s, as a JIT-compiling pod)
// joins a loaded origin of 8 warm endpoints (2000 req/s, about 13 in flight
// each) under the 70/30 mix. With the
// 60 s slow start it must never see 20 concurrent requests in its first
// 30 s, under the seed's peak_ewma and under least_work (the default,
// placing each request at its class's cost as the gateway does); with slow
// start off peak_ewma's does.
func TestJITDrill(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy Policy
		window time.Duration
		below  bool
	}{
		{"peak_ewma, slow start 60s", PeakEWMA, 60 * time.Second, true},
		{"peak_ewma, slow start off", PeakEWMA, 0, false},
		{"least_work, slow start 60s", LeastWork, 60 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := policyConfig(tc.policy)
			cfg.SlowStart.Window = tc.window
			ms := members(8)
			f := newFixture(t, cfg, ms, 3)
			cold := "10.0.0.99:80"
			var joined time.Time
			peak := int64(0)
			s := &sim{clk: f.clk, r: rng.New(4), p: f.o.NewPicker(nil), rate: 2000, mix: workload.Default(), costed: tc.policy == LeastWork,
				latency: func(ep *Endpoint, base time.Duration) time.Duration {
					if ep.Address() != cold {
						return base
					}
					warmth := min(f.clk.Now().Sub(joined).Seconds()/40, 1)
					return time.Duration(float64(base) * (10 - 9*warmth))
				},
				onPick: func(ep *Endpoint) {
					if ep.Address() == cold {
						peak = max(peak, ep.Active())
					}
				}}
			s.run(epoch.Add(10 * time.Second))
			joined = f.clk.Now()
			if err := f.o.Update(append(ms, Member{Address: cold, Weight: 1})); err != nil {
				t.Fatal(err)
			}
			got := s.run(joined.Add(30 * time.Second))
			t.Logf("cold endpoint: peak %d concurrent, %d of %d picks in its first 30 s", peak, got[cold], total(got))
			if tc.below && peak >= 20 {
				t.Errorf("peak concurrency on the cold endpoint %d, want < 20", peak)
			}
			if !tc.below && peak <= 20 {
				t.Errorf("peak concurrency without slow start %d, want > 20 (the drill should fail without it)", peak)
			}
			if got[cold] == 0 {
				t.Error("cold endpoint got no traffic at all")
			}
		})
	}
}
