package gateway

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/telemetry"
	"github.com/corput/corput/internal/upstream"
)

// origin is one named cluster of endpoints: its balancer, its subset
// placement, and per loop a picker and the pools of that loop's subset.
type origin struct {
	name       string
	cfg        *config.Origin
	gw         *Gateway
	bal        *balance.Origin
	dialer     pool.Dialer
	poolCfg    pool.Config
	policy     forward.Policy // retries, the budget, the metrics of every request's attempts
	reqTimeout time.Duration
	fast       bool // the fast path serves it: HTTP/1.1 pools of this package's dialer
	loops      []*originLoop
	m          originMetrics

	mu        sync.Mutex // guards following: membership changes are serialised
	placement subset.Placement
	members   []balance.Member
	lastErr   string // the last error applying membership, "" when healthy
	changes   uint64
	source    discovery.Source // file or xds source, nil for static
	seeded    bool             // membership known: static, or a source has applied once
	closed    bool             // close has begun: no pool may be opened any more
}

func (o *origin) setSource(src discovery.Source) {
	o.mu.Lock()
	o.source = src
	o.mu.Unlock()
}

// sourceError is the membership source's or the last apply's error.
func (o *origin) sourceErrorLocked() string {
	if o.source != nil {
		if err := o.source.Err(); err != nil {
			return err.Error()
		}
	}
	return o.lastErr
}

// originLoop is an origin as one loop sees it. Its pools map is replaced
// whole (copy on write) under origin.mu, so the request path reads it with
// one atomic load and no lock.
type originLoop struct {
	idx    int
	picker *balance.Picker
	pools  atomic.Pointer[map[string]*pool.Pool]
	subset []string // guarded by origin.mu
	obs    *poolObserver
}

func newOrigin(gw *Gateway, oc *config.Origin) (*origin, error) {
	o := &origin{
		name:       oc.Name,
		cfg:        oc,
		gw:         gw,
		reqTimeout: oc.Timeouts.Request,
	}
	o.m = newOriginMetrics(gw.metrics, oc.Name, gw.loops)
	o.policy = forward.NewPolicy(oc.Retry, gw.clk, &o.m)
	if trace := gw.opts.Trace; trace != nil {
		o.policy.Trace = func(ep string, s forward.Step, r forward.Reason) { trace(oc.Name, ep, s, r) }
	}

	var err error
	o.poolCfg, err = poolConfig(oc)
	if err != nil {
		return nil, err
	}
	if d, ok := gw.opts.Dialers[oc.Name]; ok {
		o.dialer = d
	} else if o.dialer, err = newDialer(oc); err != nil {
		return nil, err
	} else {
		o.fast = gw.cfg.Downstream.FastPath &&
			(oc.Protocol == config.ProtocolH1 || oc.Protocol == config.ProtocolAuto && oc.TLS == nil)
	}
	if oc.TLS != nil && oc.TLS.InsecureSkipVerify {
		gw.log.Warn("origin TLS certificate NOT verified (tls.insecure_skip_verify: true): anyone on the path can impersonate it; set tls.ca instead",
			"origin", oc.Name)
	}

	members := membersOf(oc.Endpoints)
	o.bal, err = balance.NewOrigin(oc.Name, balance.FromConfig(oc), members, balance.Options{
		Clock:    gw.clk,
		Rand:     rng.New(gw.opts.Seed ^ rng.Mix64(rng.FNV(oc.Name))),
		Observer: &balanceObserver{m: &o.m},
	})
	if err != nil {
		return nil, err
	}
	if err := o.newPlacement(addrsOf(members)); err != nil {
		return nil, err
	}
	o.members = members
	o.seeded = oc.Discovery.Type != config.DiscoveryFile && oc.Discovery.Type != config.DiscoveryXDS
	for l := 0; l < gw.loops; l++ {
		ol := &originLoop{idx: l, obs: &poolObserver{m: &o.m, loop: l}}
		ol.subset = o.subsetOf(l)
		ol.picker = o.bal.NewPicker(ol.subset)
		pools := make(map[string]*pool.Pool, len(ol.subset))
		for _, a := range ol.subset {
			p, err := o.newPool(a, ol)
			if err != nil {
				return nil, err
			}
			pools[a] = p
		}
		ol.pools.Store(&pools)
		o.loops = append(o.loops, ol)
	}
	return o, nil
}

