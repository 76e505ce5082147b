package balance

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/rng"
)

// Options are an Origin's injected parts.
type Options struct {
	// Clock is the source of time and timers; nil means clock.Real().
	Clock clock.Clock
	// Rand seeds every Picker of the origin (each gets its own source drawn
	// from it); nil means a source seeded from the origin's name.
	Rand *rng.Source
	// Observer receives ejections, panic changes and zone picks; nil means
	// NopObserver.
	Observer Observer
}

// Origin is one named cluster of endpoints and the balancing state that
// spans its loops: membership, the outlier detector with its ejection cap,
// panic routing and zone preference. Each loop picks through its own Picker.
//
// Lock order: Origin.mu, then the clock's own lock (AfterFunc). Observer
// methods other than ZonePick run under Origin.mu.
type Origin struct {
	name  string
	tune  atomic.Pointer[tuning] // the configuration in force; replaced whole by Reconfigure
	clk   clock.Clock
	epoch time.Time
	rand  *rng.Source
	obs   Observer
	room  atomic.Bool // an ejection slot is free; mirrors nEjected < maxEjectLocked()
	// inflight is the origin's requests placed on a sticky snapshot by
	// PickCost or PickKeyed (and their Avoiding forms) and not yet ended,
	// across every loop: the m of the sticky policies' bounded load. Other
	// policies, and Pick/Done, do not count (Ticket.counted).
	inflight atomic.Int64
	// onFail hears the first failure of an endpoint's run of live
	// failures (OnLiveFailure); nil: nobody.
	onFail atomic.Pointer[func(addr string)]

	mu        sync.Mutex // guards following, and Endpoint fields marked so
	list      []*Endpoint
	byAddr    map[string]*Endpoint
	pickers   []*Picker
	tab       *keyTable // a sticky policy's key order over the membership; nil otherwise
	nEjected  int
	nFailing  int
	panic     bool
	zoned     bool    // zone routing applies (local zone set, origin large enough)
	localFrac float64 // share of picks kept in the local zone while zoned
	hot       bool    // every local endpoint reports a load above HotLoad: the local rule spills
	penalized string  // the zone PenalizeZone down-weights ("" none)
	loadTimer clock.Timer
	closed    bool
	// populated: the origin has had members. Until then an Update is its
	// initial membership (a discovered origin's first answer), whose
	// endpoints are taken as warm as NewOrigin's are.
	populated bool
}

// NewOrigin validates cfg and members and returns the origin. Endpoints
// present at creation are taken as warm (no slow start), and so are those
// of the first Update of an origin created empty (its discovered initial
// membership); endpoints added later by Update ramp up.
func NewOrigin(name string, cfg Config, members []Member, opt Options) (*Origin, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("origin %s: %w", name, err)
	}
	if err := validateMembers(members); err != nil {
		return nil, fmt.Errorf("origin %s: %w", name, err)
	}
	o := &Origin{
		name:   name,
		clk:    opt.Clock,
		rand:   opt.Rand,
		obs:    opt.Observer,
		byAddr: map[string]*Endpoint{},
	}
	o.tune.Store(newTuning(cfg))
	if o.clk == nil {
		o.clk = clock.Real()
	}
	if o.rand == nil {
		seed := uint64(0)
		for _, b := range []byte(name) {
			seed = rng.Mix64(seed ^ uint64(b))
		}
		o.rand = rng.New(seed)
	}
	if o.obs == nil {
		o.obs = NopObserver{}
	}
	o.epoch = o.clk.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.applyLocked(members, warm)
	return o, nil
}

// Name returns the origin's name.
func (o *Origin) Name() string { return o.name }

// tuning is the configuration in force and what is derived from it; it is
// never changed once published, so the request path reads it with one
// atomic load.
type tuning struct {
	cfg    Config
	prm    params
	policy chooser // a sticky policy's fallback, for requests without a key
	// peakEWMA: the chooser is peak_ewma's, which reads the time.
	peakEWMA bool
	// leastWork: the policy reads the pick instants, the latency per unit
	// of cost and the concurrency limit, which End then keeps up to date.
	leastWork bool
}

func newTuning(cfg Config) *tuning {
	pol := cfg.Policy
	if pol.Sticky() {
		pol = cfg.Fallback
	}
	return &tuning{cfg: cfg, prm: newParams(cfg), policy: newChooser(pol), peakEWMA: pol == PeakEWMA, leastWork: pol == LeastWork}
}

