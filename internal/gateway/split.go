package gateway

import (
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/route"
)

// routing is what building the routes needs beyond the configuration
// (state.route): the clock that starts ramps, the metric whose children the
// routes count into, the seed of the splits' draws, and the routes in force
// before a reload (nil at start), whose split weights tell which targets
// rose from 0.
type routing struct {
	clk      clock.Clock
	requests *prometheus.CounterVec // corput_route_requests_total; nil: not counted
	seed     uint64                 // 0: math/rand/v2's per-thread source
	prev     *state
}

// routing is the setup of a state's routes replacing prev (nil at start).
func (g *Gateway) routing(prev *state) routing {
	return routing{clk: g.clk, requests: g.metrics.RouteRequests, seed: g.opts.Seed, prev: prev}
}

// bindRoute binds route i's counter and, for a split, builds its split
// (splitOf).
func (st *state) bindRoute(rt *route.Route, i int) {
	r := &st.cfg.Routes[i]
	if st.rs.requests != nil && r.Origin != "" {
		rt.Requests = st.rs.requests.WithLabelValues(r.RouteName(), r.Origin)
	}
	if len(r.Split) > 0 {
		rt.Split = st.splitOf(i)
		st.splits[r.RouteName()] = rt.Split
		rt.Timeouts.PerTry = st.splitPerTry(i)
	}
}

// splitPerTry is the per-try timeout of split route i's own retry block:
// the one every target's completed block has; 0 (each origin's own) when
// they differ, which they do only when the route left the key to its
// targets' origins.
func (st *state) splitPerTry(i int) time.Duration {
	r := &st.cfg.Routes[i]
	if r.Retry == nil {
		return 0
	}
	d := st.cfg.TargetRetry(i, 0).PerTryTimeout
	for t := range r.Split {
		if st.cfg.TargetRetry(i, t).PerTryTimeout != d {
			return 0
		}
	}
	return d
}

// splitOf builds route i's split: a target per routes[].split entry, with
// its counter bound, its retry policy on its origin (routes[].retry), and
// its ramp. A target ramps over its origin's slow_start.window when its
// weight rose from 0 in this reload: the route was in force before with
// the target at weight 0 or absent (and not its one origin). A ramp still
// running is kept as it is while the weight stays.
func (st *state) splitOf(i int) *route.Split {
	r := &st.cfg.Routes[i]
	name := r.RouteName()
	now := st.rs.clk.Now()
	before, had := st.priorWeights(name)
	targets := make([]route.Target, len(r.Split))
	for t, sp := range r.Split {
		tg := route.Target{Origin: sp.Origin, Weight: uint64(sp.Weight)}
		if st.rs.requests != nil {
			tg.Requests = st.rs.requests.WithLabelValues(name, sp.Origin)
		}
		if o := st.origins[sp.Origin]; o != nil && r.Retry != nil {
			tg.Retry = o.RoutePolicy(*st.cfg.TargetRetry(i, t))
		}
		var window time.Duration
		if oc, ok := st.cfg.Origin(sp.Origin); ok {
			window = oc.SlowStart.Window
		}
		if p, ok := before[sp.Origin]; had && sp.Weight > 0 && window > 0 {
			switch {
			case !ok || p.Weight == 0:
				tg.RampFrom, tg.RampWindow = now, window // rose from 0: ramps from now
			case p.RampWindow > 0 && now.Before(p.RampFrom.Add(p.RampWindow)):
				tg.RampFrom, tg.RampWindow = p.RampFrom, window // still ramping
			}
		}
		targets[t] = tg
	}
	var keys *forward.KeySource
	if h, err := config.ParseHashOn(r.SplitHashOn); r.SplitHashOn != "" && err == nil {
		ks := forward.NewKeySource(h, nil)
		keys = &ks
	}
	draw := rand.Uint64
	if st.rs.seed != 0 {
		draw = rng.New(st.rs.seed ^ rng.FNV(name)).Uint64
	}
	return route.NewSplit(targets, keys, st.rs.clk, draw)
}

// priorWeights are the targets of route name in force before this reload,
// by origin (its one origin counts as a target of weight 1); had is false
// when there was no such route (a new route does not ramp: it had no share
// to take from).
func (st *state) priorWeights(name string) (map[string]route.Target, bool) {
	p := st.rs.prev
	if p == nil {
		return nil, false
	}
	out := map[string]route.Target{}
	if sp := p.splits[name]; sp != nil {
		for _, t := range sp.Targets() {
			out[t.Origin] = t
		}
		return out, true
	}
	for _, r := range p.cfg.Routes {
		if r.RouteName() == name && r.Origin != "" {
			out[r.Origin] = route.Target{Origin: r.Origin, Weight: 1}
			return out, true
		}
	}
	return nil, false
}
