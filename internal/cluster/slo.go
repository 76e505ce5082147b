package cluster

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/slo"
	"github.com/corput/corput/internal/workload"
)

// sloConfig is what the origin's SLO monitor watches of mix.
func sloConfig(mix *workload.Mix) slo.Config {
	c := slo.Config{Heavy: -1, Classes: make([]slo.Class, len(mix.Classes))}
	for i, cl := range mix.Classes {
		c.Classes[i].Name = cl.Name
		if cl.SLO != nil {
			c.Classes[i].P99 = cl.SLO.P99
		}
	}
	if h, ok := mix.Heavy(); ok {
		c.Heavy = h
	}
	r := mix.ScaleOut.Rule()
	c.ScaleOut = slo.ScaleOut{AbovePercent: r.AbovePercent, For: r.For}
	return c
}

// SetWorkload gives the origin's SLO guard and workload-mix monitor the
// workload of the configuration (nil: none): the monitor starts with the
// first workload, and a reload changes what it watches.
func (o *Origin) SetWorkload(mix *workload.Mix) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.slo.Load()
	if mix == nil {
		if m != nil {
			m.Configure(slo.Config{Heavy: -1})
		}
		return
	}
	cfg := sloConfig(mix)
	o.env.Metrics.SLOGuardActive.DeletePartialMatch(prometheus.Labels{"origin": o.name}) // a class a reload removed
	for _, c := range cfg.Classes {
		o.env.Metrics.SLOGuardActive.WithLabelValues(o.name, c.Name)
	}
	if m != nil {
		m.Configure(cfg)
		return
	}
	if o.closed {
		return
	}
	clk := o.env.SLOClock
	if clk == nil {
		clk = o.env.Clock
	}
	o.slo.Store(slo.NewMonitor(o.name, cfg, clk, o.bal, o.env.Notify))
}

// Kind is what the route and the workload say of a request: its class's
// index in the workload (−1: none) and cost (1 for none), and whether its
// route has priority low.
type Kind struct {
	Class int
	Cost  float64
	Low   bool
	// Retry is the route's own retry policy, nil for the origin's.
	Retry *forward.Policy
}

// Admit is the SLO guard's word on a request of kind k, before any pick:
// SLOShed (counted) when the guard is active and the route has priority
// low, else None.
func (o *Origin) Admit(k Kind) forward.Reason {
	if m := o.slo.Load(); k.Low && m != nil && m.ShedLow() {
		o.m.Answered(forward.SLOShed)
		return forward.SLOShed
	}
	return forward.None
}

// Started is when a request of kind k began, for Served: the zero time
// when nothing will be recorded (no monitor, or no class), so that such a
// request reads no clock.
func (o *Origin) Started(k Kind) time.Time {
	if k.Class < 0 || o.slo.Load() == nil {
		return time.Time{}
	}
	return o.env.Clock.Now()
}

// Served records a request of kind k delivered, start being Started's: the
// SLO guard's latency and the class mix.
func (o *Origin) Served(k Kind, start time.Time) {
	if m := o.slo.Load(); m != nil && !start.IsZero() {
		m.Record(k.Class, o.env.Clock.Now().Sub(start))
	}
}

// SLOView is the monitor's state, nil without a workload.
func (o *Origin) SLOView() *slo.View {
	m := o.slo.Load()
	if m == nil {
		return nil
	}
	v := m.View()
	return &v
}
