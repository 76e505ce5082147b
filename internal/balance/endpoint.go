package balance

import (
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/clock"
)

// Member is one endpoint of an origin as membership sources describe it.
type Member struct {
	Address string // host:port, unique within the origin
	Zone    string // "" when unknown
	Weight  int    // relative; 0 means 1
}

// Outcome is how a picked request ended, as far as the endpoint is to blame.
type Outcome uint8

// The outcomes.
const (
	// Success is any response that is not a 5xx: its latency feeds the
	// endpoint's Peak EWMA and it ends a run of failures.
	Success Outcome = iota
	// ServerError is a 5xx response: its latency is recorded and it counts
	// toward consecutive_5xx ejection.
	ServerError
	// ConnectFailure is a failed dial or a connection reset before any
	// response: it counts toward ejection; its latency is not a round trip
	// and is not recorded.
	ConnectFailure
	// Shed is a request the gateway gave up on before it reached the
	// endpoint (pending queue full, pool saturated, client gone): it
	// counts for nothing and must not count against the endpoint.
	Shed
)

// OutcomeOf maps a response status code to Success or ServerError.
func OutcomeOf(status int) Outcome {
	if status >= 500 && status <= 599 {
		return ServerError
	}
	return Success
}

// Health states of an endpoint (Endpoint.state).
const (
	healthy int32 = iota
	failing       // reached consecutive_5xx but not ejected: the cap is full
	ejected
)

// Endpoint is one member of an origin and the state every loop of the gateway
// shares about it: in-flight and pending counts, the Peak EWMA latency, slow
// start and outlier state. Picker.Pick hands out *Endpoint; it stays valid
// (Done, Release work) after the endpoint leaves the origin.
type Endpoint struct {
	origin *Origin
	addr   string

	active      atomic.Int64 // picked and not yet Done
	pending     atomic.Int64 // admitted (TryAdmit) and not yet Released
	consecutive atomic.Int32 // failures in a row
	state       atomic.Int32 // healthy, failing or ejected; written under origin.mu
	rtt         latencyEstimate
	mean        meanEstimate // the typical latency, for peakEWMA's tie rule

	// least_work's state (cost.go): the work in flight (Σ of the costs of
	// the requests picked and not yet done, in work units), the timed
	// requests in flight with the sum of their pick instants (one word:
	// see ageSum), the moving average of latency per unit of cost and the
	// instant of its last sample (ms since the epoch), the learned
	// concurrency limit, and the limit it entered slow start with, which
	// bounds its requests in flight while it ramps (float64 bits; 0: its
	// learned limit does).
	work      atomic.Int64
	ages      ageSum
	speed     meanEstimate
	seen      atomic.Int64
	limit     atomic.Uint64
	rampLimit atomic.Uint64

	// The endpoint's own load report (zoneload.go): its last
	// utilization (float64 bits), when it came (ns since the epoch), and
	// whether it was above HotLoad.
	load   atomic.Uint64
	loadAt atomic.Int64
	hot    atomic.Bool

	// The live requests' last outcomes, for the active health checks
	// (Live): when the endpoint last answered one well, and last failed
	// one (ns since the epoch + 1; 0: never).
	okAt   atomic.Int64
	failAt atomic.Int64

	// Guarded by origin.mu.
	zone        string
	weight      int
	from        int64 // slow start began (ns since the origin's epoch), or warm
	until       int64 // ejected until (ns since epoch); meaningful while ejected
	times       int   // ejections in a row, before decay
	back        int64 // last joined or returned from ejection (ns since epoch)
	gen         uint64
	returnTimer clock.Timer
	removed     bool
	// down: the active health checks find the endpoint unhealthy
	// (SetChecked). It is ejected, or failing while the cap is full, until
	// they pass again.
	down bool
	// byCheck: the ejection in force is the health checks' (no timer), or
	// a passive one whose time ran out while down.
	byCheck bool
}

// Address returns the endpoint's host:port.
func (e *Endpoint) Address() string { return e.addr }

// Active returns the requests picked for this endpoint and not yet Done,
// across all loops.
func (e *Endpoint) Active() int64 { return e.active.Load() }

// Pending returns the requests admitted and not yet Released.
func (e *Endpoint) Pending() int64 { return e.pending.Load() }

