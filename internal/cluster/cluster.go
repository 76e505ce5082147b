// Package cluster is an origin at run time: a named cluster of endpoints
// with its balancer, its subset placement and, per loop, a picker and the
// pools of that loop's subset; its request driver (package dispatch, which
// places requests on its loops and acquires their streams from those
// pools); its metrics; and its membership changes. A request's way through
// it is package proxy's: Place, Begin, the driver's Acquire per attempt,
// Finish.
//
// Invariants:
//   - Everything keyed by (endpoint, loop) belongs to that loop: a request
//     placed on loop l reaches only loop l's picker and pools, and the home
//     loop's pool of an endpoint it borrows a stream from (dispatch.Pools
//     is the Origin).
//   - The request path takes no lock: a loop's pool map is replaced whole
//     (copy on write) under the origin's mutex and read with one atomic
//     load; pickers are immutable snapshots; metric children are bound once.
//   - A sticky origin (balancer.policy maglev or ring_hash) is placed by
//     "none": every loop holds a pool per endpoint, so that the key order,
//     built over the whole origin, can reach any endpoint from any loop.
//     Key extracts a request's key for it (forward.KeySource).
//   - Membership changes (Apply) are serialised per origin and applied as
//     deltas: only loops whose subset changed touch their pools; departed
//     endpoints drain, new ones are pre-warmed and ramp up.
package cluster

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/dispatch"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/health"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/slo"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/telemetry"
	"github.com/corput/corput/internal/upstream"
	"github.com/corput/corput/internal/workload"
)

// Env is what an Origin takes from the gateway that runs it.
type Env struct {
	Clock   clock.Clock
	Log     *slog.Logger
	Metrics *telemetry.Metrics
	Loops   int
	Fleet   config.Fleet // this gateway's place among its peers (Size ≥ 1) when the origin is built; a reload moves it (Prepare)
	Seed    uint64       // seeds the balancer and the pools' jitter
	// Dialer replaces the origin's own upstream dialer (nil: dial as the
	// config says).
	Dialer pool.Dialer
	// FastPath is downstream.fast_path.
	FastPath bool
	// SameJitter gives every pool the same random stream (the deploy
	// drill's no-jitter baseline). Never set it to serve.
	SameJitter bool
	// Trace hears every attempt as it ends (forward.Policy.Trace).
	Trace func(origin, endpoint string, s forward.Step, r forward.Reason)
	// Workload is the configuration's workload block: with one, the
	// origin runs an SLO monitor (package slo) on SLOClock (nil: Clock),
	// which posts scale-out events to Notify (nil: none).
	Workload *workload.Mix
	SLOClock clock.Clock
	Notify   func(slo.Event)
}

// Origin is one named cluster of endpoints: its balancer, its subset
// placement, and per loop a picker and the pools of that loop's subset.
type Origin struct {
	name  string
	env   *Env
	bal   *balance.Origin
	loops []*Loop
	m     originMetrics
	slo   atomic.Pointer[slo.Monitor] // nil until the configuration has a workload
	drv   *dispatch.Driver            // places its requests on loops and acquires their streams
	// health probes the endpoints of the gateway's subsets (health_check;
	// idle without one), once per gateway: package health.
	health *health.Checker

	// Read by requests without a lock; replaced whole by Reconfigure.
	conf       atomic.Pointer[config.Origin]
	policy     atomic.Pointer[forward.Policy]    // retries, the budget, the metrics of every request's attempts
	reqTimeout atomic.Int64                      // timeouts.request, ns
	fast       atomic.Bool                       // its connections are upstream.Raw or upstream.Mux: the fast path can serve it
	keys       atomic.Pointer[forward.KeySource] // a sticky policy's key source; nil otherwise

	mu        sync.Mutex   // guards following: membership and configuration changes are serialised
	fleet     config.Fleet // this gateway's place among its peers: Env.Fleet, then a reload's
	dialer    pool.Dialer
	poolCfg   pool.Config
	placement subset.Placement
	members   []balance.Member
	shared    *subset.Shared // the source's shared ring indices of members, nil when it gives none
	mode      string         // PlacementShared or PlacementLocal: how placement was last set
	ignored   bool           // the source's indices are ignored: the algorithm cannot place by them
	lastErr   string         // the last error applying membership, "" when healthy
	changes   uint64
	source    discovery.Source // file or xds source, nil for static
	seeded    bool             // membership known: static, or a source has applied once
	closed    bool             // close has begun: no pool may be opened any more
}

