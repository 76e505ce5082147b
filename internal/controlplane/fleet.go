package controlplane

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/discovery"
)

// DefaultFleetGrace is how long a gateway's fleet position is held after
// its last fleet stream closed (--fleet-grace).
const DefaultFleetGrace = 30 * time.Second

// fleetRetry is how soon a fleet change whose state write failed is tried
// again.
const fleetRetry = time.Second

// position is a gateway's fleet position as served.
type position struct{ instance, size int }

// FleetMember is one fleet position, as /admin/fleet lists it.
type FleetMember struct {
	Node      string `json:"node"`
	Instance  int    `json:"instance"`
	Connected bool   `json:"connected"`
}

// fleet assigns gateways dense fleet positions by node id (the writer's
// only; docs/control-plane.md, "Fleet position from the control plane").
//
// Invariants:
//   - slots is dense: the node at instance i is slots[i], each node once,
//     and the size served is len(slots).
//   - slots is what was last persisted and published: a change is written
//     to the state file first, and published only once the write
//     succeeded; a change whose write failed changes nothing and is tried
//     again fleetRetry later.
//   - A node holds its slot while it has an open fleet stream, and for
//     the grace after its last one closed (held has its timer). Only the
//     grace's expiry releases a slot: the highest slot's node moves into
//     the hole, so one gateway moves and the slots stay dense.
//   - A connected node without a slot is in waiting, in the order it
//     came. The nodes that came within one join window are admitted
//     together, at the end, as one change (one write, one size step); a
//     change whose write failed is tried again fleetRetry later.
type fleet struct {
	clk     clock.Clock
	grace   time.Duration
	join    time.Duration // the join window; 0: each node joins at once
	log     *slog.Logger
	metrics *Metrics
	persist func(slots []string) error                                // writes the state file with slots
	publish func(changed map[string]position, removed []string) error // one cache update

	mu      sync.Mutex // guards following; taken before the writer's flushMu
	closed  bool
	slots   []string               // node id by instance
	index   map[string]int         // node id → instance
	streams map[string]int         // open fleet streams per node (> 0 only)
	held    map[string]clock.Timer // grace timers of slot holders without a stream
	waiting []string               // connected nodes without a slot
	admit   clock.Timer            // admits the waiting nodes: the join window's end, or a retry
}

// newFleet restores the persisted slots and publishes them. Every
// restored node starts disconnected, with a fresh grace: a gateway that
// reconnects within it keeps its position, one that does not is
// compacted away.
func newFleet(f *fleet, slots []string) (*fleet, error) {
	f.slots = slices.Clone(slots)
	f.index = make(map[string]int, len(slots))
	f.streams = map[string]int{}
	f.held = map[string]clock.Timer{}
	changed := make(map[string]position, len(slots))
	for i, node := range f.slots {
		f.index[node] = i
		changed[node] = position{i, len(slots)}
	}
	if err := f.publish(changed, nil); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, node := range f.slots {
		f.holdLocked(node, f.grace)
	}
	f.metrics.FleetSize.Set(float64(len(f.slots)))
	if len(f.slots) > 0 {
		f.log.Info("control plane: fleet positions restored; each is held for the grace until its gateway reconnects",
			"size", len(f.slots), "grace", f.grace)
	}
	return f, nil
}

// connect counts a node's fleet stream. Its first one joins the fleet:
// it keeps the slot it holds, or takes the next one.
func (f *fleet) connect(node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.streams[node]++
	if f.streams[node] > 1 {
		return
	}
	f.metrics.FleetConnected.Set(float64(len(f.streams)))
	if i, ok := f.index[node]; ok {
		if t := f.held[node]; t != nil {
			t.Stop()
			delete(f.held, node)
		}
		f.log.Info("control plane: fleet: gateway (re)connected; it keeps its position", "node", node, "instance", i, "size", len(f.slots))
		return
	}
	f.waiting = append(f.waiting, node)
	if f.join <= 0 {
		f.admitLocked()
		return
	}
	f.admitLaterLocked(f.join)
}

// disconnect counts a node's fleet stream closed. After its last one, a
// slot holder's slot is held for the grace.
func (f *fleet) disconnect(node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.streams[node] == 0 {
		return
	}
	if f.streams[node]--; f.streams[node] > 0 {
		return
	}
	delete(f.streams, node)
	f.metrics.FleetConnected.Set(float64(len(f.streams)))
	if i := slices.Index(f.waiting, node); i >= 0 {
		f.waiting = slices.Delete(f.waiting, i, i+1)
		return
	}
	if i, ok := f.index[node]; ok {
		f.holdLocked(node, f.grace)
		f.log.Info("control plane: fleet: gateway disconnected; its position is held for the grace",
			"node", node, "instance", i, "grace", f.grace)
	}
}

