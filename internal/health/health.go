// Package health is an origin's active health checks (health_check): a
// gateway probes the endpoints its loops use, and its balancer (package
// balance) ejects one that fails them within the outlier rules.
//
// One Checker per origin per gateway (package cluster builds it with the
// origin, which spans every loop). Its invariants:
//
//   - Scope: it probes only the endpoints in the union of the gateway's
//     loops' subsets (Sync, which the origin calls whenever a membership,
//     subset or fleet change moves them), each once per gateway, not once
//     per loop. An endpoint that leaves the union stops being probed, and
//     whatever its checks held against it is dropped (passive detection
//     alone judges it).
//   - Passive traffic counts: when a probe falls due and the endpoint
//     answered a live request well within the last interval, with no live
//     failure since, the probe is skipped (counted, reason live_traffic).
//     The first failure of a run of live failures brings its next probe
//     forward to within jitter (balance.Origin.OnLiveFailure), unless one
//     started less than a quarter of the interval ago.
//   - Probes ride warm connections within the pool's rules: a probe goes
//     through the same request flow as a request (a forward.Attempt on a
//     balance.Probe, a stream of the endpoint's home pool, exchange.State.Do)
//     and counts for nothing in the balancer. On HTTP/1.1 it takes a
//     connection only when another one stays idle or the pool is below
//     max_connections (never a dial beyond it); on HTTP/2 it takes a
//     stream of a connection with one free, or the pool's Acquire below
//     max_connections. Otherwise it is skipped (reason pool_busy).
//   - Time is the injected clock's only: the schedule and every probe's
//     timeout (which closes the probe's connection or stream) are
//     AfterFuncs on it. Each probe is due interval plus a jitter drawn from
//     a seeded source after the previous one started (the first within one
//     interval plus jitter of the endpoint joining), so a probe to an
//     endpoint that fails is judged within
//     unhealthy_threshold × (interval + jitter) + timeout.
//   - State: unknown until the first verdict, and routed as healthy
//     meanwhile (slow start and /readyz are unchanged by checks); healthy
//     after a passing probe (from unknown) or healthy_threshold in a row;
//     unhealthy after unhealthy_threshold failures in a row. Only a change
//     reaches the balancer (balance.Origin.SetChecked), which combines it
//     with passive ejection by one rule: an endpoint serves only when
//     neither holds it out, and a passing probe never shortens a passive
//     ejection.
//   - gRPC (health_check.grpc): grpc.health.v1.Health/Check passes only on
//     HTTP 200 with grpc-status 0 and status SERVING; an HTTP 200 with any
//     other grpc-status fails.
//   - At most one probe per endpoint is in flight. Close stops every timer
//     and waits for the probes in flight.
package health

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/telemetry"
)

// Pools gives a probe the pool of an endpoint: its home loop's (package
// cluster), and whether its connections carry many streams (HTTP/2).
type Pools interface {
	ProbePool(addr string) (p *pool.Pool, mux bool)
}

// Env is what a Checker takes from its origin.
type Env struct {
	Origin  string
	Clock   clock.Clock
	Seed    uint64 // seeds the jitter
	Log     *slog.Logger
	Metrics *telemetry.Metrics // nil: no metrics
	Balance *balance.Origin
	Pools   Pools
}

// The states of an endpoint's check.
const (
	Unknown   = "unknown"
	Healthy   = "healthy"
	Unhealthy = "unhealthy"
)

// The health sources (balance.EndpointStatus.HealthSource).
const (
	SourcePassive = "passive"      // live requests' failures hold it out
	SourceProbe   = "probe"        // a health check decided last
	SourceLive    = "live_traffic" // live requests answered well: no probe needed
	SourceNone    = "none"         // nothing yet
)

// Checker probes one origin's endpoints for one gateway.
type Checker struct {
	env Env
	pol forward.Policy
	m   metrics

	mu      sync.Mutex // guards following
	spec    *spec      // nil: health_check is off
	rand    *rng.Source
	targets map[string]*target
	addrs   []string // the union of the loops' subsets, as Sync gave it
	closed  bool
	wg      sync.WaitGroup // probes in flight
}

// target is one endpoint's check. Guarded by Checker.mu.
type target struct {
	addr    string
	timer   clock.Timer
	dueAt   time.Time
	running bool // a probe is in flight
	expired bool // its timeout fired
	again   bool // it fell due while a probe was in flight
	gone    bool
	cur     *inflight // the probe in flight, nil for none

	state         string
	passes, fails int
	source        string
	lastStart     time.Time
	lastProbe     time.Time
	lastResult    string
	changedAt     time.Time
	probes, skips uint64
}

type metrics struct {
	pass, fail, skipLive, skipBusy, toHealthy, toUnhealthy prometheus.Counter
}