// Name is the origin's name.
func (o *Origin) Name() string { return o.name }

// Config is the origin's configuration.
func (o *Origin) Config() *config.Origin { return o.conf.Load() }

// TLS reports whether the origin's connections are TLS.
func (o *Origin) TLS() bool { return o.Config().TLS != nil }

// Loop is the origin as loop l sees it.
func (o *Origin) Loop(l int) *Loop { return o.loops[l] }

// Index is the loop's index.
func (ol *Loop) Index() int { return ol.idx }

// Place returns the loop for a new request (dispatch.Driver.Place): of
// the origin's next loop in rotation and one other at random, the one with
// fewer of the origin's requests in flight.
func (o *Origin) Place() *Loop { return o.loops[o.drv.Place()] }

// Driver is the origin's request driver.
func (o *Origin) Driver() *dispatch.Driver { return o.drv }

// MaxResponseHead is pool.max_response_header_bytes.
func (o *Origin) MaxResponseHead() int { return o.conf.Load().Pool.MaxResponseHeaderBytes }

// Timeouts are the origin's time limits and retry.per_try_timeout, as
// configured now.
func (o *Origin) Timeouts() (config.Timeouts, time.Duration) {
	c := o.conf.Load()
	return c.Timeouts, c.Retry.PerTryTimeout
}

// RequestTimeout is timeouts.request (0: none).
func (o *Origin) RequestTimeout() time.Duration { return time.Duration(o.reqTimeout.Load()) }

// Fast reports whether the fast path serves the origin: the fast path is
// on and every connection its dialer opens is an upstream.Raw (HTTP/1.1)
// or an upstream.Mux (HTTP/2).
func (o *Origin) Fast() bool { return o.fast.Load() }

// Snapshot is the origin's current subset placement.
func (o *Origin) Snapshot() *subset.Snapshot {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.placement.Snapshot()
}

// Pools is the loop's current pools by endpoint address; the map is
// shared and must not be changed.
func (ol *Loop) Pools() map[string]*pool.Pool { return *ol.pools.Load() }

// PoolFor is the pool of loop ol for addr, as a request's acquisition finds
// it (see poolFor).
func (o *Origin) PoolFor(ol *Loop, addr string) (*pool.Pool, error) { return o.poolFor(ol, addr) }

// SetSource records the origin's membership source, for its errors.
func (o *Origin) SetSource(src discovery.Source) {
	o.mu.Lock()
	o.source = src
	o.mu.Unlock()
}

// sourceError is the membership source's or the last apply's error.
func (o *Origin) sourceErrorLocked() string {
	if o.source != nil {
		if err := o.source.Err(); err != nil {
			return err.Error()
		}
	}
	return o.lastErr
}

// Loop is an origin as one loop sees it. Its pools map is replaced
// whole (copy on write) under Origin.mu, so the request path reads it with
// one atomic load and no lock.
type Loop struct {
	idx    int
	picker *balance.Picker
	pools  atomic.Pointer[map[string]*pool.Pool]
	subset []string // guarded by origin.mu
	obs    *poolObserver
	o      *Origin
}

