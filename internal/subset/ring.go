package subset

import (
	"errors"
	"fmt"
	"slices"

	"github.com/corput/corput/internal/rng"
)

// Errors returned (wrapped) by Ring deltas.
var (
	ErrDuplicate = errors.New("endpoint already on the ring")
	ErrUnknown   = errors.New("endpoint not on the ring")
	ErrEmpty     = errors.New("empty endpoint address")
)

// Config describes one origin's ring. The zero Sizing means DefaultSizing and
// the zero Fleet means one gateway with one loop.
type Config struct {
	Origin string // seeds the initial shuffle; the same on every gateway
	Sizing Sizing
	Fleet  Fleet
}

// Ring is one origin's Ringsteady placement. It is owned by one goroutine
// (discovery applies deltas to it); readers use the immutable Snapshots it
// publishes. Invariants: addrs holds indices 0..N-1 densely, index is its
// inverse, and subsets is a power of two with 1 ≤ subsets ≤ max(1, N).
type Ring struct {
	origin  string
	sizing  Sizing
	fleet   Fleet
	addrs   []string       // addrs[i] holds index i
	index   map[string]int // address → index
	subsets int
	version uint64
	snap    *Snapshot // cached Snapshot of version, nil after a change
}

// Move is a surviving endpoint whose index changed to fill a hole.
type Move struct {
	Address  string
	From, To int
}

// Delta reports what one change did to the ring.
type Delta struct {
	Added, Removed []string
	Moved          []Move
	SubsetsBefore  int
	SubsetsAfter   int
}

// NewRing builds the ring of cfg.Origin from its initial endpoints.
func NewRing(cfg Config, endpoints []string) (*Ring, error) {
	cfg.Sizing = cfg.Sizing.orDefault()
	cfg.Fleet = cfg.Fleet.orDefault()
	if err := cfg.Sizing.Validate(); err != nil {
		return nil, fmt.Errorf("origin %q: %w", cfg.Origin, err)
	}
	if err := cfg.Fleet.Validate(); err != nil {
		return nil, fmt.Errorf("origin %q: %w", cfg.Origin, err)
	}
	r := &Ring{origin: cfg.Origin, sizing: cfg.Sizing, fleet: cfg.Fleet, index: make(map[string]int, len(endpoints))}
	if err := r.checkNew(endpoints); err != nil {
		return nil, err
	}
	r.addrs = slices.Clone(endpoints)
	slices.Sort(r.addrs)
	shuffle(r.addrs, rng.New(hashString(cfg.Origin)))
	for i, a := range r.addrs {
		r.index[a] = i
	}
	r.subsets = r.sizing.Subsets(len(r.addrs), r.fleet.Frontends(), 0)
	return r, nil
}

// Add puts a new endpoint at the lowest free index, N.
func (r *Ring) Add(addr string) (Delta, error) {
	if err := r.checkNew([]string{addr}); err != nil {
		return Delta{}, err
	}
	return r.apply([]string{addr}, nil), nil
}

// Remove takes an endpoint off the ring; the endpoint with the highest index
// moves into its hole so indices stay dense.
func (r *Ring) Remove(addr string) (Delta, error) {
	if _, ok := r.index[addr]; !ok {
		return Delta{}, fmt.Errorf("origin %q: remove %q: %w", r.origin, addr, ErrUnknown)
	}
	return r.apply(nil, []string{addr}), nil
}

// Sync makes the ring's membership equal to endpoints by deltas: the missing
// ones are removed as one batch (each hole filled by a survivor from the top,
// so no survivor moves twice), then the new ones are added in sorted order.
// The subset count is re-evaluated once, after both.
func (r *Ring) Sync(endpoints []string) (Delta, error) {
	want := make(map[string]bool, len(endpoints))
	var adds []string
	for _, a := range endpoints {
		if a == "" {
			return Delta{}, fmt.Errorf("origin %q: sync: %w", r.origin, ErrEmpty)
		}
		if want[a] {
			return Delta{}, fmt.Errorf("origin %q: sync: %q listed twice: %w", r.origin, a, ErrDuplicate)
		}
		want[a] = true
		if _, ok := r.index[a]; !ok {
			adds = append(adds, a)
		}
	}
	var removes []string
	for _, a := range r.addrs {
		if !want[a] {
			removes = append(removes, a)
		}
	}
	slices.Sort(adds)
	return r.apply(adds, removes), nil
}

