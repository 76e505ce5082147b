package drill

import (
	"context"
	"fmt"
	"time"
)

var soakDrill = drill{
	name:    "soak",
	summary: "mixed load for a long time (10 minutes from the command): goroutines, file descriptors and connections return to baseline",
	short:   3 * time.Second,
	run:     runSoak,
}

// soakIdle is the pools' idle timeout in the soak: after the load, pooled
// connections beyond pre-warm close within it.
const soakIdle = time.Second

// runSoak sends the 70/30 mix to four origins, then lets the gateway idle
// and compares it with its state before the load.
func runSoak(ctx context.Context, o Options, r *Result) error {
	rate := or(o.Rate, 100)
	spec := fleetSpec{origins: 4, loops: 2, keys: []string{"timeouts: {connect: 250ms, request: 2s}"},
		pool: []string{fmt.Sprintf("idle_timeout: %v", soakIdle), "prewarm: 1"}}
	var base procSample
	var baseConns int
	return exercise(ctx, o, r, spec, rate, nil, hooks{
		ready: func(f *fleet) error {
			base, baseConns = sampleProcess(), openUpstream(f)
			return nil
		},
		after: func(f *fleet) error {
			l := &r.Load
			r.check("mixed load served", "success ≥ 99.9%", l.SuccessRatio >= 0.999, "%.3f%% of %d", 100*l.SuccessRatio, l.Sent)
			// Idle: the load's connections close, the pools shrink back
			// to pre-warm.
			var now procSample
			var conns int
			for deadline := time.Now().Add(soakIdle + 5*time.Second); ; {
				now, conns = sampleProcess(), openUpstream(f)
				if (now.goroutines <= base.goroutines+goroutineSlack && now.fds <= base.fds+fdSlack && conns <= baseConns) || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			r.check("serving goroutines return to baseline", fmt.Sprintf("≤ %d after idling", base.goroutines+goroutineSlack),
				now.goroutines <= base.goroutines+goroutineSlack, "%d before the load, %d at peak, %d after", base.goroutines, r.Process.GoroutinesPeak, now.goroutines)
			if base.fds >= 0 {
				r.check("serving file descriptors return to baseline", fmt.Sprintf("≤ %d after idling", base.fds+fdSlack),
					now.fds <= base.fds+fdSlack, "%d before the load, %d at peak, %d after", base.fds, r.Process.FDsPeak, now.fds)
			}
			r.check("upstream connections return to pre-warm", fmt.Sprintf("≤ %d", baseConns), conns <= baseConns,
				"%d before the load, %d after", baseConns, conns)
			return nil
		},
	})
}

// openUpstream counts the gateway's open upstream connections.
func openUpstream(f *fleet) int {
	n := 0
	for _, l := range f.view().Loops {
		for _, p := range l.Pools {
			n += p.Open + p.Temporary
		}
	}
	return n
}
