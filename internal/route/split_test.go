package route

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/rng"
)

// count is a Counter.
type count struct{ n atomic.Int64 }

func (c *count) Inc() { c.n.Add(1) }

// oneField is a request head of one field, read without an allocation.
type oneField struct {
	name  string
	value []byte
}

func (f oneField) Value(name string, i int) ([]byte, bool) {
	if i == 0 && name == f.name {
		return f.value, true
	}
	return nil, false
}

// splitRouter is a router of one route split between v1 and v2 by
// weights w1 and w2, counting each target's requests.
func splitRouter(w1, w2 uint64, keys *forward.KeySource, clk clock.Clock, seed uint64) (*Router, [2]*count) {
	c := [2]*count{{}, {}}
	sp := NewSplit([]Target{{Origin: "v1", Weight: w1, Requests: c[0]}, {Origin: "v2", Weight: w2, Requests: c[1]}},
		keys, clk, rng.New(seed).Uint64)
	return NewRouter([]Route{{PathPrefix: "/", Split: sp}}), c
}

// route routes one request through r and counts it by its target.
func route(t testing.TB, r *Router, f Fields) string {
	rt := r.Lookup(&Request{Method: "GET", Host: "x.test", Path: "/pay", Head: f})
	if rt == nil || rt.Split == nil {
		t.Fatalf("no split route")
	}
	tg := rt.Split.Pick(f, forward.Peer{})
	tg.Requests.Inc()
	return tg.Origin
}

// TestSplitShares: 95/5 over 100,000 requests through the router and the
// split: each target's count is within ±0.5 percentage points of its
// weight, for several seeds.
func TestSplitShares(t *testing.T) {
	const n = 100_000
	for _, seed := range []uint64{1, 2, 3} {
		r, c := splitRouter(95, 5, nil, clock.Real(), seed)
		for range n {
			route(t, r, nil)
		}
		for i, w := range []float64{95, 5} {
			got := 100 * float64(c[i].n.Load()) / n
			t.Logf("seed %d: v%d %d of %d = %.3f%% (weight %.0f%%)", seed, i+1, c[i].n.Load(), n, got, w)
			if math.Abs(got-w) > 0.5 {
				t.Errorf("seed %d: v%d got %.3f%%, want %.0f%% ± 0.5", seed, i+1, got, w)
			}
		}
	}
}

// TestSplitStickyKey: with split_hash_on "header x-user", each key reaches
// one target on every request, keys spread by the weights, and a request
// without the key is drawn at random.
func TestSplitStickyKey(t *testing.T) {
	h, err := config.ParseHashOn("header X-User")
	if err != nil {
		t.Fatal(err)
	}
	ks := forward.NewKeySource(h, nil)
	r, _ := splitRouter(75, 25, &ks, clock.Real(), 7)
	const users = 4000
	on := [2]int{}
	for u := range users {
		f := fields{"x-user": {fmt.Sprintf("user-%d", u)}}
		first := route(t, r, f)
		for range 10 {
			if got := route(t, r, f); got != first {
				t.Fatalf("user-%d reached %s, then %s", u, first, got)
			}
		}
		if first == "v2" {
			on[1]++
		} else {
			on[0]++
		}
	}
	t.Logf("%d keys: %d on v1, %d on v2", users, on[0], on[1])
	if share := float64(on[1]) / users; share < 0.22 || share > 0.28 {
		t.Errorf("v2 holds %.3f of the keys, want about 0.25", share)
	}
	seen := map[string]bool{}
	for range 200 {
		seen[route(t, r, fields{})] = true
	}
	if !seen["v1"] || !seen["v2"] {
		t.Errorf("requests without the key reached only %v; want both targets", seen)
	}
}

// TestSplitRamp: a target whose weight rose from 0 ramps its share
// linearly over its window on an injected clock (the share quoted per 5 s),
// and once the window is over the split is steady and reads the clock no
// more.
func TestSplitRamp(t *testing.T) {
	start := time.Unix(1000, 0)
	clk := &countingClock{Fake: clock.NewFake(start)}
	window := 30 * time.Second
	c := [2]*count{{}, {}}
	sp := NewSplit([]Target{
		{Origin: "v1", Weight: 75, Requests: c[0]},
		{Origin: "v2", Weight: 25, Requests: c[1], RampFrom: start, RampWindow: window},
	}, nil, clk, rng.New(11).Uint64)
	const per = 20_000
	t.Logf("%-6s %-10s %-10s", "t", "v2 share", "expected")
	for at := time.Duration(0); at <= window+5*time.Second; at += 5 * time.Second {
		clk.AdvanceTo(start.Add(at))
		v2 := 0
		for range per {
			if sp.Pick(nil, forward.Peer{}).Origin == "v2" {
				v2++
			}
		}
		f := min(float64(at)/float64(window), 1)
		want := 0.25 * f // linear in the share
		got := float64(v2) / per
		t.Logf("%-6s %-10.4f %-10.4f", at, got, want)
		if math.Abs(got-want) > 0.01 {
			t.Errorf("at %s: v2's share %.4f, want %.4f ± 0.01", at, got, want)
		}
	}
	reads := clk.reads.Load()
	for range 1000 {
		sp.Pick(nil, forward.Peer{})
	}
	if got := clk.reads.Load() - reads; got != 0 {
		t.Errorf("after the ramp, 1000 picks read the clock %d times; want 0", got)
	}
}

// countingClock counts Now calls.
type countingClock struct {
	*clock.Fake
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time { c.reads.Add(1); return c.Fake.Now() }

// TestSplitPickAllocatesNothing: routing and picking a target, sticky or
// not, ramping or not, allocates nothing.
func TestSplitPickAllocatesNothing(t *testing.T) {
	h, _ := config.ParseHashOn("header x-user")
	ks := forward.NewKeySource(h, nil)
	for _, c := range []struct {
		name string
		keys *forward.KeySource
		ramp time.Duration
	}{{"random", nil, 0}, {"sticky", &ks, 0}, {"ramping", nil, time.Hour}} {
		sp := NewSplit([]Target{{Origin: "v1", Weight: 95}, {Origin: "v2", Weight: 5, RampFrom: time.Now(), RampWindow: c.ramp}},
			c.keys, clock.Real(), rng.New(1).Uint64)
		var f Fields = oneField{"x-user", []byte("u1")}
		if n := testing.AllocsPerRun(1000, func() { sp.Pick(f, forward.Peer{}) }); n != 0 {
			t.Errorf("%s: %v allocations per pick", c.name, n)
		}
	}
}
