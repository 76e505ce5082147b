package balance

import (
	"math"
	"math/bits"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/rng"
)

// The sticky policies, maglev and ring_hash, send every request of a key
// to the same endpoint, from every loop of every gateway, under bounded
// load:
//
//   - The key order is built from the origin's membership alone — the
//     endpoints' addresses and weights, sorted by address — never from a
//     loop's subset, local history or randomness: every loop and every
//     gateway that has the same membership has the same order. It is
//     rebuilt only when an address or a weight changes; ejection, panic,
//     slow start and load act at pick time, along the order.
//   - maglev: Maglev's lookup table (Eisenbud et al., NSDI 2016) of M
//     slots (a prime ≥ 100·N, 65,537 by default), each endpoint filling
//     its preferred slots (offset + j·skip mod M, from the xxhash of its
//     address) in turn, weighted: an endpoint of weight w takes w/w_max
//     slots per round. A key's order is the table from slot h mod M
//     onward.
//   - ring_hash: a ketama ring of 100 points per unit of weight (xxhash
//     of "address#i"; scaled down alike past 2^18 points). A key's order is the
//     ring clockwise from the first point ≥ h (binary search).
//   - Bounded load (Mirrokni, Thorup, Zadimoghaddam 2018): walking the
//     key's order, a request goes to the first candidate whose requests in
//     flight (Endpoint.Active: every loop of the gateway) are under
//     ⌈c·(m+1)·w'/W⌉: c is balance_factor, m the origin's requests in
//     flight at the gateway, keyed or not (Origin.inflight, counted while
//     the policy is sticky), W the candidates' weight
//     and w' the endpoint's weight scaled by its slow-start ramp — for
//     equal weights and no ramp, ⌈c·(m+1)/n⌉. A warming endpoint keeps
//     its keys; what is above its scaled bound moves on.
//   - The candidates are the endpoints in service (every member in panic):
//     an ejected endpoint's keys go to the next endpoint in their order,
//     and come back when it returns. The walk also skips the endpoints a
//     retry avoids.
//   - The walk is bounded (walkCap): with c ≥ 1 and no ramp some candidate
//     is always under its bound, and the cap reaches every endpoint of the
//     order with overwhelming probability; when it finds none (racing
//     picks, ramps), the key's first candidate takes the request.
//   - A request without a key is placed by the fallback policy over the
//     whole origin. Zone preference does not apply to a sticky origin.

// Key is a request's key for the sticky policies: the xxhash of its value.
// The zero Key is "no key": the fallback policy places the request.
type Key struct {
	h  uint64
	ok bool
}

// KeyOf is the key of value v; an empty value is no key.
func KeyOf(v []byte) Key {
	if len(v) == 0 {
		return Key{}
	}
	return Key{h: xxhash.Sum64(v), ok: true}
}

// KeyOfString is KeyOf for a string.
func KeyOfString(v string) Key {
	if v == "" {
		return Key{}
	}
	return Key{h: xxhash.Sum64String(v), ok: true}
}

// Valid reports whether k is a key (not the zero Key).
func (k Key) Valid() bool { return k.ok }

// ringPoints is the ring's points per unit of weight, and maxRingPoints
// the most points a ring has: a larger total weight scales every
// endpoint's points down alike.
const (
	ringPoints    = 100
	maxRingPoints = 1 << 18
)

// keyTable is an origin's key order: maglev's lookup table or the ring's
// points in hash order, as indices into eps. Immutable once built.
type keyTable struct {
	policy Policy
	eps    []*Endpoint // the members, sorted by address
	sig    []Member    // what it was built from: address and weight, sorted
	index  map[*Endpoint]int32
	seq    []int32  // the order: endpoint index at each slot or point
	hashes []uint64 // ring_hash: the points' hashes, ascending; nil for maglev
	walk   int      // most slots a pick walks (walkCap)
}

// start is the slot where key hash h's order begins.
func (t *keyTable) start(h uint64) int {
	if t.hashes == nil {
		return int(h % uint64(len(t.seq)))
	}
	i, _ := slices.BinarySearch(t.hashes, h)
	if i == len(t.hashes) {
		i = 0
	}
	return i
}

