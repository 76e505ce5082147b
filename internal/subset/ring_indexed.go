package subset

import (
	"errors"
	"fmt"
	"slices"
)

// ErrIndices refuses given ring indices that are not the dense sequence
// 0..N-1, each index held by exactly one endpoint.
var ErrIndices = errors.New("ring indices must be 0..N-1, each held by one endpoint")

// Shared indices. A Ring keeps its indices dense by its own history: where
// two gateways saw different histories (one restarted after endpoints were
// replaced), they hold different rings. A control plane that keeps one
// index assignment for the fleet — with the Ring's own rules: the initial
// set shuffled, a joining endpoint takes the next index, a leaving one's
// hole is filled by the highest — hands the indices to every gateway, and
// Place makes a gateway's ring exactly that assignment. Every gateway that
// places the same indices then computes the same ring, whatever its
// history.
//
// The subset count needs the same care: Sizing's hysteresis keeps a count
// while N stays in its widened range, so two gateways whose histories of N
// differ can hold different counts for the same N. The control plane
// therefore sends the count its own hysteresis chose, and Place takes it as
// the current count: every gateway computes Sizing.Subsets(N, F, shared),
// the same inputs, the same answer. Without a shared count (0) the
// gateway's own count is the current one, and gateways agree except while
// N sits in a hysteresis band.

// OrderByIndex returns the addresses in index order: out[i] holds index i.
// It refuses indices that are not dense and unique (ErrIndices) and empty
// addresses.
func OrderByIndex(indices map[string]int) ([]string, error) {
	out := make([]string, len(indices))
	for a, i := range indices {
		if a == "" {
			return nil, ErrEmpty
		}
		if i < 0 || i >= len(indices) {
			return nil, fmt.Errorf("%q has index %d of %d endpoints: %w", a, i, len(indices), ErrIndices)
		}
		if out[i] != "" {
			return nil, fmt.Errorf("%q and %q both have index %d: %w", min(a, out[i]), max(a, out[i]), i, ErrIndices)
		}
		out[i] = a
	}
	return out, nil
}

// Place sets the ring to exactly the given indices and re-evaluates the
// subset count against subsets, the control plane's count (0: against the
// ring's own). The Delta names the endpoints added and removed, and the
// survivors whose index changed (Moved). On error the ring is unchanged.
func (r *Ring) Place(indices map[string]int, subsets int) (Delta, error) {
	addrs, err := OrderByIndex(indices)
	if err != nil {
		return Delta{}, fmt.Errorf("origin %q: %w", r.origin, err)
	}
	if subsets < 0 || subsets&(subsets-1) != 0 {
		return Delta{}, fmt.Errorf("origin %q: a shared subset count of %d is not a power of two", r.origin, subsets)
	}
	current := r.subsets
	if subsets > 0 {
		current = subsets
	}
	d := Delta{SubsetsBefore: r.subsets}
	for i, a := range addrs {
		switch from, ok := r.index[a]; {
		case !ok:
			d.Added = append(d.Added, a)
		case from != i:
			d.Moved = append(d.Moved, Move{Address: a, From: from, To: i})
		}
	}
	for _, a := range r.addrs {
		if _, ok := indices[a]; !ok {
			d.Removed = append(d.Removed, a)
		}
	}
	slices.Sort(d.Added)
	slices.Sort(d.Removed)
	next := r.sizing.Subsets(len(addrs), r.fleet.Frontends(), current)
	if len(d.Added) == 0 && len(d.Removed) == 0 && len(d.Moved) == 0 && next == r.subsets {
		d.SubsetsAfter = r.subsets
		return d, nil
	}
	r.addrs = addrs
	r.index = make(map[string]int, len(addrs))
	for i, a := range addrs {
		r.index[a] = i
	}
	r.subsets = next
	r.version++
	r.snap = nil
	d.SubsetsAfter = r.subsets
	return d, nil
}

// Indices returns the ring's index assignment: address → index.
func (r *Ring) Indices() map[string]int {
	out := make(map[string]int, len(r.index))
	for a, i := range r.index {
		out[a] = i
	}
	return out
}
