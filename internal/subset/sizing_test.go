package subset

import (
	"strings"
	"testing"
)

func TestSizingFreshChoice(t *testing.T) {
	for _, c := range []struct{ n, frontends, want int }{
		{0, 1600, 1},
		{10, 1600, 1},   // small origin: one subset of all
		{50, 1600, 1},   // up to Max: still one
		{51, 1600, 2},   // 25.5 each
		{400, 1600, 8},  // Zuul: 400 nodes → 8 subsets of 50
		{401, 1600, 16}, // 25.06 each
		{800, 1600, 16},
		{10000, 1600, 256},
		{10000, 100, 64}, // F caps S: no subset without a frontend
		{10000, 1, 1},
	} {
		if got := DefaultSizing.Subsets(c.n, c.frontends, 0); got != c.want {
			t.Errorf("Subsets(N=%d, F=%d) = %d, want %d", c.n, c.frontends, got, c.want)
		}
	}
}

func TestSizingHysteresis(t *testing.T) {
	// Zuul: between 200 and 400 nodes subsets stay stable; with 20 % slack
	// S = 8 holds from 160 to 480.
	for n := 160; n <= 480; n++ {
		if got := DefaultSizing.Subsets(n, 1600, 8); got != 8 {
			t.Fatalf("N=%d with S=8: got %d, want 8 kept", n, got)
		}
	}
	if got := DefaultSizing.Subsets(481, 1600, 8); got != 16 {
		t.Fatalf("N=481 with S=8: got %d, want 16", got)
	}
	if got := DefaultSizing.Subsets(159, 1600, 8); got != 4 {
		t.Fatalf("N=159 with S=8: got %d, want 4", got)
	}
	// A current S above the caps is dropped even inside the band.
	if got := DefaultSizing.Subsets(800, 8, 16); got != 8 {
		t.Fatalf("N=800 F=8 with S=16: got %d, want 8 (capped by F)", got)
	}
}

// An origin whose size steps back and forth across any boundary must not
// flip S back: after a step from N to N±1 changes S, stepping back keeps it.
func TestSizingNoOscillation(t *testing.T) {
	for _, z := range []Sizing{DefaultSizing, FixedSize(2), FixedSize(3), FixedSize(7), FixedSize(64), {Min: 25, Max: 50, Slack: 0}} {
		for n := 1; n <= 5000; n++ {
			s0 := z.Subsets(n, 1<<20, 0)
			for _, m := range []int{n - 1, n + 1} {
				s1 := z.Subsets(m, 1<<20, s0)
				if s1 == s0 {
					continue
				}
				if back := z.Subsets(n, 1<<20, s1); back != s1 {
					t.Fatalf("%+v: N %d→%d→%d flipped S %d→%d→%d", z, n, m, n, s0, s1, back)
				}
			}
		}
	}
}

func TestFixedSize(t *testing.T) {
	if FixedSize(0) != DefaultSizing {
		t.Fatalf("FixedSize(0) = %+v, want DefaultSizing", FixedSize(0))
	}
	z := FixedSize(10)
	if err := z.Validate(); err != nil {
		t.Fatal(err)
	}
	for n := 1; n < 2000; n++ {
		S := z.Subsets(n, 1<<20, 0)
		if size := ceilDiv(n, S); size > 10 {
			t.Fatalf("FixedSize(10): N=%d gives S=%d, subsets of up to %d", n, S, size)
		}
	}
}

func TestSizingValidate(t *testing.T) {
	for _, c := range []struct {
		z    Sizing
		want string
	}{
		{FixedSize(1), "subset.min_size"},
		{Sizing{Min: 30, Max: 50, Slack: 0.2}, "use at least 60"},
		{Sizing{Min: 25, Max: 50, Slack: 1}, "slack"},
	} {
		err := c.z.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error about %q", c.z, err, c.want)
		}
	}
}

func TestNewSizingFromConfig(t *testing.T) {
	if z, err := NewSizing(0, 25, 50); err != nil || z != DefaultSizing {
		t.Fatalf("NewSizing(0, 25, 50) = %+v, %v; want DefaultSizing", z, err)
	}
	if z, err := NewSizing(40, 25, 50); err != nil || z != FixedSize(40) {
		t.Fatalf("NewSizing(40, …) = %+v, %v; want FixedSize(40)", z, err)
	}
	for _, c := range []struct {
		size, lo, hi int
		key          string
	}{{1, 25, 50, "subset.size"}, {-2, 25, 50, "subset.size"}, {0, 30, 40, "subset.max_size"}, {0, 0, 50, "subset.min_size"}} {
		if _, err := NewSizing(c.size, c.lo, c.hi); err == nil || !strings.HasPrefix(err.Error(), c.key) {
			t.Errorf("NewSizing(%d, %d, %d) = %v, want an error naming %s", c.size, c.lo, c.hi, err, c.key)
		}
	}
}
