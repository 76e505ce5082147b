package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/subset"
)

// herdVariant is one way of bringing up a new gateway fleet.
type herdVariant struct {
	name, title string
	prewarm     bool // open each pool's connection before taking traffic
	jitter      bool // spread the pre-warm dials over the scenario's jitter
	ramp        bool // move traffic to the new fleet linearly over the ramp
}

var herdVariants = []herdVariant{
	{name: "cutover", title: "all traffic at once, empty pools"},
	{name: "prewarm", title: "pre-warm, then all traffic", prewarm: true},
	{name: "prewarm_jitter", title: "pre-warm with reconnect jitter", prewarm: true, jitter: true},
	{name: "ramp", title: "traffic ramp, no pre-warm", ramp: true},
	{name: "prewarm_jitter_ramp", title: "pre-warm + jitter + ramp", prewarm: true, jitter: true, ramp: true},
}

// HerdResult is what one variant of the gateway fleet deploy did to the
// origins: connections created per second (the spike), how long until the
// fleet took traffic, and what requests waited for.
type HerdResult struct {
	Name        string        `json:"name"`
	Title       string        `json:"title"`
	Prewarm     bool          `json:"prewarm"`
	Jitter      time.Duration `json:"jitter_ns"`
	Ramp        time.Duration `json:"ramp_ns"`
	CreatedPeak float64       `json:"created_per_sec_peak"`
	// CreatedTotal counts the connections the new fleet opened over the
	// run: every pool's first, plus any a burst needed.
	CreatedTotal int64 `json:"created_total"`
	// ReadyAfter is when the last gateway was ready to take traffic.
	ReadyAfter time.Duration `json:"ready_after_ns"`
	// WaitedForDial counts requests whose stream was not free at once
	// (they waited for a handshake).
	WaitedForDial int64       `json:"requests_waiting_for_a_dial"`
	AcquireWait   Percentiles `json:"acquire_wait"`
	Latency       Percentiles `json:"latency"`
	Requests      int64       `json:"requests"`
	Series        timeSeries  `json:"series"`
}

// runHerd simulates a gateway fleet deploy: at t = 0 the fleet's gateways
// are new processes with empty pools (the step 4 configuration: Ringsteady
// subsets, HTTP/2, per-loop pools) and take over the traffic from the old
// fleet, which is warm and not simulated: only the traffic the new fleet
// takes is generated.
func runHerd(ctx context.Context, sc *Scenario, v herdVariant, tick func()) (HerdResult, error) {
	h := sc.Herd
	pc := fleetPool()
	if v.prewarm {
		pc.Prewarm = 1
	}
	e, err := fleetEngine(sc, sc.Seed, fleetOptions{
		algorithm: subset.NameRingsteady, scope: perLoop, pool: pc, conn: connConfig(sc, true),
	})
	if err != nil {
		return HerdResult{}, fmt.Errorf("herd %s: %w", v.name, err)
	}
	e.rec.keepWaits = true
	jr := rng.New(rng.Mix64(sc.Seed ^ 0x6a6974746572))
	var readyAfter time.Duration
	for _, g := range e.gws {
		ready := !v.prewarm
		var readyAt time.Duration
		g.share = func(now time.Duration) float64 {
			if !ready {
				return 0
			}
			if v.ramp && now-readyAt < h.Ramp {
				return float64(now-readyAt) / float64(h.Ramp)
			}
			return 1
		}
		g.start(sc.Fleet.RatePerGateway)
		if !v.prewarm {
			continue
		}
		for _, l := range g.loops {
			for _, a := range e.snap.Members(g.idx, l.idx) {
				in := e.byAddr[a]
				if !v.jitter {
					g.poolFor(l, in)
					continue
				}
				e.clk.AfterFunc(time.Duration(jr.Uint64()%uint64(h.Jitter)), func() { g.poolFor(l, in) })
			}
		}
		// The gateway polls its pools, as /readyz does, every 10 ms.
		var poll func()
		poll = func() {
			if !g.prewarmed() {
				e.clk.AfterFunc(10*time.Millisecond, poll)
				return
			}
			ready, readyAt = true, e.now()
			readyAfter = max(readyAfter, readyAt)
		}
		e.clk.AfterFunc(0, poll)
	}
	if err := e.run(ctx, h.Duration, tick); err != nil {
		return HerdResult{}, fmt.Errorf("herd %s: %w", v.name, err)
	}
	r := HerdResult{
		Name: v.name, Title: v.title, Prewarm: v.prewarm, ReadyAfter: readyAfter,
		CreatedPeak: peak(e.ts.Created), CreatedTotal: e.tally.Created(),
		Latency: percentiles(concat(e.rec.lat)), Requests: e.rec.arrivals, Series: e.ts,
	}
	if v.jitter {
		r.Jitter = h.Jitter
	}
	if v.ramp {
		r.Ramp = h.Ramp
	}
	for _, w := range e.rec.waits {
		if w > 0 {
			r.WaitedForDial++
		}
	}
	r.AcquireWait = percentiles(e.rec.waits)
	return r, nil
}

// prewarmed reports whether every loop has a ready pool for every member
// of its subset.
func (g *gateway) prewarmed() bool {
	for _, l := range g.loops {
		for _, a := range g.e.snap.Members(g.idx, l.idx) {
			id := g.e.byAddr[a].id
			if id >= len(l.pools) || l.pools[id] == nil || !l.pools[id].Ready() {
				return false
			}
		}
	}
	return true
}