// TryAdmit takes one of the endpoint's MaxPending admission slots and
// reports whether it got one. It never blocks and never lets the count exceed
// the bound. On false the gateway sheds at once (503, Retry-After: 1,
// X-Corput-Error: pending_full — see ErrPendingFull) and calls Done with
// Shed; on true it calls Release exactly once when the request leaves the
// queue.
func (e *Endpoint) TryAdmit() bool {
	limit := e.origin.t().prm.maxPend
	for {
		n := e.pending.Load()
		if n >= limit {
			return false
		}
		if e.pending.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release returns an admission slot taken by TryAdmit.
func (e *Endpoint) Release() { e.pending.Add(-1) }

// Done ends a request that Pick handed out; call it exactly once per
// successful Pick (a request placed with PickCost ends with End instead).
// latency is the time from sending the request to the response headers
// (ignored for Shed). A failure that completes a run of consecutive_5xx
// ejects the endpoint before Done returns, unless the ejection cap is full.
//
// A ConnectFailure's latency is not a round trip and is not recorded —
// except in panic routing, where an endpoint outlier detection has given up
// on is a candidate again: there, a failure at or past the threshold records
// a penalty (ten default RTTs, or twice the current estimate if higher), so
// Peak EWMA does not take a refused dial, which returns in microseconds, for
// the fastest endpoint. Outside panic the endpoint is ejected instead.
func (e *Endpoint) Done(latency time.Duration, out Outcome) { e.End(unitTicket, latency, out) }

// End ends a request that PickCost (or PickCostAvoiding) placed with ticket
// t; call it exactly once per such pick. It is Done that also gives back
// the request's work and pick instant, and teaches least_work the
// endpoint's latency per unit of cost and its concurrency limit.
func (e *Endpoint) End(t Ticket, latency time.Duration, out Outcome) {
	if t.probe {
		return // a health check's probe: not a live request
	}
	e.active.Add(-1)
	if t.counted {
		e.origin.inflight.Add(-1)
	}
	e.work.Add(-t.work)
	if t.at >= 0 {
		e.ages.remove(t.at)
	}
	if out == Shed {
		return
	}
	o := e.origin
	tn := o.t()
	now := o.nowNs()
	cost := t.cost()
	if out != ConnectFailure {
		e.rtt.observe(float64(latency), now, tn.prm.tauMs)
		e.mean.observe(float64(latency))
		if tn.leastWork {
			x := float64(latency) / cost
			if out == Success && t.n > 0 {
				e.learn(t.n, x, tn.prm.tie, t.ramp)
			}
			e.observeSpeed(x, now)
		}
	}
	if out == Success {
		e.okAt.Store(now + 1)
		if e.consecutive.Load() != 0 && e.consecutive.Swap(0) >= tn.prm.failures && e.state.Load() == failing {
			o.recovered(e)
		}
		return
	}
	e.failAt.Store(now + 1)
	n := e.consecutive.Add(1)
	if n == 1 {
		if h := o.onFail.Load(); h != nil {
			(*h)(e.addr) // the active health checks probe it sooner
		}
	}
	if n >= tn.prm.failures {
		// A failing endpoint (cap full) is ejected at its next failure
		// once an ejection slot is free; until then it costs no lock.
		if st := e.state.Load(); st == healthy || (st == failing && o.room.Load()) {
			o.failed(e)
		}
		if out == ConnectFailure && o.Panic() {
			penalty := max(10*tn.prm.rttNs, 2*e.rtt.at(now, tn.prm.tauMs))
			e.rtt.observe(penalty, now, tn.prm.tauMs)
			e.mean.raise(penalty)
			if tn.leastWork {
				e.speed.raiseCounted(max(10*tn.prm.rttNs, 2*e.slowness(now, tn.prm.tauMs)), trustSamples)
				e.seen.Store(now / 1e6)
			}
		}
	}
}

// EndpointStatus is what the admin API shows about one endpoint.
type EndpointStatus struct {
	Address         string        `json:"address"`
	Zone            string        `json:"zone"`
	Weight          int           `json:"weight"`
	EffectiveWeight float64       `json:"effective_weight"` // slow-start weight now
	Active          int64         `json:"active"`
	Pending         int64         `json:"pending"`
	EWMALatency     time.Duration `json:"ewma_latency_ns"`
	// least_work's view: the work in flight (in units of the lightest
	// class's cost), the latency per unit of cost (decayed while idle) and
	// the learned concurrency limit.
	Work         float64       `json:"work_in_flight"`
	CostLatency  time.Duration `json:"cost_latency_ns"`
	Concurrency  float64       `json:"concurrency_limit"`
	Ejected      bool          `json:"ejected"`
	EjectedUntil time.Time     `json:"ejected_until,omitzero"`
	TimesEjected int           `json:"times_ejected"`
	Failing      bool          `json:"failing"` // failed consecutive_5xx times, not ejected because of the cap
	// EjectedBy is what keeps the endpoint out of service (ejected, or
	// failing while the cap is full): ReasonConsecutive5xx (live
	// requests) or ReasonHealthCheck; "" while in service.
	EjectedBy string `json:"ejected_by,omitempty"`
	// HealthSource and Check are the active health checks' view (package
	// health fills them; empty without health_check): what decided the
	// endpoint's health last — "passive" (live requests' failures),
	// "probe" (a health check), "live_traffic" (live requests answered
	// well, so no probe was needed), "none" (nothing yet: an endpoint is
	// taken as healthy until shown otherwise).
	HealthSource string     `json:"health_source,omitempty"`
	Check        *CheckView `json:"health_check,omitempty"`
}

// CheckView is what the admin API shows of an endpoint's active health
// check (package health fills it).
type CheckView struct {
	State      string    `json:"state"` // unknown, healthy or unhealthy
	LastProbe  time.Time `json:"last_probe,omitzero"`
	LastResult string    `json:"last_result,omitempty"` // pass, or why the probe failed
	Probes     uint64    `json:"probes"`
	Skipped    uint64    `json:"skipped"`
}

// Live returns when the endpoint last answered a live request well and
// when it last failed one (a 5xx or a connection failure); zero: never.
// Health checks' probes do not count (Probe). Two atomic loads.
func (e *Endpoint) Live() (ok, fail time.Time) {
	o := e.origin
	at := func(v int64) time.Time {
		if v == 0 {
			return time.Time{}
		}
		return o.epoch.Add(time.Duration(v - 1))
	}
	return at(e.okAt.Load()), at(e.failAt.Load())
}

// Probe is a forward.Picker that offers one endpoint, for an active health
// check's probe: the probe runs the request flow (admission, a stream of
// the pool, the exchange) but counts for nothing in the balancer — no
// latency, no failure run, no request in flight, no live outcome (Live).
type Probe struct{ e *Endpoint }

// NewProbe is the Probe of e.
func NewProbe(e *Endpoint) Probe { return Probe{e} }

// PickKeyed offers the endpoint.
func (p Probe) PickKeyed(float64, Key) (*Endpoint, Ticket, error) {
	return p.e, Ticket{at: -1, probe: true}, nil
}

// PickKeyedAvoiding offers nothing: a probe is not retried elsewhere.
func (p Probe) PickKeyedAvoiding([]*Endpoint, float64, Key) (*Endpoint, Ticket, error) {
	return nil, Ticket{}, ErrAllTried
}

// Status returns the endpoint's state now.
func (e *Endpoint) Status() EndpointStatus {
	o := e.origin
	o.mu.Lock()
	defer o.mu.Unlock()
	return e.statusLocked(o.nowNs())
}

func (e *Endpoint) statusLocked(now int64) EndpointStatus {
	o := e.origin
	s := EndpointStatus{
		Address:         e.addr,
		Zone:            e.zone,
		Weight:          e.weight,
		EffectiveWeight: o.t().prm.effective(float64(e.weight), e.from, now),
		Active:          e.active.Load(),
		Pending:         e.pending.Load(),
		EWMALatency:     time.Duration(e.rtt.at(now, o.t().prm.tauMs)),
		Work:            float64(e.work.Load()) / workScale,
		CostLatency:     time.Duration(e.slowness(now, o.t().prm.tauMs)),
		Concurrency:     e.limitNow(),
		TimesEjected:    o.decayedTimesLocked(e, now),
	}
	switch e.state.Load() {
	case ejected:
		s.Ejected = true
		s.EjectedBy = ReasonConsecutive5xx
		if e.byCheck {
			s.EjectedBy = ReasonHealthCheck // until the checks pass
		} else {
			s.EjectedUntil = o.epoch.Add(time.Duration(e.until))
		}
	case failing:
		s.Failing = true
		s.EjectedBy = ReasonConsecutive5xx
		if e.down {
			s.EjectedBy = ReasonHealthCheck
		}
	}
	return s
}
