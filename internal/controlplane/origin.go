package controlplane

import (
	"cmp"
	"slices"

	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/subset"
)

// unboundedFleet is the fleet the control plane's rings are placed for:
// none in particular. A Ring caps its subset count by its fleet's
// frontends F; the control plane does not know F (each gateway has its
// own loops × fleet.size, and the fleet changes size), so it sizes for an
// unbounded F: its count is the hysteresis's choice for N alone, capped
// only by N. Each gateway then computes Sizing.Subsets(N, its F, that
// count): the control plane's count where its own F allows it, else its
// own fresh choice — the same on every gateway of the same F.
var unboundedFleet = subset.Fleet{Gateways: 1 << 30, Loops: 1}

// origin is the writer's bookkeeping for one origin: its ring (the index
// assignment, by subset.Ring's rules), its members' zones and weights, the
// endpoints that drain, and what was last published.
type origin struct {
	name      string
	sizing    subset.Sizing
	ring      *subset.Ring // nil until the first membership (or a restored one)
	members   map[string]discovery.Endpoint
	draining  []string    // sorted; never on the ring
	published *Assignment // nil before the first publish
}

// newOrigin returns an origin, restored from its persisted assignment
// when there is one: the ring is placed at exactly the persisted indices
// and subset count, so that a restart changes no index.
func newOrigin(name string, z subset.Sizing, restored *Assignment) (*origin, error) {
	o := &origin{name: name, sizing: z, members: map[string]discovery.Endpoint{}}
	if restored == nil {
		return o, nil
	}
	ring, err := subset.NewRing(o.config(), nil)
	if err != nil {
		return nil, err
	}
	if _, err := ring.Place(restored.Indices(), restored.Subsets); err != nil {
		return nil, err
	}
	o.ring = ring
	for _, e := range restored.Endpoints {
		o.members[e.Address] = discovery.Endpoint{Address: e.Address, Zone: e.Zone, Weight: e.Weight}
	}
	o.draining = slices.Clone(restored.Draining)
	o.published = restored
	return o, nil
}

func (o *origin) config() subset.Config {
	return subset.Config{Origin: o.name, Sizing: o.sizing, Fleet: unboundedFleet}
}

// setSizing changes the sizing rule; the ring re-evaluates its count with
// hysteresis against the current one.
func (o *origin) setSizing(z subset.Sizing) error {
	if z == o.sizing {
		return nil
	}
	o.sizing = z
	if o.ring == nil {
		return nil
	}
	return o.ring.SetSizing(z)
}

// setMembers makes the ring's membership eps, and draining the endpoints
// that drain (published DRAINING, never on the ring; an address in both
// serves). The first membership of an origin is its initial set, shuffled
// by NewRing (as Zuul does); after that the change is placed by
// joinIntoHoles: the endpoints that stay keep their indices where they
// can. A ring that is empty has no index to keep, so the set that refills
// it is an initial set again, shuffled.
func (o *origin) setMembers(eps []discovery.Endpoint, draining []string) error {
	addrs := make([]string, len(eps))
	members := make(map[string]discovery.Endpoint, len(eps))
	for i, e := range eps {
		addrs[i] = e.Address
		members[e.Address] = e
	}
	if o.ring == nil || (o.ring.Len() == 0 && len(addrs) > 0) {
		ring, err := subset.NewRing(o.config(), addrs)
		if err != nil {
			return err
		}
		o.ring = ring
	} else if _, err := o.ring.Place(joinIntoHoles(o.ring.Indices(), addrs), 0); err != nil {
		return err
	}
	o.members = members
	o.draining = nil
	for _, a := range draining {
		if _, serves := members[a]; !serves {
			o.draining = append(o.draining, a)
		}
	}
	slices.Sort(o.draining)
	o.draining = slices.Compact(o.draining)
	return nil
}

// joinIntoHoles places the membership want on a ring that holds current
// (address → index): the endpoints that stay keep their indices below
// the new size N; the holes below N (indices of endpoints that left, or
// never held) are filled by the joining endpoints first, in address
// order, then by the endpoints that stay above N, in index order; the
// remaining joiners take the indices after. It is subset.Ring.Sync's rule
// (a hole filled by the highest, a join at the end) with the joins of a
// batch placed before its leaves: in a rolling update, where a new pod
// comes as an old one goes, the new pod takes the old one's index and no
// other endpoint moves, where Sync would move the highest pod that stays.
func joinIntoHoles(current map[string]int, want []string) map[string]int {
	n := len(want)
	out := make(map[string]int, n)
	taken := make([]bool, n)
	var joiners, displaced []string
	for _, a := range want {
		i, ok := current[a]
		switch {
		case !ok:
			joiners = append(joiners, a)
		case i < n:
			out[a] = i
			taken[i] = true
		default:
			displaced = append(displaced, a)
		}
	}
	slices.Sort(joiners)
	slices.SortFunc(displaced, func(x, y string) int { return cmp.Compare(current[x], current[y]) })
	next := 0
	for _, a := range append(joiners, displaced...) {
		for taken[next] {
			next++
		}
		out[a] = next
		taken[next] = true
	}
	return out
}

// assignment is what the origin publishes now, versioned as the last
// published one; nil before it has a membership.
func (o *origin) assignment() *Assignment {
	if o.ring == nil {
		return nil
	}
	a := &Assignment{Subsets: o.ring.Subsets(), Endpoints: make([]Endpoint, 0, o.ring.Len())}
	for addr, i := range o.ring.Indices() {
		m := o.members[addr]
		a.Endpoints = append(a.Endpoints, Endpoint{Address: addr, Zone: m.Zone, Weight: m.Weight, Index: i})
	}
	slices.SortFunc(a.Endpoints, func(x, y Endpoint) int { return cmp.Compare(x.Index, y.Index) })
	a.Draining = slices.Clone(o.draining)
	if o.published != nil {
		a.Version = o.published.Version
	}
	return a
}

// sortEndpoints orders eps by address, a membership's canonical order.
func sortEndpoints(eps []discovery.Endpoint) {
	slices.SortFunc(eps, func(a, b discovery.Endpoint) int { return cmp.Compare(a.Address, b.Address) })
}
