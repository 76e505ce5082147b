package drill

import (
	"context"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/forward"
)

var blackholeDrill = drill{
	name:    "blackhole",
	summary: "an origin accepts and never answers: bounded by the request timeout, ejected, no pile-up beyond max_pending",
	short:   3 * time.Second,
	run:     runBlackhole,
}

// runBlackhole puts one endpoint that accepts connections and never
// answers among nine origins. It takes the gateway's pre-warm connection
// and looks ready; only requests find it out.
func runBlackhole(ctx context.Context, o Options, r *Result) error {
	rate := or(o.Rate, 150)
	spec := fleetSpec{origins: or(o.Origins, 10) - 1, holes: 1, loops: 2, keys: []string{"timeouts: {connect: 250ms, request: 1s}"}}
	return exercise(ctx, o, r, spec, rate, nil, hooks{after: func(f *fleet) error {
		l, g := &r.Load, &r.Gateway
		hole := f.holes[0]
		addr := f.addrs[len(f.addrs)-1]
		r.Faults = append(r.Faults, Fault{What: "endpoint " + addr + " accepts connections and never answers"})
		timeout := f.timeout + clientMargin
		r.check("bounded by the request timeout", "max latency < request timeout + "+clientMargin.String(),
			l.Latency.Max < ms(timeout), "max %.0f ms, %d answered 504 upstream_timeout", l.Latency.Max, l.Reasons[forward.UpstreamTimeout.String()])
		seen, ejected := g.Ejected[addr]
		r.check("the black hole is ejected", "ejected before the load ends", ejected, "%s", seenAt(seen, ejected, 0))
		accepted, peak := hole.stats()
		r.check("no pile-up", "requests in flight on one endpoint and pending ≤ max_pending", g.MaxActive <= config.MaxPendingCeiling && g.MaxPending <= config.MaxPendingCeiling,
			"max in flight %d, max pending %d, max pool waiters %d; the black hole held %d connections at most (%d accepted)",
			g.MaxActive, g.MaxPending, g.MaxPoolWaiters, peak, accepted)
		return nil
	}})
}
