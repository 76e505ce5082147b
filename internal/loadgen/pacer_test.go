package loadgen

import (
	"math"
	"testing"
	"time"

	"github.com/corput/corput/internal/rng"
)

// arrivals reads the first n arrival times of a fresh pacer.
func arrivals(rate float64, seed uint64, n int) []time.Duration {
	p := NewPoisson(rate, rng.New(seed))
	out := make([]time.Duration, n)
	for i := range out {
		out[i], _ = p.Pace(0, uint64(i))
	}
	return out
}

func TestPoissonGapsAreExponential(t *testing.T) {
	const rate, n = 1000.0, 100_000
	at := arrivals(rate, 7, n)
	mean := float64(time.Second) / rate
	var sum, sumSq float64
	below := 0
	prev := time.Duration(0)
	for _, a := range at {
		g := float64(a - prev)
		if g < 0 {
			t.Fatalf("arrivals go back in time: %v after %v", a, prev)
		}
		prev = a
		sum += g
		sumSq += g * g
		if g <= mean {
			below++
		}
	}
	m := sum / n
	sd := math.Sqrt(sumSq/n - m*m)
	// Exponential: mean 1/rate, standard deviation equal to the mean,
	// P(gap ≤ mean) = 1 − 1/e. Tolerances are several standard errors.
	if math.Abs(m/mean-1) > 0.01 {
		t.Errorf("mean gap %.0fns, want %.0fns ± 1%%", m, mean)
	}
	if math.Abs(sd/m-1) > 0.02 {
		t.Errorf("coefficient of variation %.3f, want 1 ± 0.02", sd/m)
	}
	if frac := float64(below) / n; math.Abs(frac-(1-1/math.E)) > 0.005 {
		t.Errorf("P(gap ≤ mean) = %.4f, want %.4f ± 0.005", frac, 1-1/math.E)
	}
}

func TestPoissonCountsHaveUnitDispersion(t *testing.T) {
	// Arrivals in one second at rate 200 over many seeds: Poisson counts
	// have variance equal to their mean (a paced, constant-rate schedule
	// would have variance 0).
	const rate, runs = 200.0, 2000
	var sum, sumSq float64
	for seed := range uint64(runs) {
		p := NewPoisson(rate, rng.New(seed))
		k := 0
		for {
			at, _ := p.Pace(0, uint64(k))
			if at > time.Second {
				break
			}
			k++
		}
		sum += float64(k)
		sumSq += float64(k * k)
	}
	mean := sum / runs
	variance := sumSq/runs - mean*mean
	if math.Abs(mean-rate) > 2 {
		t.Errorf("mean count %.1f, want %v ± 2", mean, rate)
	}
	if d := variance / mean; d < 0.85 || d > 1.15 {
		t.Errorf("index of dispersion %.3f, want 1 ± 0.15", d)
	}
}

func TestPoissonIsSeededAndCatchesUp(t *testing.T) {
	a, b, c := arrivals(50, 1, 100), arrivals(50, 1, 100), arrivals(50, 2, 100)
	same := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, arrival %d: %v vs %v", i, a[i], b[i])
		}
		if a[i] == c[i] {
			same++
		}
	}
	if same > 1 {
		t.Fatalf("seeds 1 and 2 share %d arrival times", same)
	}
	p := NewPoisson(50, rng.New(1))
	if w, stop := p.Pace(a[3]-time.Millisecond, 3); stop || w != time.Millisecond {
		t.Fatalf("1ms before arrival 3: wait %v stop %v", w, stop)
	}
	if w, _ := p.Pace(a[10]+time.Second, 10); w != 0 {
		t.Fatalf("behind schedule: wait %v, want 0", w)
	}
	if p.Rate(time.Hour) != 50 {
		t.Fatalf("Rate = %v", p.Rate(0))
	}
	if _, stop := NewPoisson(0, rng.New(1)).Pace(0, 0); !stop {
		t.Fatal("a zero rate must stop the attack")
	}
}

func BenchmarkPoissonPace(b *testing.B) {
	p := NewPoisson(1e6, rng.New(1))
	b.ReportAllocs()
	hits := uint64(0)
	for b.Loop() {
		p.Pace(0, hits)
		hits++
	}
}