func newMetrics(m *telemetry.Metrics, origin string) metrics {
	if m == nil {
		nop := prometheus.NewCounter(prometheus.CounterOpts{Name: "nop"})
		return metrics{nop, nop, nop, nop, nop, nop}
	}
	m.InitHealth(origin)
	return metrics{
		pass:        m.HealthProbes.WithLabelValues(origin, "pass"),
		fail:        m.HealthProbes.WithLabelValues(origin, "fail"),
		skipLive:    m.HealthSkipped.WithLabelValues(origin, "live_traffic"),
		skipBusy:    m.HealthSkipped.WithLabelValues(origin, "pool_busy"),
		toHealthy:   m.HealthChanges.WithLabelValues(origin, Healthy),
		toUnhealthy: m.HealthChanges.WithLabelValues(origin, Unhealthy),
	}
}

// New returns a Checker that probes nothing until Configure gives it a
// health_check and Sync its endpoints.
func New(env Env) *Checker {
	if env.Clock == nil {
		env.Clock = clock.Real()
	}
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	c := &Checker{
		env:     env,
		pol:     forward.NewPolicy(config.Retry{}, env.Clock, nil),
		m:       newMetrics(env.Metrics, env.Origin),
		rand:    rng.New(env.Seed ^ rng.Mix64(rng.FNV(env.Origin)^0x6865616c7468)),
		targets: map[string]*target{},
	}
	return c
}

// Configure applies oc's health_check in place: the next probe of every
// endpoint follows it. nil turns the checks off: no more probes, and what
// they held against an endpoint is dropped. A check turned on schedules
// every endpoint Sync gave.
func (c *Checker) Configure(oc *config.Origin) {
	s := newSpec(oc)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	was := c.spec
	c.spec = s
	switch {
	case s == nil && was != nil:
		c.env.Balance.OnLiveFailure(nil)
		for _, t := range c.targets {
			c.dropLocked(t)
		}
		c.targets = map[string]*target{}
	case s != nil && was == nil:
		// Live failures bring probes forward only while there are probes:
		// an origin without checks pays nothing on its failures.
		c.env.Balance.OnLiveFailure(c.sooner)
		c.syncLocked()
	}
}

// Sync sets the endpoints to probe: the union of the gateway's loops'
// subsets. New ones are scheduled within one interval plus jitter; those
// gone are no longer probed. It takes only the Checker's lock.
func (c *Checker) Sync(addrs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addrs = slices.Clone(addrs)
	if c.spec != nil && !c.closed {
		c.syncLocked()
	}
}

func (c *Checker) syncLocked() {
	keep := make(map[string]bool, len(c.addrs))
	for _, a := range c.addrs {
		keep[a] = true
		if _, ok := c.targets[a]; !ok {
			t := &target{addr: a, state: Unknown, source: SourceNone}
			c.targets[a] = t
			c.armLocked(t, time.Duration(c.rand.Float64()*float64(c.spec.interval+c.spec.jitter)))
		}
	}
	for a, t := range c.targets {
		if !keep[a] {
			c.dropLocked(t)
			delete(c.targets, a)
		}
	}
}

// dropLocked stops probing t and drops what its checks held against it.
func (c *Checker) dropLocked(t *target) {
	t.gone = true
	if t.timer != nil {
		t.timer.Stop()
	}
	if t.state == Unhealthy {
		c.env.Balance.SetChecked(t.addr, true)
	}
}

// armLocked schedules t's next probe d from now.
func (c *Checker) armLocked(t *target, d time.Duration) {
	t.dueAt = c.env.Clock.Now().Add(d)
	if t.timer == nil {
		t.timer = c.env.Clock.AfterFunc(d, func() { c.due(t) })
		return
	}
	t.timer.Reset(d)
}

// next is the delay to a probe: interval plus a jitter draw.
func (c *Checker) nextLocked() time.Duration {
	return c.spec.interval + c.jitterLocked()
}

func (c *Checker) jitterLocked() time.Duration {
	if c.spec.jitter <= 0 {
		return 0
	}
	return time.Duration(c.rand.Float64() * float64(c.spec.jitter))
}

// due runs when t's probe falls due (on the clock's goroutine): it skips
// a probe that live traffic makes needless, or starts one.
func (c *Checker) due(t *target) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.spec
	if c.closed || t.gone || s == nil {
		return
	}
	if t.running {
		t.again = true // the probe in flight ends within its timeout; the next starts then
		return
	}
	now := c.env.Clock.Now()
	if t.state != Unhealthy && c.liveLocked(t, now, s) {
		t.skips++
		t.source = SourceLive
		c.m.skipLive.Inc()
		c.armLocked(t, c.nextLocked())
		return
	}
	t.running, t.expired, t.lastStart = true, false, now
	c.armLocked(t, c.nextLocked())
	// The timeout is armed here, at the instant the probe is due, on the
	// injected clock: it cuts the acquisition or closes the connection.
	pr := &inflight{sk: &sink{grpc: s.grpc}}
	pr.ctx, pr.cancel = context.WithCancel(context.Background())
	pr.timer = c.env.Clock.AfterFunc(s.timeout, func() {
		c.mu.Lock()
		t.expired = true
		c.mu.Unlock()
		pr.sk.expire()
		pr.cancel()
	})
	t.cur = pr
	c.wg.Add(1)
	go c.run(t, s, pr)
}

