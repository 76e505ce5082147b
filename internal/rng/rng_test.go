package rng

import "testing"

func TestDeterministic(t *testing.T) {
	a, b := New(42), New(42)
	for i := 0; i < 100; i++ {
		if a.Uint64() != b.Uint64() {
			t.Fatal("same seed, different sequence")
		}
	}
	if New(1).Uint64() == New(2).Uint64() {
		t.Fatal("different seeds gave the same first value")
	}
}

func TestIntNUniform(t *testing.T) {
	// 10 buckets over 10^5 draws: each within ±1 percentage point of 10 %.
	s := New(7)
	const n, draws = 10, 100000
	var c [n]int
	for i := 0; i < draws; i++ {
		v := s.IntN(n)
		if v < 0 || v >= n {
			t.Fatalf("IntN(%d) = %d", n, v)
		}
		c[v]++
	}
	for i, k := range c {
		share := float64(k) / draws
		if share < 0.09 || share > 0.11 {
			t.Fatalf("bucket %d share %.4f outside 0.10±0.01", i, share)
		}
	}
}

func TestFloat64Range(t *testing.T) {
	s := New(3)
	for i := 0; i < 10000; i++ {
		if f := s.Float64(); f < 0 || f >= 1 {
			t.Fatalf("Float64 = %v", f)
		}
	}
}

func BenchmarkIntN(b *testing.B) {
	s := New(1)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = s.IntN(50)
	}
}
