package subset

import (
	"fmt"
	"slices"

	"github.com/corput/corput/internal/rng"
)

// comparator is the state the comparators share: the membership kept sorted
// (the order hashmod, random and sre work from), the fleet, and the subset
// size k and count S fixed when placed. Each comparator adds only its assign
// rule.
type comparator struct {
	sorted  []string
	fleet   Fleet
	k       int // endpoints per subset, for per-frontend subsets
	subsets int // subset count, for shared subsets
	seed    uint64
	origin  string
	version uint64 // counts changes, for Snapshot
	assign  func(c *comparator) [][]string
}

// newComparator validates p and endpoints and fixes k and S from the sizing
// rule's fresh choice, the way a configured size would fix them.
func newComparator(p Params, endpoints []string, assign func(*comparator) [][]string) (*comparator, error) {
	p.Fleet = p.Fleet.orDefault()
	p.Sizing = p.Sizing.orDefault()
	if err := p.Fleet.Validate(); err != nil {
		return nil, fmt.Errorf("origin %q: %w", p.Origin, err)
	}
	if err := p.Sizing.Validate(); err != nil {
		return nil, fmt.Errorf("origin %q: %w", p.Origin, err)
	}
	c := &comparator{fleet: p.Fleet, seed: p.Seed, origin: p.Origin, assign: assign, sorted: slices.Clone(endpoints)}
	slices.Sort(c.sorted)
	for i, a := range c.sorted {
		if a == "" {
			return nil, fmt.Errorf("origin %q: %w", p.Origin, ErrEmpty)
		}
		if i > 0 && a == c.sorted[i-1] {
			return nil, fmt.Errorf("origin %q: %q listed twice: %w", p.Origin, a, ErrDuplicate)
		}
	}
	c.resizeTo(p.Sizing.Subsets(len(c.sorted), p.Fleet.Frontends(), 0))
	return c, nil
}

func (c *comparator) Add(addr string) error {
	if addr == "" {
		return ErrEmpty
	}
	i, found := slices.BinarySearch(c.sorted, addr)
	if found {
		return fmt.Errorf("add %q: %w", addr, ErrDuplicate)
	}
	c.sorted = slices.Insert(c.sorted, i, addr)
	c.version++
	return nil
}

func (c *comparator) Remove(addr string) error {
	i, found := slices.BinarySearch(c.sorted, addr)
	if !found {
		return fmt.Errorf("remove %q: %w", addr, ErrUnknown)
	}
	c.sorted = slices.Delete(c.sorted, i, i+1)
	c.version++
	return nil
}

func (c *comparator) SetFleet(f Fleet) error {
	if err := f.Validate(); err != nil {
		return err
	}
	c.fleet = f
	c.version++
	return nil
}

func (c *comparator) Resize(subsets int) error {
	if subsets < 1 {
		return fmt.Errorf("resize to %d subsets: must be at least 1", subsets)
	}
	c.resizeTo(subsets)
	return nil
}

func (c *comparator) resizeTo(subsets int) {
	c.version++
	c.subsets = subsets
	c.k = min(max(1, ceilDiv(len(c.sorted), subsets)), len(c.sorted))
}

func (c *comparator) Assignment() [][]string { return c.assign(c) }

func (c *comparator) Snapshot() *Snapshot {
	return newFrontendSnapshot(c.origin, c.version, c.fleet, c.sorted, c.assign(c))
}

// frontendSeed is the seed of frontend f's own random choices.
func (c *comparator) frontendSeed(f int) uint64 {
	return rng.Mix64(c.seed ^ rng.Mix64(uint64(f)+1))
}

// shared returns, for every frontend, the subset numbered f mod len(subsets):
// the frontend mapping of the shared-subset comparators (hashmod, sre).
func (c *comparator) shared(subsets [][]string) [][]string {
	out := make([][]string, c.fleet.Frontends())
	for f := range out {
		out[f] = subsets[f%len(subsets)]
	}
	return out
}

// comparatorAlgorithm adapts an assign rule to Algorithm.
type comparatorAlgorithm struct {
	name   string
	assign func(*comparator) [][]string
}

func (a comparatorAlgorithm) Name() string { return a.name }

func (a comparatorAlgorithm) Place(p Params, endpoints []string) (Placement, error) {
	return newComparator(p, endpoints, a.assign)
}