// New builds the origin oc describes and starts pre-warming its pools.
func New(oc *config.Origin, env *Env) (*Origin, error) {
	o := &Origin{name: oc.Name, env: env, fleet: env.Fleet}
	o.conf.Store(oc)
	o.reqTimeout.Store(int64(oc.Timeouts.Request))
	o.m = newOriginMetrics(env.Metrics, oc.Name, env.Loops)
	o.policy.Store(o.newPolicy(oc.Retry))
	o.keys.Store(keySource(oc))

	var err error
	o.poolCfg, err = poolConfig(oc)
	if err != nil {
		return nil, err
	}
	if o.dialer = env.Dialer; o.dialer == nil {
		if o.dialer, err = newDialer(oc); err != nil {
			return nil, err
		}
	}
	o.fast.Store(env.FastPath && upstream.DialsFast(o.dialer))
	if oc.TLS != nil && oc.TLS.InsecureSkipVerify {
		env.Log.Warn("origin TLS certificate NOT verified (tls.insecure_skip_verify: true): anyone on the path can impersonate it; set tls.ca instead",
			"origin", oc.Name)
	}

	members := membersOf(oc.Endpoints)
	o.bal, err = balance.NewOrigin(oc.Name, balance.FromConfig(oc), members, balance.Options{
		Clock:    env.Clock,
		Rand:     rng.New(env.Seed ^ rng.Mix64(rng.FNV(oc.Name))),
		Observer: &balanceObserver{m: &o.m},
	})
	if err != nil {
		return nil, err
	}
	if o.placement, err = o.newPlacement(oc, o.fleet, addrsOf(members)); err != nil {
		return nil, err
	}
	o.members = members
	o.mode = PlacementLocal
	o.seeded = oc.Discovery.Type != config.DiscoveryFile && oc.Discovery.Type != config.DiscoveryXDS
	o.drv = dispatch.New(oc.Name, env.Loops, o, rand.IntN)
	o.drv.SetMultiplexes(multiplexes(oc))
	homes := o.homes()
	for l := 0; l < env.Loops; l++ {
		ol := &Loop{idx: l, obs: &poolObserver{m: &o.m, loop: l}, o: o}
		ol.subset = o.subsetOf(l)
		// The warm pick: between endpoints of near latency, one with a
		// stream ready on the loop (docs/decisions.md).
		ol.picker = o.bal.NewWarmPicker(ol.subset, o.drv.Warm(l))
		pools := make(map[string]*pool.Pool, len(ol.subset))
		for _, a := range ol.subset {
			p, err := o.newPool(a, ol, homes)
			if err != nil {
				return nil, err
			}
			pools[a] = p
		}
		ol.pools.Store(&pools)
		o.loops = append(o.loops, ol)
	}
	o.health = health.New(health.Env{Origin: oc.Name, Clock: env.Clock, Seed: env.Seed, Log: env.Log,
		Metrics: env.Metrics, Balance: o.bal, Pools: o})
	o.health.Configure(oc)
	o.syncHealthLocked(homes)
	o.SetWorkload(env.Workload)
	return o, nil
}

// syncHealthLocked gives the health checks the endpoints of the gateway's
// subsets: the keys of homes (subset.Snapshot.Homes), the union of its
// loops' subsets. Called with o.mu held (or before the origin is shared).
func (o *Origin) syncHealthLocked(homes map[string]int) {
	addrs := make([]string, 0, len(homes))
	for a := range homes {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	o.health.Sync(addrs)
}

// ProbePool is the pool a health check's probe of addr takes its stream
// from (health.Pools): addr's home loop's, else any loop's that holds
// one; and whether the origin's connections may carry many streams.
func (o *Origin) ProbePool(addr string) (*pool.Pool, bool) {
	mux := multiplexes(o.conf.Load())
	if p := o.drv.Home(addr); p != nil {
		return p, mux
	}
	for _, ol := range o.loops {
		if p, ok := (*ol.pools.Load())[addr]; ok {
			return p, mux
		}
	}
	return nil, mux
}

// Health is the origin's health checker.
func (o *Origin) Health() *health.Checker { return o.health }

// newPlacement builds the subset placement of the configured algorithm
// (ringsteady by default; "none" gives every loop every endpoint) for a
// fleet of fl.Size gateways. A sticky origin is placed by "none" whatever
// its subset says: its key order spans the whole origin, so every loop
// holds a pool per endpoint (docs/subsetting.md, "Sticky origins").
func (o *Origin) newPlacement(oc *config.Origin, fl config.Fleet, addrs []string) (subset.Placement, error) {
	name := string(oc.Subset.Algorithm)
	switch {
	case oc.Balancer.Sticky():
		name = subset.NameNone
	case name == "":
		name = subset.NameRingsteady
	}
	alg, err := subset.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("origins[%s].subset.algorithm: %w", o.name, err)
	}
	sizing, err := subset.NewSizing(oc.Subset.Size, oc.Subset.MinSize, oc.Subset.MaxSize)
	if err != nil {
		return nil, fmt.Errorf("origins[%s]: %w", o.name, err)
	}
	p, err := alg.Place(subset.Params{Origin: o.name, Fleet: o.subsetFleet(fl), Sizing: sizing, Seed: rng.FNV(o.name)}, addrs)
	if err != nil {
		return nil, fmt.Errorf("origin %s: subset: %w", o.name, err)
	}
	return p, nil
}

