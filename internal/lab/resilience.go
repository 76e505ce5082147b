package lab

import (
	"fmt"
	"slices"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/subset"
)

// ResilienceResult is gw-04's "subset size is a resilience knob" (docs/spec.md) for one
// configured subset size: the share of its subset's capacity a loop keeps
// when f endpoints of the origin fail, f = 0..max. Failed endpoints are
// ejected by the real outlier detector (three connect failures each) and a
// loop's capacity is the endpoints its real Picker still chooses among,
// over its subset's size.
type ResilienceResult struct {
	// Size is the configured subset.size; SubsetSize the mean members per
	// subset the ring chose for it, Subsets their number.
	Size       int     `json:"size"`
	SubsetSize float64 `json:"subset_size"`
	Subsets    int     `json:"subsets"`
	Failures   []int   `json:"failures"`
	// f failures anywhere in the origin (uniform, over the trials): the
	// worst-hit loop's capacity, median and minimum over the trials, and
	// the share of loops that lost any capacity (median).
	WorstLoopMedian []float64 `json:"worst_loop_capacity_median"`
	WorstLoopMin    []float64 `json:"worst_loop_capacity_min"`
	LoopsHit        []float64 `json:"loops_hit_share_median"`
	// f failures inside one loop's subset (a correlated failure: a rack,
	// a bad deploy batch): what that loop keeps.
	SameSubset []float64 `json:"same_subset_capacity"`
}

// runResilience measures every configured subset size.
func runResilience(sc *Scenario, tick func()) ([]ResilienceResult, error) {
	var out []ResilienceResult
	for _, size := range sc.Resilience.Sizes {
		r, err := resilienceFor(sc, size)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		if tick != nil {
			tick()
		}
	}
	return out, nil
}

func resilienceFor(sc *Scenario, size int) (ResilienceResult, error) {
	f, rs := sc.Fleet, sc.Resilience
	addrs := make([]string, f.Endpoints)
	for i := range addrs {
		addrs[i] = address(0, i)
	}
	ring, err := subset.NewRing(subset.Config{Origin: "origin", Sizing: subset.FixedSize(size),
		Fleet: subset.Fleet{Gateways: f.Gateways, Loops: f.Loops}}, addrs)
	if err != nil {
		return ResilienceResult{}, fmt.Errorf("resilience: size %d: %w", size, err)
	}
	snap := ring.Snapshot()
	r := ResilienceResult{Size: size, Subsets: snap.Subsets(), SubsetSize: float64(f.Endpoints) / float64(snap.Subsets())}
	for n := 0; n <= rs.MaxFailures; n++ {
		r.Failures = append(r.Failures, n)
	}
	src := rng.New(rng.Mix64(sc.Seed ^ uint64(size)))
	worst := make([][]float64, rs.MaxFailures+1)
	hit := make([][]float64, rs.MaxFailures+1)
	for range rs.Trials {
		order := slices.Clone(addrs)
		for i := len(order) - 1; i > 0; i-- { // Fisher–Yates
			j := src.IntN(i + 1)
			order[i], order[j] = order[j], order[i]
		}
		err := failOneByOne(snap, addrs, order[:rs.MaxFailures], func(n int, kept []float64) {
			w, lost := 1.0, 0
			for _, k := range kept {
				w = min(w, k)
				if k < 1 {
					lost++
				}
			}
			worst[n] = append(worst[n], w)
			hit[n] = append(hit[n], float64(lost)/float64(len(kept)))
		})
		if err != nil {
			return ResilienceResult{}, err
		}
	}
	for n := range worst {
		r.WorstLoopMedian = append(r.WorstLoopMedian, round4(median(worst[n])))
		r.WorstLoopMin = append(r.WorstLoopMin, round4(slices.Min(worst[n])))
		r.LoopsHit = append(r.LoopsHit, round4(median(hit[n])))
	}
	own := slices.Clone(snap.Subset(0))
	err = failOneByOne(snap, addrs, own[:min(len(own), rs.MaxFailures)], func(n int, kept []float64) {
		r.SameSubset = append(r.SameSubset, round4(kept[0]))
	})
	for len(r.SameSubset) <= rs.MaxFailures {
		r.SameSubset = append(r.SameSubset, 0) // the whole subset failed
	}
	return r, err
}

// failOneByOne ejects the endpoints of fail one at a time through a real
// balance.Origin and reports, before the first and after each ejection,
// every subset's kept capacity: the members of the subset its Picker still
// chooses among, over the subset's size. (A loop whose whole subset is
// ejected falls back to the rest of the origin: that is 0 of its subset.)
func failOneByOne(snap *subset.Snapshot, addrs, fail []string, report func(n int, kept []float64)) error {
	bc := balance.DefaultConfig()
	members := make([]balance.Member, len(addrs))
	for i, a := range addrs {
		members[i] = balance.Member{Address: a, Weight: 1}
	}
	o, err := balance.NewOrigin("origin", bc, members, balance.Options{Clock: clock.NewFake(epoch), Rand: rng.New(1)})
	if err != nil {
		return fmt.Errorf("resilience: %w", err)
	}
	defer o.Close()
	pickers := make([]*balance.Picker, snap.Subsets())
	for j := range pickers {
		pickers[j] = o.NewPicker(snap.Subset(j))
	}
	kept := make([]float64, len(pickers))
	measure := func(n int) {
		for j, p := range pickers {
			in := 0
			for _, c := range p.Candidates() {
				if slices.Contains(snap.Subset(j), c) {
					in++
				}
			}
			kept[j] = float64(in) / float64(len(snap.Subset(j)))
		}
		report(n, kept)
	}
	measure(0)
	for n, a := range fail {
		only := o.NewPicker([]string{a})
		for range bc.Outlier.Consecutive5xx {
			ep, err := only.Pick()
			if err != nil {
				return fmt.Errorf("resilience: pick %s: %w", a, err)
			}
			ep.Done(0, balance.ConnectFailure)
		}
		only.Close()
		if !o.Endpoint(a).Status().Ejected {
			return fmt.Errorf("resilience: %s was not ejected after %d connect failures", a, bc.Outlier.Consecutive5xx)
		}
		measure(n + 1)
	}
	return nil
}
