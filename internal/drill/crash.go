package drill

import (
	"context"
	"fmt"
	"time"
)

var crashDrill = drill{
	name:    "crash",
	summary: "kill an origin under load: nothing hangs, idempotent requests are retried (success ≥ 99.9%), the dead endpoint is ejected",
	short:   3 * time.Second,
	run:     runCrash,
}

// runCrash stops one of four origins a third of the way into the load,
// as a crash does: requests in service are cut, its port refuses.
func runCrash(ctx context.Context, o Options, r *Result) error {
	rate := or(o.Rate, 200)
	spec := fleetSpec{origins: or(o.Origins, 10), loops: 2, keys: []string{"timeouts: {connect: 250ms, request: 2s}"}}
	crashAt := o.Duration / 3
	stages := []stage{{at: crashAt, what: "origin o0 crashes (in-flight requests cut, port closed)", do: func(f *fleet) error {
		f.stopOrigin(0)
		return nil
	}}}
	return exercise(ctx, o, r, spec, rate, stages, hooks{after: func(f *fleet) error {
		l := &r.Load
		r.check("idempotent requests survive the crash", "success ≥ 99.9%", l.SuccessRatio >= 0.999,
			"%.3f%% (%d of %d; %v)", 100*l.SuccessRatio, l.OK, l.Sent, l.Reasons)
		at, ejected := r.Gateway.Ejected[f.addrs[0]]
		r.check("the dead endpoint is ejected", "ejected before the load ends", ejected,
			"%s", seenAt(at, ejected, crashAt))
		return nil
	}})
}

// seenAt describes when an ejection was first seen, after a fault at
// faultAt.
func seenAt(atS float64, seen bool, faultAt time.Duration) string {
	if !seen {
		return "never"
	}
	return fmt.Sprintf("within %.0f ms of the fault", 1000*(atS-faultAt.Seconds()))
}

// or is v, or def when v is zero.
func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