// subsetFleet is the fleet of frontends a placement serves when this
// gateway is at fleet position fl: fl.Size gateways (at least 1) of the
// gateway's loops.
func (o *Origin) subsetFleet(fl config.Fleet) subset.Fleet {
	return subset.Fleet{Gateways: max(fl.Size, 1), Loops: o.env.Loops}
}

// newPolicy is the retry policy of rules r (an origin's, or a route's to
// it), with the origin's metrics and trace.
func (o *Origin) newPolicy(r config.Retry) *forward.Policy {
	p := forward.NewPolicy(r, o.env.Clock, &o.m)
	if trace := o.env.Trace; trace != nil {
		p.Trace = func(ep string, s forward.Step, r forward.Reason) { trace(o.name, ep, s, r) }
	}
	return &p
}

// subsetOf returns loop l's members under the current placement. Called
// with o.mu held (or before the origin is shared).
func (o *Origin) subsetOf(l int) []string {
	return slices.Clone(o.placement.Snapshot().Members(o.fleet.Instance, l))
}

// poolRand is the random source of loop ol's pool for addr: its reconnect
// jitter and lifetime jitter. Each pool has its own stream, so pools that
// lose an origin together do not retry together (unless SameJitter).
func (o *Origin) poolRand(addr string, ol *Loop) *rng.Source {
	if o.env.SameJitter {
		return rng.New(o.env.Seed)
	}
	return rng.New(o.env.Seed ^ rng.Mix64(rng.FNV(addr)+uint64(ol.idx)))
}

// homes maps every endpoint of the current placement to its home loop
// (subset.Snapshot.Homes). When the origin multiplexes, only the home
// loop's pool pre-warms the endpoint (homeCfg); on every protocol a loop
// whose own pool has no free stream takes one of the home pool before it
// dials (Origin.acquire, pool.Borrow), and when the origin multiplexes a
// loop that holds no connection waits on the home pool's (pool.Share). So
// an HTTP/2 endpoint has one connection per gateway, not one per loop
// (docs/decisions.md, "Borrowing from the home loop"). It stores the map
// for the driver (dispatch.Driver.SetHomes). Called with o.mu held (or before the origin is shared).
func (o *Origin) homes() map[string]int {
	h := o.placement.Snapshot().Homes(o.fleet.Instance)
	o.drv.SetHomes(h)
	return h
}

// homeCfg is the pool config of loop l's pool for addr: for an origin
// that may speak HTTP/2 (multiplexes), pre-warmed only on addr's home
// loop; otherwise, as configured, on every loop (an HTTP/1.1 connection
// carries one request: each loop needs its own).
func homeCfg(cfg pool.Config, oc *config.Origin, addr string, l int, homes map[string]int) pool.Config {
	if h, ok := homes[addr]; multiplexes(oc) && (!ok || h != l) {
		cfg.Prewarm = 0
	}
	return cfg
}

// multiplexes reports whether oc's connections may carry many streams:
// protocol h2 or h2c, or auto over TLS (ALPN may pick h2).
func multiplexes(oc *config.Origin) bool {
	switch oc.Protocol {
	case config.ProtocolH2, config.ProtocolH2C:
		return true
	case config.ProtocolAuto:
		return oc.TLS != nil
	}
	return false
}

// Pool is loop l's pool for addr, nil when the loop has none
// (dispatch.Pools): one atomic load and a map lookup.
func (o *Origin) Pool(l int, addr string) *pool.Pool { return (*o.loops[l].pools.Load())[addr] }

// Open is loop l's pool for addr, made on demand (dispatch.Pools; see
// poolFor).
func (o *Origin) Open(l int, addr string) (*pool.Pool, error) { return o.poolFor(o.loops[l], addr) }

func (o *Origin) newPool(addr string, ol *Loop, homes map[string]int) (*pool.Pool, error) {
	p, err := pool.New(addr, ol.idx, homeCfg(o.poolCfg, o.conf.Load(), addr, ol.idx, homes), o.dialer, o.env.Clock, o.poolRand(addr, ol), ol.obs)
	if err != nil {
		return nil, fmt.Errorf("origin %s: pool %s: %w", o.name, addr, err)
	}
	return p, nil
}