// walkCap bounds the slots a pick walks over an order of n endpoints and
// size slots: 4·n·(log2 n + 1), enough to meet every endpoint (a
// coupon collector needs about n·ln n slots), at most the whole order.
func walkCap(n, size int) int { return min(size, 4*n*(bits.Len(uint(n))+1)) }

// tableSize is maglev's M for n endpoints: the configured size, or the
// next prime ≥ 100·n when that is larger.
func tableSize(configured, n int) int {
	if configured >= 100*n {
		return configured
	}
	return config.NextPrime(100 * n)
}

// buildTable builds pol's order over eps (any order) with their weights.
func buildTable(pol Policy, configured int, eps []*Endpoint) *keyTable {
	t := &keyTable{policy: pol, eps: slices.Clone(eps)}
	slices.SortFunc(t.eps, func(a, b *Endpoint) int {
		if a.addr < b.addr {
			return -1
		}
		if a.addr > b.addr {
			return 1
		}
		return 0
	})
	t.index = make(map[*Endpoint]int32, len(t.eps))
	t.sig = make([]Member, len(t.eps))
	w := make([]float64, len(t.eps))
	for i, e := range t.eps {
		t.index[e] = int32(i)
		t.sig[i] = Member{Address: e.addr, Weight: e.weight}
		w[i] = float64(e.weight)
	}
	if len(t.eps) == 0 {
		return t
	}
	addrs := make([]string, len(t.eps))
	for i, e := range t.eps {
		addrs[i] = e.addr
	}
	if pol == Maglev {
		t.seq = maglevTable(addrs, w, tableSize(configured, len(addrs)))
	} else {
		t.seq, t.hashes = ketamaRing(addrs, w)
	}
	t.walk = walkCap(len(addrs), len(t.seq))
	return t
}

// maglevTable fills a table of m slots (m prime) with indices of addrs:
// in each round every endpoint earns w/w_max slots and takes them, each
// its next preferred slot still empty (Maglev's population, weighted).
func maglevTable(addrs []string, w []float64, m int) []int32 {
	n := len(addrs)
	M := uint64(m)
	offset, skip, next := make([]uint64, n), make([]uint64, n), make([]uint64, n)
	credit := make([]float64, n)
	wmax := slices.Max(w)
	for i, a := range addrs {
		h := xxhash.Sum64String(a)
		offset[i] = h % M
		skip[i] = rng.Mix64(h)%(M-1) + 1
	}
	table := make([]int32, m)
	for i := range table {
		table[i] = -1
	}
	for filled := 0; filled < m; {
		for i := 0; i < n && filled < m; i++ {
			credit[i] += w[i] / wmax
			for credit[i] >= 1 && filled < m {
				credit[i]--
				for {
					c := (offset[i] + next[i]*skip[i]) % M
					next[i]++
					if table[c] < 0 {
						table[c] = int32(i)
						filled++
						break
					}
				}
			}
		}
	}
	return table
}

// ketamaRing places 100·w points per endpoint (scaled down alike when
// the total would pass maxRingPoints; at least one) at the xxhash of
// "address#i", and returns the points' endpoints and hashes in hash order
// (ties by endpoint index). An endpoint's points depend only on its own
// address and weight while the total stays under the cap, so only the
// keys of an endpoint that leaves move.
func ketamaRing(addrs []string, w []float64) ([]int32, []uint64) {
	type point struct {
		h  uint64
		ep int32
	}
	var sum float64
	for _, x := range w {
		sum += x
	}
	scale := min(1, maxRingPoints/(ringPoints*sum))
	var pts []point
	var buf []byte
	for i, a := range addrs {
		k := max(1, int(math.Round(ringPoints*w[i]*scale)))
		for j := range k {
			buf = strconv.AppendInt(append(append(buf[:0], a...), '#'), int64(j), 10)
			pts = append(pts, point{xxhash.Sum64(buf), int32(i)})
		}
	}
	slices.SortFunc(pts, func(a, b point) int {
		switch {
		case a.h < b.h:
			return -1
		case a.h > b.h:
			return 1
		}
		return int(a.ep - b.ep)
	})
	seq, hs := make([]int32, len(pts)), make([]uint64, len(pts))
	for i, p := range pts {
		seq[i], hs[i] = p.ep, p.h
	}
	return seq, hs
}

