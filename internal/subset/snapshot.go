package subset

import (
	"math/bits"
	"slices"

	"github.com/corput/corput/internal/rng"
)

// Snapshot is an immutable, fleet-wide assignment of an origin's endpoints
// to frontends at one version. It is safe for concurrent use; the owner
// publishes it with an atomic.Pointer and the request path reads Members
// without locks or allocation. Slices it returns are shared and must not be
// modified.
//
// A Ring's snapshot keeps one member list per subset (frontend f reads slot
// f mod S). Other algorithms' snapshots keep one list per frontend (slot f);
// for them subset j means frontend j's own set, and endpoints have no ring
// position.
type Snapshot struct {
	origin    string
	version   uint64
	fleet     Fleet
	ring      bool   // slots are ring subsets, endpoints are in index order
	log2S     int    // ring only
	mask      uint64 // slot of frontend f = f & mask
	endpoints []string
	members   [][]string // by slot; for a ring, slot r holds the endpoints with index ≡ r (mod S), in index order
}

func newSnapshot(origin string, version uint64, fleet Fleet, subsets int, addrs []string) *Snapshot {
	s := &Snapshot{
		origin:    origin,
		version:   version,
		fleet:     fleet,
		ring:      true,
		log2S:     bits.TrailingZeros(uint(subsets)),
		mask:      uint64(subsets - 1),
		endpoints: slices.Clone(addrs),
		members:   make([][]string, subsets),
	}
	// One backing array in residue-major order; each subset is a
	// capacity-limited window of it, so a caller's append cannot spill
	// into a neighbour.
	backing := make([]string, 0, len(addrs))
	for r := range subsets {
		start := len(backing)
		for i := r; i < len(addrs); i += subsets {
			backing = append(backing, addrs[i])
		}
		s.members[r] = backing[start:len(backing):len(backing)]
	}
	return s
}

// newFrontendSnapshot wraps a per-frontend assignment (indexed by frontend
// number) of the given membership.
func newFrontendSnapshot(origin string, version uint64, fleet Fleet, endpoints []string, a [][]string) *Snapshot {
	return &Snapshot{
		origin:    origin,
		version:   version,
		fleet:     fleet,
		mask:      ^uint64(0),
		endpoints: slices.Clone(endpoints),
		members:   a,
	}
}

// Members returns the endpoints that loop of gateway uses. It is O(1) and
// does not allocate. It panics if gateway or loop is outside the fleet.
func (s *Snapshot) Members(gateway, loop int) []string {
	if uint(gateway) >= uint(s.fleet.Gateways) || uint(loop) >= uint(s.fleet.Loops) {
		panic("subset: Members: frontend outside the fleet")
	}
	return s.members[uint64(gateway*s.fleet.Loops+loop)&s.mask]
}

// SubsetOf returns the subset number (ring arc) that loop of gateway uses.
func (s *Snapshot) SubsetOf(gateway, loop int) int {
	return s.subsetOfSlot(uint64(s.fleet.Number(Frontend{gateway, loop})) & s.mask)
}

// Subset returns the members of subset j: for a ring, the arc
// [j/S, (j+1)/S).
func (s *Snapshot) Subset(j int) []string { return s.members[s.slotOfSubset(j)] }

// Users returns the frontends that use subset j, in frontend-number order.
func (s *Snapshot) Users(j int) []Frontend {
	first := s.slotOfSubset(j)
	if !s.ring {
		return []Frontend{s.fleet.Frontend(first)}
	}
	var out []Frontend
	for f := first; f < s.fleet.Frontends(); f += len(s.members) {
		out = append(out, s.fleet.Frontend(f))
	}
	return out
}

// subsetOfSlot and slotOfSubset convert between slots and subset numbers:
// on a ring, slot r (an index residue) holds arc rev(r), and the bit
// reversal is its own inverse; elsewhere they are the same number.
func (s *Snapshot) subsetOfSlot(r uint64) int {
	if !s.ring {
		return int(r)
	}
	return arcOf(r, s.log2S)
}