// poolFor returns loop ol's pool for ep. An endpoint outside the loop's
// subset (the balancer's fallback when the whole subset is ejected) gets a
// pool on demand, without pre-warming, that idles out like any other; an
// endpoint no longer in the origin gets a closed pool.
func (o *Origin) poolFor(ol *Loop, addr string) (*pool.Pool, error) {
	if p, ok := (*ol.pools.Load())[addr]; ok {
		return p, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	cur := *ol.pools.Load()
	if p, ok := cur[addr]; ok {
		return p, nil
	}
	cfg := o.poolCfg
	cfg.Prewarm = 0
	p, err := pool.New(addr, ol.idx, cfg, o.dialer, o.env.Clock, o.poolRand(addr, ol), ol.obs)
	if err != nil {
		return nil, err
	}
	if o.closed || !slices.ContainsFunc(o.members, func(m balance.Member) bool { return m.Address == addr }) {
		// The request picked addr just before a membership change removed
		// it (or outlived a shutdown). A closed pool makes it retry on a
		// current member instead of reopening a connection to it.
		p.Drain(nil)
		return p, nil
	}
	next := make(map[string]*pool.Pool, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[addr] = p
	ol.pools.Store(&next)
	return p, nil
}

// Placement modes: /admin/origins' placement and the mode label of
// corput_subset_placement.
const (
	// PlacementShared places the origin by the shared ring indices its
	// membership source gives (a control plane's): every gateway holds the
	// same ring whatever its history.
	PlacementShared = "shared"
	// PlacementLocal places the origin by this gateway's own ring history.
	PlacementLocal = "local"
)

// Membership is an origin's full membership as its source gives it.
type Membership struct {
	Members []balance.Member // sorted by address
	// Shared is the control plane's placement of Members: every member's
	// ring index and its subset count. nil when the source gives none.
	Shared *subset.Shared
}

// Apply replaces the origin's membership with members, which carry no
// shared ring indices (ApplyMembership).
func (o *Origin) Apply(members []balance.Member) error {
	return o.ApplyMembership(Membership{Members: members})
}

// ApplyMembership replaces the origin's membership: the placement changes
// by deltas, the balancer keeps survivors' state and ramps newcomers up, and
// only loops whose subset changed touch their pools — new members get
// pre-warmed pools, departed ones drain (in-flight requests finish) and
// close.
//
// With shared indices (m.Shared), a ringsteady placement is set to exactly
// them (subset.Ring.Place): the first indexed membership re-subsets like a
// subset-count change, through the same per-loop diff. Shared indices that
// do not cover every member once, densely, are refused and change nothing.
// Without them the placement follows the membership's delta from the ring
// it holds — after shared placement, from the last shared ring, so the
// switch itself moves nothing. Other algorithms ignore the indices, with a
// warning.
func (o *Origin) ApplyMembership(m Membership) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		// Discovery and shutdown race in corput serve: an update that
		// lands after close must not open pools nothing will close.
		return fmt.Errorf("origin %s: membership update after shutdown ignored", o.name)
	}
	return o.applyLocked(m)
}

func (o *Origin) applyLocked(m Membership) error {
	if err := checkShared(m); err != nil {
		return fmt.Errorf("origin %s: membership refused, the last one stays: %w", o.name, err)
	}
	oldAddrs := addrsOf(o.members)
	if err := o.bal.Update(m.Members); err != nil {
		return err
	}
	if sp, ok := o.placement.(subset.SharedPlacement); ok && m.Shared != nil {
		if err := sp.PlaceShared(*m.Shared); err != nil {
			return fmt.Errorf("origin %s: subset: %w", o.name, err) // checked above: not reached
		}
	} else {
		added, removed := diffSorted(oldAddrs, addrsOf(m.Members))
		for _, a := range removed {
			if err := o.placement.Remove(a); err != nil {
				return fmt.Errorf("origin %s: subset: %w", o.name, err)
			}
		}
		for _, a := range added {
			if err := o.placement.Add(a); err != nil {
				return fmt.Errorf("origin %s: subset: %w", o.name, err)
			}
		}
	}
	o.members = m.Members
	o.shared = m.Shared
	o.noteModeLocked()
	o.seeded = true
	o.lastErr = ""
	o.changes++
	o.m.membership.Inc()
	return o.resubsetLocked()
}