// newPlacement builds the subset placement of the configured algorithm
// (ringsteady by default; "none" gives every loop every endpoint) for this
// gateway's fleet.
func (o *origin) newPlacement(addrs []string) error {
	name := string(o.cfg.Subset.Algorithm)
	if name == "" {
		name = subset.NameRingsteady
	}
	alg, err := subset.Lookup(name)
	if err != nil {
		return fmt.Errorf("origins[%s].subset.algorithm: %w", o.name, err)
	}
	sizing, err := subset.NewSizing(o.cfg.Subset.Size, o.cfg.Subset.MinSize, o.cfg.Subset.MaxSize)
	if err != nil {
		return fmt.Errorf("origins[%s]: %w", o.name, err)
	}
	fleet := subset.Fleet{Gateways: o.gw.fleet.Size, Loops: o.gw.loops}
	o.placement, err = alg.Place(subset.Params{Origin: o.name, Fleet: fleet, Sizing: sizing, Seed: rng.FNV(o.name)}, addrs)
	if err != nil {
		return fmt.Errorf("origin %s: subset: %w", o.name, err)
	}
	return nil
}

// subsetOf returns loop l's members under the current placement. Called
// with o.mu held (or before the origin is shared).
func (o *origin) subsetOf(l int) []string {
	return slices.Clone(o.placement.Snapshot().Members(o.gw.fleet.Instance, l))
}

// poolRand is the random source of loop ol's pool for addr: its reconnect
// jitter and lifetime jitter. Each pool has its own stream, so pools that
// lose an origin together do not retry together (unless SameJitter).
func (o *origin) poolRand(addr string, ol *originLoop) *rng.Source {
	if o.gw.opts.SameJitter {
		return rng.New(o.gw.opts.Seed)
	}
	return rng.New(o.gw.opts.Seed ^ rng.Mix64(rng.FNV(addr)+uint64(ol.idx)))
}

func (o *origin) newPool(addr string, ol *originLoop) (*pool.Pool, error) {
	p, err := pool.New(addr, ol.idx, o.poolCfg, o.dialer, o.gw.clk, o.poolRand(addr, ol), ol.obs)
	if err != nil {
		return nil, fmt.Errorf("origin %s: pool %s: %w", o.name, addr, err)
	}
	return p, nil
}

// poolFor returns loop ol's pool for ep. An endpoint outside the loop's
// subset (the balancer's fallback when the whole subset is ejected) gets a
// pool on demand, without pre-warming, that idles out like any other; an
// endpoint no longer in the origin gets a closed pool.
func (o *origin) poolFor(ol *originLoop, addr string) (*pool.Pool, error) {
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
	p, err := pool.New(addr, ol.idx, cfg, o.dialer, o.gw.clk, o.poolRand(addr, ol), ol.obs)
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

// Apply replaces the origin's membership: the placement changes by deltas,
// the balancer keeps survivors' state and ramps newcomers up, and only loops
// whose subset changed touch their pools — new members get pre-warmed pools,
// departed ones drain (in-flight requests finish) and close.
func (o *origin) apply(members []balance.Member) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		// Discovery and shutdown race in corput serve: an update that
		// lands after close must not open pools nothing will close.
		return fmt.Errorf("origin %s: membership update after shutdown ignored", o.name)
	}
	oldAddrs := addrsOf(o.members)
	newAddrs := addrsOf(members)
	if err := o.bal.Update(members); err != nil {
		return err
	}
	added, removed := diffSorted(oldAddrs, newAddrs)
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
	o.members = members
	o.seeded = true
	o.lastErr = ""
	o.changes++
	o.m.membership.Inc()
	for _, ol := range o.loops {
		next := o.subsetOf(ol.idx)
		gained, lost := diffSorted(sortedCopy(ol.subset), sortedCopy(next))
		ol.subset = next
		cur := *ol.pools.Load()
		// Pools created on demand outside the subset are dropped once their
		// endpoint leaves the origin altogether.
		for addr := range cur {
			if !slices.Contains(next, addr) && !slices.Contains(lost, addr) && !slices.Contains(newAddrs, addr) {
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
			if _, ok := pools[a]; ok {
				continue
			}
			p, err := o.newPool(a, ol)
			if err != nil {
				return err
			}
			pools[a] = p
		}
		ol.pools.Store(&pools)
		ol.picker.SetSubset(next)
	}
	return nil
}

// setSourceError records the membership source's health for the admin API.
func (o *origin) setSourceError(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		o.lastErr = ""
	} else {
		o.lastErr = err.Error()
	}
}