// t is the tuning in force.
func (o *Origin) t() *tuning { return o.tune.Load() }

// Reconfigure applies a new configuration in place: endpoints keep their
// shared state (in-flight counts, latency estimates, ejections and their
// clocks, slow-start clocks), and every loop's snapshot is rebuilt with the
// new policy, weights, thresholds and zone rule. Picks in progress finish on
// the snapshot they loaded. An invalid cfg changes nothing.
func (o *Origin) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("origin %s: %w", o.name, err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tune.Store(newTuning(cfg))
	o.tableLocked()
	o.refreshLocked()
	return nil
}

// nowNs is the time in ns since the origin's epoch.
func (o *Origin) nowNs() int64 { return int64(o.clk.Now().Sub(o.epoch)) }

func validateMembers(members []Member) error {
	seen := make(map[string]int, len(members))
	for i, m := range members {
		if m.Address == "" {
			return fmt.Errorf("endpoints[%d].address: empty; write it as host:port", i)
		}
		if first, dup := seen[m.Address]; dup {
			return fmt.Errorf("endpoints[%d].address: %q is listed twice (first as endpoints[%d]); list each endpoint once", i, m.Address, first)
		}
		seen[m.Address] = i
		if m.Weight < 0 {
			return fmt.Errorf("endpoints[%d].weight: %d is negative; weights are ≥ 1 (0 means 1)", i, m.Weight)
		}
	}
	return nil
}

// Update replaces the origin's membership. Survivors keep their shared state
// (counters, EWMA, outlier state) and take the new zone and weight; new
// endpoints enter slow start — except in the origin's first membership, when
// it was created empty (a discovered origin): those are taken as warm, as
// HAProxy's slowstart never applies when it starts; removed endpoints leave
// every Picker at once (requests in flight to them still end with Done).
// Invalid members change nothing.
func (o *Origin) Update(members []Member) error {
	if err := validateMembers(members); err != nil {
		return fmt.Errorf("origin %s: %w", o.name, err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.nowNs()
	from := int64(warm)
	if o.t().prm.window > 0 && o.populated {
		from = now
	}
	o.applyLocked(members, from)
	return nil
}

// applyLocked sets the membership; new endpoints start slow start at from.
func (o *Origin) applyLocked(members []Member, from int64) {
	now := o.nowNs()
	list := make([]*Endpoint, 0, len(members))
	byAddr := make(map[string]*Endpoint, len(members))
	for _, m := range members {
		e := o.byAddr[m.Address]
		fresh := e == nil
		if fresh {
			e = &Endpoint{origin: o, addr: m.Address, from: from, back: now}
			e.rtt.reset(o.t().prm.rttNs, now)
			e.mean.reset(o.t().prm.rttNs)
		}
		e.zone = m.Zone
		e.weight = max(m.Weight, 1)
		if fresh {
			o.seedLocked(e, now)
		}
		list = append(list, e)
		byAddr[m.Address] = e
	}
	for _, e := range o.list {
		if byAddr[e.addr] == e {
			continue
		}
		e.removed = true
		if e.returnTimer != nil {
			e.returnTimer.Stop()
		}
		switch e.state.Load() {
		case ejected:
			o.nEjected--
			o.obs.EjectedCount(o.nEjected)
		case failing:
			o.nFailing--
		}
	}
	o.list, o.byAddr = list, byAddr
	o.populated = o.populated || len(list) > 0
	o.tableLocked()
	o.refreshLocked()
}

// maxEjectLocked is the ejection cap: max_ejection_percent of the origin,
// rounded down, and at least one.
func (o *Origin) maxEjectLocked() int {
	return max(1, len(o.list)*o.t().cfg.Outlier.MaxEjectionPercent/100)
}

// failed handles an endpoint whose failure run reached consecutive_5xx:
// eject it if the cap allows, else mark it failing.
func (o *Origin) failed(e *Endpoint) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := e.state.Load()
	if o.closed || e.removed || st == ejected || e.consecutive.Load() < o.t().prm.failures {
		return
	}
	switch {
	case o.nEjected < o.maxEjectLocked():
		if st == failing {
			o.nFailing--
		}
		o.ejectLocked(e, o.nowNs())
	case st == healthy:
		e.state.Store(failing)
		o.nFailing++
		o.reassessLocked()
		return
	default:
		return
	}
	o.refreshLocked()
}

// recovered handles a success that ended a failing endpoint's run.
func (o *Origin) recovered(e *Endpoint) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e.removed || e.down || e.state.Load() != failing || e.consecutive.Load() >= o.t().prm.failures {
		return
	}
	e.state.Store(healthy)
	o.nFailing--
	o.reassessLocked()
}