// checkShared refuses shared indices that are not exactly the members',
// 0..N-1 once each, or a subset count that is not a power of two.
func checkShared(m Membership) error {
	sh := m.Shared
	if sh == nil {
		return nil
	}
	if len(sh.Indices) != len(m.Members) {
		return fmt.Errorf("%d shared ring indices for %d endpoints: every endpoint needs one", len(sh.Indices), len(m.Members))
	}
	for _, mb := range m.Members {
		if _, ok := sh.Indices[mb.Address]; !ok {
			return fmt.Errorf("endpoint %s has no shared ring index: every endpoint needs one", mb.Address)
		}
	}
	if _, err := subset.OrderByIndex(sh.Indices); err != nil {
		return err
	}
	if s := sh.Subsets; s < 0 || s&(s-1) != 0 {
		return fmt.Errorf("a shared subset count of %d is not a power of two", s)
	}
	return nil
}

// noteModeLocked records the placement mode after a change of membership
// or placement and logs a switch, and indices the algorithm ignores.
func (o *Origin) noteModeLocked() {
	_, canShare := o.placement.(subset.SharedPlacement)
	mode, ignored := PlacementLocal, o.shared != nil && !canShare
	if o.shared != nil && canShare {
		mode = PlacementShared
	}
	log := o.env.Log
	switch {
	case mode == o.mode:
	case mode == PlacementShared:
		log.Info("origin placed by shared ring indices: every gateway given them holds the same subsets",
			"origin", o.name, "endpoints", len(o.members), "subsets", o.placement.Snapshot().Subsets(), "was", o.mode)
	case !ignored: // ignored indices are warned of below
		log.Warn("origin placed locally again: its membership came without shared ring indices; the placement continues from the last shared ring, and gateways that start from now on build their own",
			"origin", o.name, "endpoints", len(o.members))
	}
	if ignored && !o.ignored {
		log.Warn("shared ring indices ignored: only subset.algorithm ringsteady places by them; the origin is placed locally",
			"origin", o.name, "algorithm", o.conf.Load().Subset.Algorithm)
	}
	o.mode, o.ignored = mode, ignored
}

// resubsetLocked brings every loop to its subset under the current
// placement: only loops whose subset changed touch their pools — new
// members get pre-warmed pools, departed ones drain (in-flight requests
// finish) and close — and their pickers take the new subset.
func (o *Origin) resubsetLocked() error {
	addrs := addrsOf(o.members)
	homes := o.homes()
	for _, ol := range o.loops {
		next := o.subsetOf(ol.idx)
		gained, lost := diffSorted(sortedCopy(ol.subset), sortedCopy(next))
		ol.subset = next
		cur := *ol.pools.Load()
		// Pools created on demand outside the subset are dropped once their
		// endpoint leaves the origin altogether.
		for addr := range cur {
			if !slices.Contains(next, addr) && !slices.Contains(lost, addr) && !slices.Contains(addrs, addr) {
				lost = append(lost, addr)
			}
		}
		if len(gained) == 0 && len(lost) == 0 {
			continue
		}
		pools := make(map[string]*pool.Pool, len(next))
		for k, v := range cur {
			pools[k] = v
		}
		for _, a := range lost {
			if p, ok := pools[a]; ok {
				delete(pools, a)
				p.Drain(nil)
			}
		}
		for _, a := range gained {
			if p, ok := pools[a]; ok {
				// A pool made on demand (poolFor, unwarmed) becomes a
				// member's: it pre-warms as one.
				if err := p.Reconfigure(homeCfg(o.poolCfg, o.conf.Load(), a, ol.idx, homes), nil); err != nil {
					return err // the origin's pool config was validated: not reached
				}
				continue
			}
			p, err := o.newPool(a, ol, homes)
			if err != nil {
				return err
			}
			pools[a] = p
		}
		ol.pools.Store(&pools)
		ol.picker.SetSubset(next)
	}
	o.syncHealthLocked(homes)
	return nil
}

