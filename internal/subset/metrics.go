package subset

import (
	"fmt"
	"math"

	"github.com/corput/corput/internal/rng"
)

// Coverage describes how evenly a fleet's frontends cover an origin's
// endpoints: per endpoint, the number of frontends that use it.
type Coverage struct {
	MaxOverMean float64 `json:"max_over_mean"`
	MinOverMean float64 `json:"min_over_mean"`
	CV          float64 `json:"cv"` // coefficient of variation: stddev / mean
}

// Churn is what one event changed, counted in (frontend, endpoint) pairs —
// each pair is a pool that is opened or closed.
type Churn struct {
	PairsChanged     float64 `json:"pairs_changed"` // created + removed
	PairsCreated     float64 `json:"pairs_created"`
	PairsRemoved     float64 `json:"pairs_removed"`
	Fraction         float64 `json:"fraction"`          // pairs_changed / pairs before the event
	FrontendsTouched float64 `json:"frontends_touched"` // frontends whose members changed, new ones included
}

// assignment is a Placement's assignment with endpoints interned as ids.
type assignment [][]int32

// interner gives every address a small id, so assignments compare cheaply.
type interner map[string]int32

func (in interner) id(a string) int32 {
	id, ok := in[a]
	if !ok {
		id = int32(len(in))
		in[a] = id
	}
	return id
}

func (in interner) intern(members [][]string) assignment {
	out := make(assignment, len(members))
	for f, ms := range members {
		ids := make([]int32, len(ms))
		for i, a := range ms {
			ids[i] = in.id(a)
		}
		out[f] = ids
	}
	return out
}

// coverage measures a over the endpoints with the given ids: endpoints no
// frontend uses count as zero coverage.
func coverage(a assignment, endpoints []int32, ids int) Coverage {
	count := make([]float64, ids)
	for _, ms := range a {
		for _, id := range ms {
			count[id]++
		}
	}
	var sum, sq float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, id := range endpoints {
		c := count[id]
		sum += c
		sq += c * c
		lo, hi = min(lo, c), max(hi, c)
	}
	n := float64(len(endpoints))
	mean := sum / n
	if mean == 0 {
		return Coverage{}
	}
	variance := max(0, sq/n-mean*mean)
	return Coverage{MaxOverMean: hi / mean, MinOverMean: lo / mean, CV: math.Sqrt(variance) / mean}
}

// churn counts the pairs that differ between before and after; frontends
// present in only one of them count with an empty set in the other.
func churn(before, after assignment, ids int) Churn {
	stamp := make([]int, ids)
	var c Churn
	var total int
	for f := range max(len(before), len(after)) {
		var b, a []int32
		if f < len(before) {
			b = before[f]
		}
		if f < len(after) {
			a = after[f]
		}
		total += len(b)
		for _, id := range b {
			stamp[id] = f + 1
		}
		common := 0
		for _, id := range a {
			if stamp[id] == f+1 {
				common++
			}
		}
		created, removed := len(a)-common, len(b)-common
		c.PairsCreated += float64(created)
		c.PairsRemoved += float64(removed)
		if created+removed > 0 {
			c.FrontendsTouched++
		}
	}
	c.PairsChanged = c.PairsCreated + c.PairsRemoved
	if total > 0 {
		c.Fraction = c.PairsChanged / float64(total)
	}
	return c
}

// distinctSubsets counts the different member sets in a, order ignored.
func distinctSubsets(a assignment) int {
	seen := make(map[[2]uint64]bool)
	for _, ms := range a {
		var sum, xor uint64
		for _, id := range ms {
			h := rng.Mix64(uint64(id) + 1)
			sum += h
			xor ^= h
		}
		seen[[2]uint64{sum, xor}] = true
	}
	return len(seen)
}

// event is one change that churn is measured for.
type event struct {
	name  string                 // as in the JSON and the table
	of    func(*ChurnSet) *Churn // where its result goes
	apply func(Placement, *trial) error
}

// The events, in report order. Each is applied to a fresh placement of the
// trial's membership.
var events = [...]event{
	{"add_endpoint", func(c *ChurnSet) *Churn { return &c.AddEndpoint },
		func(p Placement, t *trial) error { return p.Add(t.newAddr) }},
	{"remove_endpoint", func(c *ChurnSet) *Churn { return &c.RemoveEndpoint },
		func(p Placement, t *trial) error { return p.Remove(t.victim) }},
	{"add_gateway", func(c *ChurnSet) *Churn { return &c.AddGateway },
		func(p Placement, t *trial) error {
			return p.SetFleet(Fleet{Gateways: t.params.Fleet.Gateways + 1, Loops: t.params.Fleet.Loops})
		}},
	{"subset_count_change", func(c *ChurnSet) *Churn { return &c.SubsetCountChange },
		func(p Placement, t *trial) error { return p.Resize(2 * t.subsets) }},
}

// trial is one random membership and the events applied to it.
type trial struct {
	params  Params
	addrs   []string
	newAddr string // an address not in addrs, landing anywhere in sorted order
	victim  string // a member chosen at random
	subsets int    // the sizing rule's fresh S for addrs
}

func newTrial(sc Scenario, sizing Sizing, i int) *trial {
	src := rng.New(rng.Mix64(sc.Seed ^ rng.Mix64(uint64(i)+1)))
	seen := make(map[string]bool, sc.Endpoints+1)
	draw := func() string {
		for {
			v := src.Uint64()
			a := fmt.Sprintf("10.%d.%d.%d:8080", byte(v>>16), byte(v>>8), byte(v))
			if !seen[a] {
				seen[a] = true
				return a
			}
		}
	}
	t := &trial{
		params: Params{Origin: fmt.Sprintf("origin-%d", i), Fleet: sc.Fleet, Sizing: sizing, Seed: src.Uint64()},
		addrs:  make([]string, sc.Endpoints),
	}
	for j := range t.addrs {
		t.addrs[j] = draw()
	}
	t.newAddr = draw()
	t.victim = t.addrs[src.IntN(len(t.addrs))]
	t.subsets = sizing.Subsets(sc.Endpoints, sc.Fleet.Frontends(), 0)
	return t
}
