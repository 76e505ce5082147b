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
// assignment, by subset.Ring's rules), its members' zones and weights, and
// what was last published.
type origin struct {
	name      string
	sizing    subset.Sizing
	ring      *subset.Ring // nil until the first membership (or a restored one)
	members   map[string]discovery.Endpoint
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

// setMembers makes the ring's membership eps. The first membership of an
// origin is its initial set, shuffled by NewRing (as Zuul does); after
// that Sync applies the difference: a joining endpoint takes the next
// index, a leaving one's hole is filled by the highest. A ring that is
// empty has no index to keep, so the set that refills it is an initial
// set again, shuffled.
func (o *origin) setMembers(eps []discovery.Endpoint) error {
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
	} else if _, err := o.ring.Sync(addrs); err != nil {
		return err
	}
	o.members = members
	return nil
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
	if o.published != nil {
		a.Version = o.published.Version
	}
	return a
}

// sortEndpoints orders eps by address, a membership's canonical order.
func sortEndpoints(eps []discovery.Endpoint) {
	slices.SortFunc(eps, func(a, b discovery.Endpoint) int { return cmp.Compare(a.Address, b.Address) })
}
