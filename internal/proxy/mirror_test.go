package proxy

import (
	"math/rand/v2"
	"sync"
	"testing"
)

// TestMirrorSampleShare: with a seeded source, percent p samples p % of
// 200,000 requests within 0.2 points; 100 samples all, 0 none.
func TestMirrorSampleShare(t *testing.T) {
	for _, p := range []float64{0, 1, 10, 50, 99.5, 100} {
		src := rand.New(rand.NewPCG(1, 2))
		var mu sync.Mutex
		m := &Mirror{Rand: func() uint64 { mu.Lock(); defer mu.Unlock(); return src.Uint64() }}
		m.SetPercent(p)
		const n = 200_000
		k := 0
		for range n {
			if m.sample() {
				k++
			}
		}
		got := 100 * float64(k) / n
		if d := got - p; d < -0.2 || d > 0.2 || (p == 0 && k != 0) || (p == 100 && k != n) {
			t.Errorf("percent %v: sampled %.3f %%", p, got)
		}
	}
}

// TestNoMirrorSamplesNothing: a table without mirrors, or a route past
// its end, has none.
func TestNoMirrorSamplesNothing(t *testing.T) {
	tb := &Table{}
	if tb.mirrorOf(0) != nil {
		t.Fatal("a mirror for a table without any")
	}
	tb.Mirrors = []*Mirror{nil, {}}
	if tb.mirrorOf(0) != nil || tb.mirrorOf(1) == nil || tb.mirrorOf(2) != nil {
		t.Fatal("mirrorOf does not follow the route's index")
	}
}
