package subset

import (
	"fmt"
	"strings"
)

// Params describes what an Algorithm places: one origin for one fleet.
type Params struct {
	Origin string // seeds ringsteady's shuffle
	Fleet  Fleet
	Sizing Sizing // zero means DefaultSizing
	Seed   uint64 // seeds the comparators' random choices
}

// Algorithm is a subsetting algorithm: it places an origin's endpoints on a
// fleet's frontends. Ringsteady is the one corput serves with; the others are
// comparators that Compare ranks it against.
type Algorithm interface {
	Name() string
	// Place assigns endpoints to the frontends of p.Fleet. Comparators fix
	// their subset size k = ceil(N/S) (or their subset count S) from
	// p.Sizing's fresh choice for the initial N, as a configured size would.
	Place(p Params, endpoints []string) (Placement, error)
}

// Placement is one origin's assignment under an Algorithm, changed by the
// same events that change a live gateway's view.
type Placement interface {
	Add(addr string) error
	Remove(addr string) error
	SetFleet(Fleet) error
	// Resize switches to the given subset count (a power of two): for
	// algorithms with per-frontend subsets, to subsets of ceil(N/subsets)
	// endpoints.
	Resize(subsets int) error
	// Assignment returns every frontend's members, indexed by frontend
	// number g·K + l. The slices are read-only and may be shared.
	Assignment() [][]string
	// Snapshot returns the current assignment as an immutable Snapshot,
	// so a gateway serves every algorithm through Members and Diff.
	Snapshot() *Snapshot
}

// Algorithm names.
const (
	NameRingsteady = "ringsteady"
	NameHashMod    = "hashmod"
	NameRandom     = "random"
	NameRendezvous = "rendezvous"
	NameSRE        = "sre"
	NameNone       = "none"
)

// Algorithms returns the algorithms Compare ranks, ringsteady first. None is
// left out: it does not subset, so its balance and churn are not comparable.
func Algorithms() []Algorithm {
	return []Algorithm{Ringsteady, HashMod, Random, Rendezvous, SRE}
}

// Lookup returns the algorithm called name (config subset.algorithm),
// including none.
func Lookup(name string) (Algorithm, error) {
	var names []string
	for _, a := range append(Algorithms(), None) {
		if a.Name() == name {
			return a, nil
		}
		names = append(names, a.Name())
	}
	return nil, fmt.Errorf("subset algorithm %q: unknown; use one of %s", name, strings.Join(names, ", "))
}

// Ringsteady is the Ring as an Algorithm.
var Ringsteady Algorithm = ringsteady{}

type ringsteady struct{}

func (ringsteady) Name() string { return NameRingsteady }

func (ringsteady) Place(p Params, endpoints []string) (Placement, error) {
	r, err := NewRing(Config{Origin: p.Origin, Sizing: p.Sizing, Fleet: p.Fleet}, endpoints)
	if err != nil {
		return nil, err
	}
	return ringPlacement{r}, nil
}

type ringPlacement struct{ *Ring }

func (p ringPlacement) Add(addr string) error {
	_, err := p.Ring.Add(addr)
	return err
}

func (p ringPlacement) Remove(addr string) error {
	_, err := p.Ring.Remove(addr)
	return err
}

func (p ringPlacement) Resize(subsets int) error {
	return p.SetSizing(FixedSize(ceilDiv(p.Len(), subsets)))
}

func (p ringPlacement) Assignment() [][]string {
	s := p.Snapshot()
	out := make([][]string, s.fleet.Frontends())
	for f := range out {
		fe := s.fleet.Frontend(f)
		out[f] = s.Members(fe.Gateway, fe.Loop)
	}
	return out
}

// PlaceShared sets the ring to a control plane's shared indices (Place):
// ringsteady is the algorithm whose placement can be shared.
func (p ringPlacement) PlaceShared(sh Shared) error {
	_, err := p.Ring.Place(sh.Indices, sh.Subsets)
	return err
}

// Shared is a control plane's placement of one origin: every endpoint's
// ring index, 0..N-1, and the control plane's subset count (0: none sent,
// the gateway's own count is the current one).
type Shared struct {
	Indices map[string]int
	Subsets int
}

// SharedPlacement is a Placement that can be set to shared indices, so
// that every gateway of a fleet holds the same one whatever its history.
// Ringsteady's is; the comparators' are not.
type SharedPlacement interface {
	Placement
	// PlaceShared sets the placement to exactly sh (see Ring.Place); on
	// error (ErrIndices, a count that is not a power of two) it is
	// unchanged.
	PlaceShared(sh Shared) error
}

var _ SharedPlacement = ringPlacement{}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
