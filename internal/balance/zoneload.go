package balance

import (
	"math"
	"time"
)

// An origin's endpoints may report their load (ORCA's endpoint-load-metrics
// response header, read by the serving paths: forward.ParseLoad). When
// every local endpoint in service has reported a utilization above HotLoad
// within LoadTTL, the zone rule spills: the local zone keeps no more than
// its share of the origin's capacity, and the rest goes to the sibling
// zones. A report older than LoadTTL counts as none.
const (
	HotLoad = 0.8
	LoadTTL = 10 * time.Second
)

// PenaltyFactor is what PenalizeZone multiplies the down-weighted zone's
// share of the picks by: enough to keep probing it, too little to weigh in
// a p99 (1 % of a third of the traffic is 0.33 %).
const PenaltyFactor = 0.01

// ReportLoad records the endpoint's utilization (0–1, from its
// cpu_utilization) as of now. It takes no lock unless the report moves the
// endpoint across HotLoad.
func (e *Endpoint) ReportLoad(util float64) {
	o := e.origin
	e.load.Store(math.Float64bits(util))
	e.loadAt.Store(o.nowNs())
	hot := util > HotLoad
	if e.hot.Swap(hot) != hot {
		o.mu.Lock()
		defer o.mu.Unlock()
		if !o.closed {
			o.reassessLocked()
		}
	}
}

// loadedLocked reports whether e reported a load above HotLoad within
// LoadTTL of now.
func (e *Endpoint) loadedLocked(now int64) bool {
	return e.hot.Load() && now-e.loadAt.Load() < int64(LoadTTL)
}

// localHotLocked reports whether every local endpoint in service is
// loaded; while it is, a timer looks again when the reports would expire.
func (o *Origin) localHotLocked() bool {
	now, local, n := o.nowNs(), o.t().cfg.Zone.Local, 0
	for _, e := range o.list {
		if e.zone != local || e.state.Load() != healthy {
			continue
		}
		if !e.loadedLocked(now) {
			return false
		}
		n++
	}
	if n > 0 && o.loadTimer == nil && !o.closed {
		o.loadTimer = o.clk.AfterFunc(LoadTTL, func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.loadTimer = nil
			if !o.closed {
				o.reassessLocked()
			}
		})
	}
	return n > 0
}

// upWeightLocked is the configured weight of every healthy endpoint.
func (o *Origin) upWeightLocked() int {
	w := 0
	for _, e := range o.list {
		if e.state.Load() == healthy {
			w += e.weight
		}
	}
	return w
}

// ZoneLatencies returns each zone's latency: the mean, over its endpoints
// in service, of the higher of their Peak EWMA estimate (which shows a
// slowdown at its first slow answer) and their typical latency (the
// estimate peak_ewma's tie rule reads, which does not decay while the
// endpoint is idle: a zone that gets only a few probes keeps its last
// measured latency).
//
// Under least_work it is their latency per unit of cost instead (the
// moving average least_work scores by, undecayed): a zone's mean over
// mixed classes says as much about the mix it was sent as about its
// speed, and least_work sends a slow zone the light requests, whose mix
// averages low. In the SLO drill a zone 3× slow read 84 ms against the
// others' 61, under ZoneRatio, so the guard lifted its down-weight and
// the light p99 stayed over budget; per unit of cost it reads 60 against 20.
func (o *Origin) ZoneLatencies() map[string]time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.t()
	now, tau := o.nowNs(), t.prm.tauMs
	sum, n := map[string]float64{}, map[string]int{}
	for _, e := range o.list {
		if e.state.Load() == ejected {
			continue
		}
		if t.leastWork {
			sum[e.zone] += e.speed.load()
		} else {
			sum[e.zone] += max(e.rtt.at(now, tau), e.mean.load())
		}
		n[e.zone]++
	}
	out := make(map[string]time.Duration, len(sum))
	for z, s := range sum {
		out[z] = time.Duration(s / float64(n[z]))
	}
	return out
}

// PenalizeZone down-weights the endpoints of zone (the SLO guard's
// action): while other candidates remain, they take PenaltyFactor of their
// usual share of the picks. "" lifts the penalty.
func (o *Origin) PenalizeZone(zone string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.penalized == zone {
		return
	}
	o.penalized = zone
	o.refreshLocked()
}

// PenalizedZone is the zone PenalizeZone down-weights now ("" none).
func (o *Origin) PenalizedZone() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.penalized
}

// ZoneSpilling reports whether the local zone is loaded and spills.
func (o *Origin) ZoneSpilling() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hot
}
