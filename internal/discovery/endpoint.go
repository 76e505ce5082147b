package discovery

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
)

// MaxWeight is the largest endpoint weight accepted from any source. It keeps
// weighted pickers' arithmetic far from overflow.
const MaxWeight = 1_000_000

// Endpoint is one member of an origin.
type Endpoint struct {
	Address string // host:port
	Zone    string // locality zone; "" when unknown
	Weight  int    // 1..MaxWeight
	// Indexed says the source gave the endpoint a shared ring index
	// (ring_index, ring.go): RingIndex is then its index and RingSubsets
	// the control plane's subset count for the origin (0: not given).
	Indexed     bool
	RingIndex   int
	RingSubsets int
}

// Update is the complete membership of one origin. The consumer computes
// deltas between consecutive updates; a source never sends a partial set.
// Its ring indices have passed CheckRing: every endpoint has one, or none
// has.
type Update struct {
	Origin    string
	Endpoints []Endpoint // sorted by address, unique addresses
	// Urgent asks the consumer to apply this update at once, past any
	// debounce: an endpoint of the membership the source emitted last is
	// now draining (EDS health status DRAINING: a terminating pod), and
	// must get no new request (docs/discovery.md, "Draining endpoints").
	Urgent bool
}

// Validate reports whether e can be dialled and weighted.
func (e Endpoint) Validate() error {
	host, port, err := net.SplitHostPort(e.Address)
	if err != nil {
		return fmt.Errorf("address %q is not host:port (%v); write it like 10.0.0.7:8080", e.Address, err)
	}
	if host == "" {
		return fmt.Errorf("address %q has no host; write it like 10.0.0.7:8080", e.Address)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("address %q: port %q is not a number in 1..65535", e.Address, port)
	}
	if e.Weight < 1 || e.Weight > MaxWeight {
		return fmt.Errorf("address %q: weight %d is outside 1..%d", e.Address, e.Weight, MaxWeight)
	}
	return nil
}

// sortEndpoints orders eps by address, the canonical order of an Update.
func sortEndpoints(eps []Endpoint) {
	slices.SortFunc(eps, func(a, b Endpoint) int { return cmp.Compare(a.Address, b.Address) })
}