// SetFleet changes the fleet (a gateway joined or left, or the loop count
// changed) and re-evaluates the subset count, which F caps.
func (r *Ring) SetFleet(f Fleet) error {
	if err := f.Validate(); err != nil {
		return fmt.Errorf("origin %q: %w", r.origin, err)
	}
	r.fleet = f
	r.resize()
	return nil
}

// SetSizing changes the sizing rule (a config reload) and re-evaluates the
// subset count with hysteresis against the current one.
func (r *Ring) SetSizing(z Sizing) error {
	z = z.orDefault()
	if err := z.Validate(); err != nil {
		return fmt.Errorf("origin %q: %w", r.origin, err)
	}
	r.sizing = z
	r.resize()
	return nil
}

// Len returns the number of endpoints N.
func (r *Ring) Len() int { return len(r.addrs) }

// Subsets returns the current subset count S.
func (r *Ring) Subsets() int { return r.subsets }

// Fleet returns the fleet the ring is placed for.
func (r *Ring) Fleet() Fleet { return r.fleet }

// Index returns addr's index, and false if it is not on the ring.
func (r *Ring) Index(addr string) (int, bool) {
	i, ok := r.index[addr]
	return i, ok
}

// Snapshot returns the immutable view of the ring's current state. It is
// built once per change and shared by later calls.
func (r *Ring) Snapshot() *Snapshot {
	if r.snap == nil {
		r.snap = newSnapshot(r.origin, r.version, r.fleet, r.subsets, r.addrs)
	}
	return r.snap
}

// checkNew reports an empty, repeated or already placed address in addrs.
func (r *Ring) checkNew(addrs []string) error {
	seen := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		if a == "" {
			return fmt.Errorf("origin %q: %w", r.origin, ErrEmpty)
		}
		if _, ok := r.index[a]; ok || seen[a] {
			return fmt.Errorf("origin %q: add %q: %w", r.origin, a, ErrDuplicate)
		}
		seen[a] = true
	}
	return nil
}

// apply removes then adds validated endpoints and re-evaluates S.
func (r *Ring) apply(adds, removes []string) Delta {
	d := Delta{Added: adds, Removed: removes, SubsetsBefore: r.subsets}
	if len(adds) == 0 && len(removes) == 0 {
		d.SubsetsAfter = r.subsets
		return d
	}
	d.Moved = r.removeBatch(removes)
	for _, a := range adds {
		r.index[a] = len(r.addrs)
		r.addrs = append(r.addrs, a)
	}
	r.resize()
	d.SubsetsAfter = r.subsets
	return d
}

// removeBatch removes endpoints known to be on the ring. The surviving
// indices must end up as 0..B-1 with B = N − len(removes): every hole below
// B is filled by one survivor from [B, N), and no other endpoint moves.
func (r *Ring) removeBatch(removes []string) []Move {
	n := len(r.addrs)
	b := n - len(removes)
	holes := make([]int, 0, len(removes))
	for _, a := range removes {
		if i := r.index[a]; i < b {
			holes = append(holes, i)
		}
		delete(r.index, a)
	}
	slices.Sort(holes)
	var moves []Move
	for i := b; i < n; i++ {
		a := r.addrs[i]
		if _, survives := r.index[a]; !survives {
			continue
		}
		to := holes[len(moves)]
		r.addrs[to] = a
		r.index[a] = to
		moves = append(moves, Move{Address: a, From: i, To: to})
	}
	clear(r.addrs[b:])
	r.addrs = r.addrs[:b]
	return moves
}

// resize re-evaluates S after a change and invalidates the snapshot.
func (r *Ring) resize() {
	r.subsets = r.sizing.Subsets(len(r.addrs), r.fleet.Frontends(), r.subsets)
	r.version++
	r.snap = nil
}
