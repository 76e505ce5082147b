package balance

import (
	"math"
	"sync"
	"testing"
	"time"
)

func TestPeakEWMA(t *testing.T) {
	const tau = 10_000.0 // ms
	ms := int64(time.Millisecond)
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > want*1e-6 {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	var e latencyEstimate
	e.reset(30e6, 0)
	near("new endpoint", e.at(0, tau), 30e6)
	near("idle for τ decays to 1/e", e.at(10_000*ms, tau), 30e6/math.E)
	e.observe(100e6, 0, tau)
	near("a sample above the estimate replaces it", e.at(0, tau), 100e6)
	e.observe(10e6, 0, tau)
	near("a lower sample at the same instant has no weight", e.at(0, tau), 100e6)
	e.observe(10e6, 10_000*ms, tau)
	near("a lower sample after τ", e.at(10_000*ms, tau), 100e6/math.E+10e6*(1-1/math.E))
	if got := e.at(1_000_000*ms, tau); got > 1 {
		t.Errorf("after 100 τ idle: %v, want ≈ 0", got)
	}
}

// TestPeakEWMAConcurrent: racing writers never lose the word's consistency:
// the estimate stays within the samples' range.
func TestPeakEWMAConcurrent(t *testing.T) {
	var e latencyEstimate
	e.reset(20e6, 0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				e.observe(float64(10+g)*1e6, int64(i)*int64(time.Millisecond), 10_000)
				_ = e.at(int64(i)*int64(time.Millisecond), 10_000)
			}
		})
	}
	wg.Wait()
	if got := e.at(2000*int64(time.Millisecond), 10_000); got < 10e6 || got > 20e6 {
		t.Errorf("estimate %v outside the samples' range", got)
	}
}