func (s *Snapshot) slotOfSubset(j int) int { return s.subsetOfSlot(uint64(j)) }

// Endpoint describes one endpoint's place on the ring, for the admin API.
type Endpoint struct {
	Address  string  `json:"address"`
	Index    int     `json:"index"`
	Position float64 `json:"position"`
	Subset   int     `json:"subset"`
}

// Endpoints returns every endpoint in index order with its ring position and
// subset; Users(e.Subset) lists the frontends that use it. Without a ring,
// endpoints come in sorted order with Position and Subset −1.
func (s *Snapshot) Endpoints() []Endpoint {
	out := make([]Endpoint, len(s.endpoints))
	for i, a := range s.endpoints {
		out[i] = Endpoint{Address: a, Index: i, Position: -1, Subset: -1}
		if s.ring {
			out[i].Position, out[i].Subset = Position(i), arcOf(uint64(i), s.log2S)
		}
	}
	return out
}

// Origin returns the origin's name.
func (s *Snapshot) Origin() string { return s.origin }

// Version counts the ring's changes; it grows with every applied delta.
func (s *Snapshot) Version() uint64 { return s.version }

// Fleet returns the fleet the snapshot assigns.
func (s *Snapshot) Fleet() Fleet { return s.fleet }

// Subsets returns the subset count S: for a ring, the number of arcs;
// otherwise the number of frontends, each with its own set.
func (s *Snapshot) Subsets() int { return len(s.members) }

// Ring reports whether the snapshot comes from a Ringsteady ring.
func (s *Snapshot) Ring() bool { return s.ring }

// Len returns the number of endpoints.
func (s *Snapshot) Len() int { return len(s.endpoints) }

// LoopChange is how one loop's subset changed between two snapshots.
type LoopChange struct {
	Loop    int
	Added   []string
	Removed []string
}

// Diff returns, for each loop of gateway whose members differ between old and
// cur, the endpoints it gained and lost; loops that did not change are left
// out. A nil old counts as an empty assignment, so every loop gains all of
// its members. The gateway uses it to touch only the pools that changed.
func Diff(old, cur *Snapshot, gateway int) []LoopChange {
	loops := max(old.loops(gateway), cur.loops(gateway))
	var out []LoopChange
	for l := range loops {
		a, b := old.membersOrNil(gateway, l), cur.membersOrNil(gateway, l)
		if slices.Equal(a, b) {
			continue
		}
		out = append(out, LoopChange{Loop: l, Added: minus(b, a), Removed: minus(a, b)})
	}
	return out
}

// loops returns how many loops gateway has in s, 0 if s is nil or the
// gateway is outside s's fleet.
func (s *Snapshot) loops(gateway int) int {
	if s == nil || gateway < 0 || gateway >= s.fleet.Gateways {
		return 0
	}
	return s.fleet.Loops
}

func (s *Snapshot) membersOrNil(gateway, loop int) []string {
	if loop >= s.loops(gateway) {
		return nil
	}
	return s.Members(gateway, loop)
}

// minus returns the elements of a that are not in b.
func minus(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}

// Homes maps every endpoint some loop of gateway holds to its home loop:
// of the loops whose subsets hold it, the one its address hashes to
// (rng.FNV). A loop without the endpoint's connection ready borrows the
// home loop's (package pool's Borrow), so an endpoint needs one warm pool
// per gateway, not one per loop. The gateway and the lab place by it.
func (s *Snapshot) Homes(gateway int) map[string]int {
	by := map[string][]int{}
	for l := 0; l < s.fleet.Loops; l++ {
		for _, a := range s.Members(gateway, l) {
			by[a] = append(by[a], l)
		}
	}
	h := make(map[string]int, len(by))
	for a, ls := range by {
		h[a] = ls[rng.FNV(a)%uint64(len(ls))]
	}
	return h
}