func (o *Origin) ejectLocked(e *Endpoint, now int64) {
	od := o.t().cfg.Outlier
	e.times = o.decayedTimesLocked(e, now) + 1
	d := od.MaxEjectionTime
	if int64(e.times) <= int64(od.MaxEjectionTime/od.BaseEjectionTime) {
		d = min(od.BaseEjectionTime*time.Duration(e.times), od.MaxEjectionTime)
	}
	e.until = now + int64(d)
	e.byCheck = false
	e.state.Store(ejected)
	o.nEjected++
	e.gen++
	gen := e.gen
	e.returnTimer = o.clk.AfterFunc(d, func() { o.restore(e, gen) })
	o.obs.Ejected(e.addr, ReasonConsecutive5xx, d)
	o.obs.EjectedCount(o.nEjected)
}

// restore returns an endpoint from ejection when its time is up: it is
// healthy again, its failure run starts from zero and it re-enters slow
// start.
func (o *Origin) restore(e *Endpoint, gen uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || e.removed || e.gen != gen || e.state.Load() != ejected {
		return
	}
	if e.down {
		// The health checks still fail it: it returns when they pass
		// (SetChecked), not before.
		e.returnTimer, e.byCheck = nil, true
		return
	}
	o.returnLocked(e)
}

// returnLocked puts an ejected endpoint back in service: its failure run
// starts from zero and it re-enters slow start. A failing endpoint the
// health checks hold down takes the freed slot.
func (o *Origin) returnLocked(e *Endpoint) {
	now := o.nowNs()
	e.byCheck = false
	e.state.Store(healthy)
	e.consecutive.Store(0)
	e.returnTimer = nil
	e.back = now
	if o.t().prm.window > 0 {
		e.from = now
		e.rampLimit.Store(e.limit.Load())
	}
	o.nEjected--
	o.obs.EjectedCount(o.nEjected)
	for _, f := range o.list {
		if f.down && f.state.Load() == failing {
			o.checkEjectLocked(f)
			break
		}
	}
	o.refreshLocked()
}

// OnLiveFailure sets f to hear the first failure of every run of live
// failures of an endpoint (a 5xx or a connection failure after a success):
// the active health checks probe it sooner. f runs on the request path:
// it must be quick and must not block.
func (o *Origin) OnLiveFailure(f func(addr string)) {
	if f == nil {
		o.onFail.Store(nil)
		return
	}
	o.onFail.Store(&f)
}

// SetChecked records the active health checks' verdict on addr (package
// health calls it when an endpoint crosses unhealthy_threshold or
// healthy_threshold). It combines with passive ejection by one rule: an
// endpoint is in service only when neither holds it out.
//
//   - Unhealthy: the endpoint is ejected like a passive ejection, within
//     the same max_ejection_percent cap (when the cap is full it is
//     failing: in service, but unhealthy for panic, and ejected when a
//     slot frees), with no timer: it stays out until the checks pass. An
//     endpoint already ejected by live failures stays so; when its time is
//     up it stays out while the checks fail.
//   - Healthy: an endpoint the checks alone held out returns at once,
//     through slow start. A passive ejection still running keeps its full
//     time: a passing probe never shortens it.
//
// It reports whether the endpoint's state changed.
func (o *Origin) SetChecked(addr string, up bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.byAddr[addr]
	if e == nil || o.closed || e.down == !up {
		return false
	}
	e.down = !up
	st := e.state.Load()
	if !up {
		if st != ejected {
			o.checkEjectLocked(e)
		}
		return true
	}
	switch {
	case st == ejected && e.byCheck:
		o.returnLocked(e)
	case st == failing && e.consecutive.Load() < o.t().prm.failures:
		e.state.Store(healthy)
		o.nFailing--
		o.reassessLocked()
	}
	return true
}

// checkEjectLocked ejects an endpoint its health checks fail, or marks it
// failing when the cap is full.
func (o *Origin) checkEjectLocked(e *Endpoint) {
	st := e.state.Load()
	if o.nEjected >= o.maxEjectLocked() {
		if st == healthy {
			e.state.Store(failing)
			o.nFailing++
			o.reassessLocked()
		}
		return
	}
	if st == failing {
		o.nFailing--
	}
	if e.returnTimer != nil {
		e.returnTimer.Stop()
		e.returnTimer = nil
	}
	e.state.Store(ejected)
	e.byCheck = true
	e.until = o.nowNs()
	e.gen++
	o.nEjected++
	o.obs.Ejected(e.addr, ReasonHealthCheck, 0)
	o.obs.EjectedCount(o.nEjected)
	o.refreshLocked()
}