// admitLocked gives every waiting node the next slot, in the order they
// came, as one change. Nodes past discovery.MaxFleetSize keep waiting for
// a release.
func (f *fleet) admitLocked() {
	n := min(len(f.waiting), discovery.MaxFleetSize-len(f.slots))
	if n <= 0 {
		if len(f.waiting) > 0 {
			f.log.Error("control plane: fleet: full; gateways wait for a position to be released",
				"max", discovery.MaxFleetSize, "waiting", len(f.waiting))
		}
		return
	}
	joining := f.waiting[:n]
	if !f.commitLocked(append(slices.Clone(f.slots), joining...)) {
		f.admitLaterLocked(fleetRetry)
		return
	}
	for _, node := range joining {
		f.log.Info("control plane: fleet: gateway joined", "node", node, "instance", f.index[node], "size", len(f.slots))
	}
	f.waiting = slices.Clone(f.waiting[n:])
}

// holdLocked arms node's grace timer: when it fires with the node still
// away, its slot is released.
func (f *fleet) holdLocked(node string, d time.Duration) {
	var t clock.Timer
	t = f.clk.AfterFunc(d, func() { f.expire(node, t) })
	f.held[node] = t
}

// expire releases node's slot if t is still its grace timer.
func (f *fleet) expire(node string, t clock.Timer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.held[node] != t {
		return
	}
	delete(f.held, node)
	f.releaseLocked(node)
}

// releaseLocked frees node's slot: the node at the highest slot moves
// into it (unless it is the highest), and the size shrinks by one. A
// release whose write fails is tried again fleetRetry later.
func (f *fleet) releaseLocked(node string) {
	i, last := f.index[node], len(f.slots)-1
	next := slices.Clone(f.slots)
	mover := next[last]
	next[i] = mover
	next = next[:last]
	if !f.commitLocked(next) {
		f.holdLocked(node, fleetRetry)
		return
	}
	f.log.Info("control plane: fleet: position released after the grace", "node", node, "instance", i, "size", len(f.slots))
	if mover != node {
		f.metrics.FleetMoves.Inc()
		f.log.Info("control plane: fleet: gateway moved into the released position", "node", mover, "from", last, "to", i, "size", len(f.slots))
	}
	if len(f.waiting) > 0 {
		f.admitLocked()
	}
}

// commitLocked persists next, then publishes the positions that changed
// (all of them when the size changed) and removes the nodes no longer
// in it. It reports false, changing nothing, when the write fails.
func (f *fleet) commitLocked(next []string) bool {
	if err := f.persist(next); err != nil {
		f.log.Error("control plane: fleet: state write failed; the change is not published and is tried again",
			"retry", fleetRetry, "err", err)
		return false
	}
	index := make(map[string]int, len(next))
	changed := map[string]position{}
	for i, node := range next {
		index[node] = i
		if j, ok := f.index[node]; !ok || j != i || len(next) != len(f.slots) {
			changed[node] = position{i, len(next)}
		}
	}
	var removed []string
	for _, node := range f.slots {
		if _, ok := index[node]; !ok {
			removed = append(removed, node)
		}
	}
	f.slots, f.index = next, index
	f.metrics.FleetSize.Set(float64(len(next)))
	if err := f.publish(changed, removed); err != nil {
		f.log.Error("control plane: fleet: publish failed", "err", err)
	}
	return true
}

// admitLaterLocked admits the waiting nodes d from now, unless a timer
// to admit them is armed already: a node that comes meanwhile joins with
// the others.
func (f *fleet) admitLaterLocked(d time.Duration) {
	if f.admit != nil {
		return
	}
	f.admit = f.clk.AfterFunc(d, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.admit = nil
		if !f.closed && len(f.waiting) > 0 {
			f.admitLocked()
		}
	})
}

// members lists the slots in instance order.
func (f *fleet) members() []FleetMember {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]FleetMember, len(f.slots))
	for i, node := range f.slots {
		out[i] = FleetMember{Node: node, Instance: i, Connected: f.streams[node] > 0}
	}
	return out
}

// close stops every timer; later streams and expiries change nothing.
func (f *fleet) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, t := range f.held {
		t.Stop()
	}
	if f.admit != nil {
		f.admit.Stop()
	}
}
