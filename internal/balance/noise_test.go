package balance

import (
	"math"
	"testing"
	"time"

	"github.com/corput/corput/internal/rng"
)

// noisyShares runs n requests through p over identical endpoints whose
// latency is base × a log-normal noise of sigma (a seeded draw), except
// slow, which is that many times slower. inflight requests are kept open at
// once, the oldest ending at each pick; the clock moves step per pick. It
// returns each endpoint's share of the picks.
func noisyShares(t *testing.T, f *fixture, p *Picker, n, inflight int, base time.Duration, sigma float64, slow map[string]float64) map[string]float64 {
	t.Helper()
	r := rng.New(99)
	type open struct {
		ep  *Endpoint
		lat time.Duration
	}
	var q []open
	count := map[string]int{}
	for range n {
		ep, err := p.Pick()
		if err != nil {
			t.Fatal(err)
		}
		count[ep.Address()]++
		lat := float64(base) * math.Exp(sigma*r.Normal())
		if k, ok := slow[ep.Address()]; ok {
			lat *= k
		}
		q = append(q, open{ep, time.Duration(lat)})
		if len(q) > inflight {
			q[0].ep.Done(q[0].lat, Success)
			q = q[1:]
		}
		f.clk.Advance(time.Millisecond)
	}
	for _, o := range q {
		o.ep.Done(o.lat, Success)
	}
	out := map[string]float64{}
	for a, c := range count {
		out[a] = float64(c) / float64(n)
	}
	return out
}

func spread(shares map[string]float64, of int) (minOverMean, maxOverMean float64) {
	mean := 1 / float64(of)
	minOverMean, maxOverMean = math.Inf(1), 0
	for _, s := range shares {
		minOverMean, maxOverMean = min(minOverMean, s/mean), max(maxOverMean, s/mean)
	}
	if len(shares) < of {
		minOverMean = 0
	}
	return minOverMean, maxOverMean
}

// Identical endpoints with noisy latency (30 % log-normal) get even shares
// (the even-load issue's 0.85–1.15× the mean) under peak_ewma's tie rule
// and under the default policy's (least_work's); with the rule off
// (tie_ratio 1, the plain Peak EWMA) the noise steers traffic into hot
// spots.
func TestNoiseDoesNotSteerPeakEWMA(t *testing.T) { testNoiseDoesNotSteer(t, PeakEWMA) }

func TestNoiseDoesNotSteerTheDefaultPolicy(t *testing.T) {
	testNoiseDoesNotSteer(t, DefaultConfig().Policy)
}

func testNoiseDoesNotSteer(t *testing.T, pol Policy) {
	const n, endpoints = 100_000, 50
	run := func(tie float64) (lo, hi float64) {
		cfg := policyConfig(pol)
		cfg.TieRatio = tie
		cfg.SlowStart.Window = 0
		f := newFixture(t, cfg, members(endpoints), 5)
		p := f.o.NewPicker(nil)
		defer p.Close()
		return spread(noisyShares(t, f, p, n, 4, 15*time.Millisecond, 0.3, nil), endpoints)
	}
	lo, hi := run(1.5)
	if lo < 0.85 || hi > 1.15 {
		t.Errorf("tie_ratio 1.5: shares %.2f–%.2f× the mean over identical endpoints, want within 0.85–1.15", lo, hi)
	}
	plainLo, plainHi := run(1)
	if plainHi-plainLo <= 2*(hi-lo) {
		t.Errorf("%s with tie_ratio 1: spread %.2f–%.2f× is not clearly wider than the tie rule's %.2f–%.2f×: the test shows nothing", pol, plainLo, plainHi, lo, hi)
	}
	t.Logf("%s, identical endpoints, 30%% noise: tie rule %.2f–%.2f×, tie_ratio 1 %.2f–%.2f×", pol, lo, hi, plainLo, plainHi)
}

// A truly slow endpoint (5×) still loses its share under the tie rule,
// and under the warm rule when it is the only endpoint with a connection
// ready (NewWarmPicker): the warm rule applies only between candidates
// whose latencies tie.
func TestTieRuleStillAvoidsASlowEndpoint(t *testing.T) {
	const n, endpoints = 50_000, 8
	for _, c := range []struct {
		pol  Policy
		warm bool
	}{{PeakEWMA, false}, {PeakEWMA, true}, {LeastWork, false}, {LeastWork, true}} {
		pol, warm := c.pol, c.warm
		cfg := policyConfig(pol)
		cfg.SlowStart.Window = 0
		ms := members(endpoints)
		f := newFixture(t, cfg, ms, 7)
		slow := ms[0].Address
		var w Warm
		if warm {
			w = func(e *Endpoint) (bool, bool) { return e.Address() == slow, true }
		}
		p := f.o.NewWarmPicker(nil, w)
		shares := noisyShares(t, f, p, n, 4, 15*time.Millisecond, 0.3, map[string]float64{slow: 5})
		p.Close()
		if fair, got := 1.0/endpoints, shares[slow]; got > fair/2 {
			t.Fatalf("%s, warm rule %v: the 5×-slow endpoint got %.1f%% of the picks, want under half its fair %.1f%%", pol, warm, 100*got, 100*fair)
		}
		t.Logf("%s, warm rule %v: 5x-slow endpoint share: %.2f%%", pol, warm, 100*shares[slow])
	}
}