// inflight is a probe's cancellation: its context, its timeout and its
// exchange.Client.
type inflight struct {
	ctx    context.Context
	cancel context.CancelFunc
	timer  clock.Timer
	sk     *sink
}

// liveLocked reports whether live requests prove t healthy now: one
// answered well within the last interval, and none failed since.
func (c *Checker) liveLocked(t *target, now time.Time, s *spec) bool {
	ep := c.env.Balance.Endpoint(t.addr)
	if ep == nil {
		return false
	}
	ok, fail := ep.Live()
	return !ok.IsZero() && now.Sub(ok) < s.interval && !fail.After(ok)
}

// sooner is balance.Origin.OnLiveFailure's hook: a live request to addr
// failed after a success; its next probe comes within jitter, unless one
// started in the last quarter interval.
func (c *Checker) sooner(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.targets[addr]
	s := c.spec
	if !ok || c.closed || s == nil || t.running || t.gone {
		return
	}
	now := c.env.Clock.Now()
	if !t.lastStart.IsZero() && now.Sub(t.lastStart) < s.interval/4 {
		return
	}
	d := c.jitterLocked()
	if t.dueAt.Sub(now) > d {
		c.armLocked(t, d)
	}
}

// run makes one probe and records its verdict.
func (c *Checker) run(t *target, s *spec, pr *inflight) {
	defer c.wg.Done()
	r := c.probe(t, s, pr)
	pr.timer.Stop()
	pr.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	t.running, t.cur = false, nil
	if t.gone || c.closed {
		return
	}
	if r.skip {
		t.skips++
		c.m.skipBusy.Inc()
	} else {
		c.recordLocked(t, s, r)
	}
	if t.again {
		t.again = false
		c.armLocked(t, 0)
	}
}

// recordLocked counts a probe's verdict and moves t's state across the
// thresholds, telling the balancer of a change.
func (c *Checker) recordLocked(t *target, s *spec, r result) {
	now := c.env.Clock.Now()
	t.probes++
	t.lastProbe, t.lastResult, t.source = t.lastStart, r.why, SourceProbe
	was := t.state
	if r.pass {
		c.m.pass.Inc()
		t.fails = 0
		t.passes++
		if t.state == Unknown || (t.state == Unhealthy && t.passes >= s.healthy) {
			t.state = Healthy
		}
	} else {
		c.m.fail.Inc()
		t.passes = 0
		t.fails++
		if t.state != Unhealthy && t.fails >= s.unhealthy {
			t.state = Unhealthy
		}
	}
	if t.state == was {
		return
	}
	t.changedAt = now
	if t.state == Unhealthy {
		c.m.toUnhealthy.Inc()
		c.env.Log.Warn("endpoint failed its health checks", "origin", c.env.Origin, "endpoint", t.addr,
			"failures", t.fails, "last", r.why)
		c.env.Balance.SetChecked(t.addr, false)
		return
	}
	c.m.toHealthy.Inc()
	if was == Unhealthy {
		c.env.Log.Info("endpoint passes its health checks again", "origin", c.env.Origin, "endpoint", t.addr)
		c.env.Balance.SetChecked(t.addr, true)
	}
}

// Close stops every probe's timer, cuts the probes in flight and waits
// for them to end.
func (c *Checker) Close() {
	c.mu.Lock()
	c.closed = true
	for _, t := range c.targets {
		t.gone = true
		if t.timer != nil {
			t.timer.Stop()
		}
		if t.cur != nil {
			t.cur.sk.expire()
			t.cur.cancel()
		}
	}
	c.mu.Unlock()
	c.env.Balance.OnLiveFailure(nil)
	c.wg.Wait()
}

// Fill adds the checks' view to the admin API's endpoint statuses: each
// endpoint's health source and its check.
func (c *Checker) Fill(eps []balance.EndpointStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.spec == nil {
		return
	}
	for i := range eps {
		e := &eps[i]
		t, ok := c.targets[e.Address]
		if !ok {
			continue
		}
		e.Check = &balance.CheckView{State: t.state, LastProbe: t.lastProbe, LastResult: t.lastResult, Probes: t.probes, Skipped: t.skips}
		e.HealthSource = t.source
		if e.EjectedBy == balance.ReasonConsecutive5xx {
			e.HealthSource = SourcePassive
		}
	}
}

// InFlight is the number of probes in flight.
func (c *Checker) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.targets {
		if t.running {
			n++
		}
	}
	return n
}

// State is addr's check state ("" when it is not probed).
func (c *Checker) State(addr string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.targets[addr]; ok {
		return t.state
	}
	return ""
}

// Probed lists the endpoints the checker probes, sorted.
func (c *Checker) Probed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.targets))
	for a := range c.targets {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}