// SetSourceError records the membership source's health for the admin API.
func (o *Origin) SetSourceError(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		o.lastErr = ""
	} else {
		o.lastErr = err.Error()
	}
}

// Ready reports whether every pool of every loop holds its pre-warmed
// connections.
func (o *Origin) Ready() bool {
	o.mu.Lock()
	seeded := o.seeded
	o.mu.Unlock()
	if !seeded {
		return false
	}
	for _, ol := range o.loops {
		for _, p := range *ol.pools.Load() {
			if !p.Ready() {
				return false
			}
		}
	}
	return true
}

// Drain is for an origin a reload removed: no request reaches it any
// more, those in flight finish, and it closes once its pools are idle (or
// when Close cuts them). It returns then.
func (o *Origin) Drain() {
	o.mu.Lock()
	o.closed = true // membership updates are refused from now on
	o.mu.Unlock()
	var wg sync.WaitGroup
	for _, ol := range o.loops {
		for _, p := range *ol.pools.Load() {
			wg.Add(1)
			p.Drain(wg.Done)
		}
	}
	wg.Wait()
	o.Close()
}

func (o *Origin) Close() {
	o.mu.Lock() // waits for an apply in progress, whose pools are closed below
	o.closed = true
	o.mu.Unlock()
	o.health.Close() // its probes in flight end before their pools close
	for _, ol := range o.loops {
		ol.picker.Close()
		for _, p := range *ol.pools.Load() {
			p.Close()
		}
	}
	o.bal.Close()
	o.mu.Lock()
	if m := o.slo.Load(); m != nil {
		m.Close()
	}
	o.mu.Unlock()
}

func poolConfig(oc *config.Origin) (pool.Config, error) {
	pc := pool.DefaultConfig()
	pc.MaxConnections = oc.Pool.MaxConnections
	pc.MaxPending = int(oc.Pool.MaxPending)
	pc.AcquireTimeout = oc.Pool.AcquireTimeout
	over, err := pool.ParseOverCap(string(oc.Pool.OverCap))
	if err != nil {
		return pc, fmt.Errorf("origins[%s].%w", oc.Name, err)
	}
	pc.OverCap = over
	pc.IdleTimeout = oc.Pool.IdleTimeout
	pc.MaxLifetime = oc.Pool.MaxLifetime
	pc.Keepalive = oc.Pool.Keepalive
	pc.Prewarm = oc.Pool.Prewarm
	if err := pc.Validate(); err != nil {
		return pc, fmt.Errorf("origins[%s].pool: %w", oc.Name, err)
	}
	return pc, nil
}

func newDialer(oc *config.Origin) (pool.Dialer, error) {
	opts := upstream.Options{
		Protocol:               upstream.Protocol(oc.Protocol),
		ConnectTimeout:         oc.Timeouts.Connect,
		MaxResponseHeaderBytes: oc.Pool.MaxResponseHeaderBytes,
	}
	if oc.TLS != nil {
		tc, err := upstream.TLSFiles{
			CA: oc.TLS.CA, Cert: oc.TLS.Cert, Key: oc.TLS.Key,
			ServerName: oc.TLS.ServerName, InsecureSkipVerify: oc.TLS.InsecureSkipVerify,
		}.Config()
		if err != nil {
			return nil, fmt.Errorf("origins[%s].tls: %w", oc.Name, err)
		}
		opts.TLS = tc
	}
	d, err := upstream.NewDialer(opts)
	if err != nil {
		return nil, fmt.Errorf("origins[%s]: %w", oc.Name, err)
	}
	return d, nil
}

func membersOf(eps []config.Endpoint) []balance.Member {
	out := make([]balance.Member, len(eps))
	for i, e := range eps {
		out[i] = balance.Member{Address: e.Address, Zone: e.Zone, Weight: e.Weight}
	}
	slices.SortFunc(out, func(a, b balance.Member) int { return cmpString(a.Address, b.Address) })
	return out
}

func addrsOf(ms []balance.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Address
	}
	return out
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// diffSorted returns what b has that a lacks, and what a has that b lacks;
// both inputs sorted.
func diffSorted(a, b []string) (added, removed []string) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			removed = append(removed, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			added = append(added, b[j])
			j++
		default:
			i++
			j++
		}
	}
	return added, removed
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