// decayedTimesLocked is the ejection count after decay: one less for every
// base_ejection_time spent in service since the last return.
func (o *Origin) decayedTimesLocked(e *Endpoint, now int64) int {
	if e.state.Load() == ejected || e.times == 0 {
		return e.times
	}
	clean := (now - e.back) / int64(o.t().cfg.Outlier.BaseEjectionTime)
	return int(max(0, int64(e.times)-clean))
}

// refreshLocked recomputes panic, the zone split and the ejection room
// after a change of membership or ejection, and republishes every loop's
// snapshot.
func (o *Origin) refreshLocked() {
	o.healthLocked()
	for _, p := range o.pickers {
		p.snap.Store(o.buildLocked(p))
	}
}

// reassessLocked is refreshLocked for a change that leaves the candidate
// sets alone (an endpoint becoming failing or healthy again without
// ejection): snapshots are republished only if panic or the zone split
// moved, so a flapping endpoint does not rebuild every loop each time.
func (o *Origin) reassessLocked() {
	panic, frac, hot := o.panic, o.localFrac, o.hot
	o.healthLocked()
	if panic != o.panic || frac != o.localFrac || hot != o.hot {
		for _, p := range o.pickers {
			p.snap.Store(o.buildLocked(p))
		}
	}
}

// healthLocked recomputes the ejection room, panic mode (reporting a
// change) and the zone split.
func (o *Origin) healthLocked() {
	n := len(o.list)
	o.room.Store(o.nEjected < o.maxEjectLocked())
	healthyN := n - o.nEjected - o.nFailing
	panic := n > 0 && healthyN*100 < o.t().cfg.PanicThresholdPercent*n
	if panic != o.panic {
		o.panic = panic
		o.obs.PanicMode(panic)
	}
	z := o.t().cfg.Zone
	o.zoned = z.Local != "" && z.LocalPercent > 0 && n >= z.MinOriginSize
	if o.zoned {
		total, up := 0, 0
		for _, e := range o.list {
			if e.zone == z.Local {
				total += e.weight
				if e.state.Load() == healthy {
					up += e.weight
				}
			}
		}
		o.localFrac = 0
		if total > 0 {
			o.localFrac = float64(z.LocalPercent) / 100 * float64(up) / float64(total)
		}
		if o.hot = o.localHotLocked(); o.hot {
			// A loaded local zone keeps only its share of the
			// capacity: the rest spills to the sibling zones.
			o.localFrac = min(o.localFrac, float64(up)/float64(max(o.upWeightLocked(), 1)))
		}
	}
}

// Panic reports whether the origin routes over all endpoints because too few
// are healthy.
func (o *Origin) Panic() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.panic
}

// Ejected returns the number of endpoints ejected now.
func (o *Origin) Ejected() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.nEjected
}

// Endpoint returns the member with address addr, or nil.
func (o *Origin) Endpoint(addr string) *Endpoint {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byAddr[addr]
}

// Endpoints returns the members in membership order.
func (o *Origin) Endpoints() []*Endpoint {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.list)
}

// OriginStatus is what the admin API shows about an origin's balancing.
type OriginStatus struct {
	Name      string           `json:"name"`
	Policy    Policy           `json:"policy"`
	Panic     bool             `json:"panic"`
	Ejected   int              `json:"ejected"`
	Endpoints []EndpointStatus `json:"endpoints"`
}

// Status returns the origin's state now.
func (o *Origin) Status() OriginStatus {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.nowNs()
	s := OriginStatus{Name: o.name, Policy: o.t().cfg.Policy, Panic: o.panic, Ejected: o.nEjected,
		Endpoints: make([]EndpointStatus, 0, len(o.list))}
	for _, e := range o.list {
		s.Endpoints = append(s.Endpoints, e.statusLocked(now))
	}
	return s
}

// Close stops the origin's timers. Pickers keep answering from their last
// snapshot; ejected endpoints stay ejected.
func (o *Origin) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	if o.loadTimer != nil {
		o.loadTimer.Stop()
		o.loadTimer = nil
	}
	for _, e := range o.list {
		if e.returnTimer != nil {
			e.returnTimer.Stop()
			e.returnTimer = nil
		}
	}
}