// ready reports whether every pool of every loop holds its pre-warmed
// connections.
func (o *origin) ready() bool {
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

func (o *origin) close() {
	o.mu.Lock() // waits for an apply in progress, whose pools are closed below
	o.closed = true
	o.mu.Unlock()
	for _, ol := range o.loops {
		ol.picker.Close()
		for _, p := range *ol.pools.Load() {
			p.Close()
		}
	}
	o.bal.Close()
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
		Protocol:       upstream.Protocol(oc.Protocol),
		ConnectTimeout: oc.Timeouts.Connect,
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

// originMetrics are an origin's Prometheus children, bound once so the
// request path does no label lookups.
type originMetrics struct {
	created     [][2]prometheus.Counter // [loop][h1, h2]
	closed      []prometheus.Counter    // by pool.CloseReason
	acquireWait prometheus.Observer
	duration    [5]prometheus.Observer // by code class 1xx..5xx
	shed        map[forward.Reason]prometheus.Counter
	zoneLocal   prometheus.Counter
	zoneRemote  prometheus.Counter
	ejections   prometheus.Counter
	membership  prometheus.Counter
	stale       prometheus.Counter // requests sent again after a stale connection (forward.Stale)
	ejected     prometheus.Gauge
	panic       prometheus.Gauge
}

func newOriginMetrics(m *telemetry.Metrics, name string, loops int) originMetrics {
	m.InitOrigin(name, loops, []string{upstream.ProtoH1, upstream.ProtoH2})
	om := originMetrics{
		acquireWait: m.AcquireWait.WithLabelValues(name),
		shed:        map[forward.Reason]prometheus.Counter{},
		zoneLocal:   m.ZoneRequests.WithLabelValues(name, "local"),
		zoneRemote:  m.ZoneRequests.WithLabelValues(name, "remote"),
		ejections:   m.OutlierEjections.WithLabelValues(name, telemetry.EjectConsecutive5xx),
		membership:  m.MembershipChanges.WithLabelValues(name),
		stale:       m.StaleRetries.WithLabelValues(name),
		ejected:     m.OutlierEjected.WithLabelValues(name),
		panic:       m.PanicMode.WithLabelValues(name),
	}
	for l := 0; l < loops; l++ {
		ls := strconv.Itoa(l)
		om.created = append(om.created, [2]prometheus.Counter{
			m.ConnectionsCreated.WithLabelValues(name, ls, upstream.ProtoH1),
			m.ConnectionsCreated.WithLabelValues(name, ls, upstream.ProtoH2),
		})
	}
	for _, r := range pool.CloseReasons() {
		for int(r) >= len(om.closed) {
			om.closed = append(om.closed, nil)
		}
		om.closed[r] = m.ConnectionsClosed.WithLabelValues(name, r.String())
	}
	for i, c := range []string{"1xx", "2xx", "3xx", "4xx", "5xx"} {
		om.duration[i] = m.RequestDuration.WithLabelValues(name, c)
	}
	for _, r := range forward.ShedReasons() {
		om.shed[r] = m.RequestsShed.WithLabelValues(name, r.String())
	}
	return om
}

// Answered implements forward.Observer: it counts a shed request.
func (m *originMetrics) Answered(r forward.Reason) {
	if c, ok := m.shed[r]; ok {
		c.Inc()
	}
}

// Resent implements forward.Observer.
func (m *originMetrics) Resent() { m.stale.Inc() }

// Settled implements forward.Observer: the request's duration by class.
func (m *originMetrics) Settled(status int, d time.Duration) {
	m.duration[classIndex(status)].Observe(d.Seconds())
}

// poolObserver feeds one (origin, loop)'s pool events into the metrics.
type poolObserver struct {
	m    *originMetrics
	loop int
}

func protoIndex(p string) int {
	if p == upstream.ProtoH2 {
		return 1
	}
	return 0
}

func (p *poolObserver) ConnCreated(protocol string, _ bool) {
	p.m.created[p.loop][protoIndex(protocol)].Inc()
}
func (p *poolObserver) ConnClosed(_ string, r pool.CloseReason, _ bool) { p.m.closed[r].Inc() }
func (p *poolObserver) DialFailed(error, time.Duration)                 {}
func (p *poolObserver) AcquireWait(d time.Duration, _ error)            { p.m.acquireWait.Observe(d.Seconds()) }

// balanceObserver feeds an origin's balancing events into the metrics.
type balanceObserver struct{ m *originMetrics }

func (b *balanceObserver) Ejected(string, string, time.Duration) { b.m.ejections.Inc() }
func (b *balanceObserver) EjectedCount(n int)                    { b.m.ejected.Set(float64(n)) }
func (b *balanceObserver) PanicMode(on bool) {
	if on {
		b.m.panic.Set(1)
	} else {
		b.m.panic.Set(0)
	}
}
func (b *balanceObserver) ZonePick(local bool) {
	if local {
		b.m.zoneLocal.Inc()
	} else {
		b.m.zoneRemote.Inc()
	}
}
