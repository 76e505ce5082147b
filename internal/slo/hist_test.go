package slo

import (
	"math"
	"testing"
	"time"

	"github.com/corput/corput/internal/latency"
	"github.com/corput/corput/internal/rng"
)

// TestQuantileError is the histogram's promise, over seeded random
// distributions between 10 ms and 1 s (log-uniform, a two-class mix with
// noise, a narrow spike): every p50, p90 and p99 is within 2 % of the exact
// nearest-rank quantile of the same samples.
func TestQuantileError(t *testing.T) {
	qs := []float64{0.5, 0.9, 0.99}
	draws := map[string]func(r *rng.Source) time.Duration{
		"log-uniform": func(r *rng.Source) time.Duration {
			return time.Duration(float64(10*time.Millisecond) * math.Pow(100, r.Float64()))
		},
		"mix 70/30": func(r *rng.Source) time.Duration {
			base := 15 * time.Millisecond
			if r.Float64() < 0.3 {
				base = 140 * time.Millisecond
			}
			return base + time.Duration(r.Float64()*float64(base)/2)
		},
		"spike": func(r *rng.Source) time.Duration {
			return 500*time.Millisecond + time.Duration(r.IntN(1000))*time.Microsecond
		},
	}
	for name, draw := range draws {
		for seed := uint64(1); seed <= 20; seed++ {
			r := rng.New(seed)
			w := NewWindow(3)
			n := 200 + r.IntN(5000)
			xs := make([]time.Duration, n)
			for i := range xs {
				xs[i] = draw(r)
				w.Record(xs[i])
				if i%997 == 0 && i > 0 {
					w.cur.Store((w.cur.Load() + 1) % 3) // spread over slots without clearing
				}
			}
			var got [3]time.Duration
			if c := w.Quantiles(qs, got[:]); c != uint64(n) {
				t.Fatalf("%s seed %d: count %d, want %d", name, seed, c, n)
			}
			exact := latency.Of(xs)
			for i, want := range []float64{exact.P50, exact.P90, exact.P99} {
				g := latency.Millis(got[i])
				if e := math.Abs(g-want) / want; e > 0.02 {
					t.Errorf("%s seed %d: q%.2f = %.3f ms, exact %.3f ms: error %.2f %% > 2 %%", name, seed, qs[i], g, want, 100*e)
				}
			}
		}
	}
}

// TestBucketBounds: every value maps to a bucket whose midpoint is within
// 1/128 of it, across the range, and buckets are monotone.
func TestBucketBounds(t *testing.T) {
	prev := -1
	for us := uint64(1); us < 1<<maxExp; us += 1 + us/97 {
		b := bucketOf(us)
		if b < prev {
			t.Fatalf("bucketOf(%d) = %d < bucketOf of a smaller value %d", us, b, prev)
		}
		prev = b
		if e := math.Abs(bucketMid(b)-float64(us)) / float64(us); e > 1.0/128+1e-9 {
			t.Fatalf("value %d µs: bucket %d midpoint %.1f, error %.4f", us, b, bucketMid(b), e)
		}
	}
	if b := bucketOf(1 << 40); b != numBuckets-1 {
		t.Fatalf("a huge value is in bucket %d, want the last (%d)", b, numBuckets-1)
	}
}

// TestRotateForgets: a rotation clears the oldest slot, so after a full
// turn of the ring nothing recorded before remains.
func TestRotateForgets(t *testing.T) {
	w := NewWindow(4)
	w.Record(100 * time.Millisecond)
	var got [1]time.Duration
	for i := range 3 {
		w.Rotate()
		if n := w.Quantiles([]float64{0.5}, got[:]); n != 1 {
			t.Fatalf("after %d rotations: %d samples, want 1", i+1, n)
		}
	}
	w.Rotate()
	if n := w.Quantiles([]float64{0.5}, got[:]); n != 0 || got[0] != 0 {
		t.Fatalf("after a full turn: %d samples, p50 %v; want none", n, got[0])
	}
}

func TestRecordAllocs(t *testing.T) {
	w := NewWindow(4)
	if a := testing.AllocsPerRun(1000, func() { w.Record(17 * time.Millisecond) }); a != 0 {
		t.Fatalf("Record allocates %.1f times, want 0", a)
	}
}

func BenchmarkRecord(b *testing.B) {
	w := NewWindow(13)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		d := 15 * time.Millisecond
		for pb.Next() {
			w.Record(d)
			d += time.Microsecond
		}
	})
}