// tableLocked keeps the origin's key order current: rebuilt when the
// policy, the table size, an address or a weight changed, nil for a policy
// that is not sticky.
func (o *Origin) tableLocked() {
	c := o.t().cfg
	if !c.Policy.Sticky() {
		o.tab = nil
		return
	}
	if t := o.tab; t != nil && t.policy == c.Policy && (c.Policy != Maglev || len(t.seq) == tableSize(c.TableSize, len(o.list))) &&
		len(t.sig) == len(o.list) && t.sameMembers(o.list) {
		return
	}
	o.tab = buildTable(c.Policy, c.TableSize, o.list)
}

// sameMembers reports whether t was built from eps' addresses and weights.
func (t *keyTable) sameMembers(eps []*Endpoint) bool {
	for _, e := range eps {
		i, ok := t.index[e]
		if !ok || t.sig[i].Weight != e.weight {
			return false
		}
	}
	return true
}

// keyedView is what a sticky snapshot adds: the origin's order and, per
// endpoint of the order, its candidate entry (nil: not a candidate now).
type keyedView struct {
	tab    *keyTable
	at     []*entry
	factor float64 // balance_factor
}

// keyedLocked is the view of the candidates in g over the origin's order.
func (o *Origin) keyedLocked(g *group) *keyedView {
	v := &keyedView{tab: o.tab, at: make([]*entry, len(o.tab.eps)), factor: o.t().cfg.BalanceFactor}
	for i := range g.entries {
		if k, ok := o.tab.index[g.entries[i].ep]; ok {
			v.at[k] = &g.entries[i]
		}
	}
	return v
}

// boundSlack absorbs float rounding, so that an exact integer bound is not
// taken for the next one up.
const boundSlack = 1e-9

// keyed walks key hash h's order from its start and returns the first
// candidate (not in avoid) under its load bound, else the first candidate
// it met, else nil. m is the origin's requests in flight.
func (v *keyedView) keyed(g *group, h uint64, now, m int64, avoid []*Endpoint) *entry {
	t := v.tab
	if len(t.seq) == 0 || len(g.entries) == 0 {
		return nil
	}
	share := v.factor * float64(m+1) / g.sumWeight
	pos := t.start(h)
	var first *entry
	for range t.walk {
		if e := v.at[t.seq[pos]]; e != nil && !tried(avoid, e.ep) {
			if first == nil {
				first = e
			}
			if float64(e.ep.active.Load()) < math.Ceil(share*g.weight(e, now)-boundSlack) {
				return e
			}
		}
		if pos++; pos == len(t.seq) {
			pos = 0
		}
	}
	return first
}

// PickKeyed is PickCost for a request with key k: on a sticky origin a
// request with a key goes to its endpoint under bounded load (see the
// sticky policies above); without one, or on any other origin, it is
// PickCost. It ends with End(ticket, …).
func (p *Picker) PickKeyed(cost float64, k Key) (*Endpoint, Ticket, error) {
	if s := p.snap.Load(); s.keyed != nil && k.ok {
		if ep, t, ok := p.pickKeyed(s, cost, k, nil); ok {
			return ep, t, nil
		}
	}
	return p.PickCost(cost)
}

// PickKeyedAvoiding is PickCostAvoiding for a request with key k: the next
// endpoint of its order that it has not tried, under bounded load.
func (p *Picker) PickKeyedAvoiding(avoid []*Endpoint, cost float64, k Key) (*Endpoint, Ticket, error) {
	if s := p.snap.Load(); s.keyed != nil && k.ok {
		if ep, t, ok := p.pickKeyed(s, cost, k, avoid); ok {
			return ep, t, nil
		}
	}
	return p.PickCostAvoiding(avoid, cost)
}

func (p *Picker) pickKeyed(s *snapshot, cost float64, k Key, avoid []*Endpoint) (*Endpoint, Ticket, bool) {
	var now int64
	if s.clock {
		now = p.origin.nowNs()
	}
	e := s.keyed.keyed(&s.groups[0], k.h, now, p.origin.inflight.Load(), avoid)
	if e == nil {
		return nil, Ticket{}, false
	}
	ep, t := p.place(s, e, workUnits(cost), now, true)
	return ep, t, true
}

// Hash is the key's 64-bit hash (0 for the zero Key): what places it,
// for a caller that places keys its own way (a route's split).
func (k Key) Hash() uint64 { return k.h }
