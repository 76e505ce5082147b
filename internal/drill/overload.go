package drill

import (
	"context"
	"fmt"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/workload"
)

var overloadDrill = drill{
	name:    "overload",
	summary: "3× the origins' capacity: pending bounded, excess shed 503 + Retry-After: 1 fast, goodput ≥ 90% of capacity, RSS bounded",
	short:   3 * time.Second,
	run:     runOverload,
}

// RSSBoundMiB is the documented bound on the drill process's resident
// memory under overload (gateway, origins and load generator together,
// without the race detector).
const RSSBoundMiB = 256

// shedBound is how fast a shed 503 must be answered.
const shedBound = 5 * time.Millisecond

// runOverload offers three times what two origins of four workers each can
// serve. Each (endpoint, loop) pool may open as many connections as an
// origin has workers, so the origins work at capacity without a queue of
// their own; what is beyond is shed.
func runOverload(ctx context.Context, o Options, r *Result) error {
	const origins, workers, loops = 2, 4, 2
	mix := workload.Default()
	capacity := origins * workers / meanService(mix).Seconds()
	rate := or(o.Rate, 3*capacity)
	spec := fleetSpec{origins: origins, workers: workers, loops: loops, mix: mix, keys: []string{
		"timeouts: {connect: 250ms, request: 5s}",
	}, pool: []string{fmt.Sprintf("max_connections: %d", workers/loops), "acquire_timeout: 1s"}}
	return exercise(ctx, o, r, spec, rate, nil, hooks{after: func(f *fleet) error {
		r.Setup.CapacityRPS = capacity
		l, g := &r.Load, &r.Gateway
		r.check("pending stays bounded", fmt.Sprintf("≤ max_pending (%d) per endpoint and per pool", config.MaxPendingCeiling),
			g.MaxPending <= config.MaxPendingCeiling && g.MaxPoolWaiters <= config.MaxPendingCeiling,
			"max pending %d, max pool waiters %d", g.MaxPending, g.MaxPoolWaiters)
		r.check("excess is shed, not queued", "≥ 1 gateway 503, all with Retry-After: 1", l.Shed.Count > 0 && l.ShedWithRetryAfter == int64(l.Shed.Count),
			"%d shed (%v)", l.Shed.Count, l.Reasons)
		fast := l.ShedAtOnce
		r.machineCheck("excess shed fast", "p99 of 503s shed without waiting (pending_full, over_cap) < "+shedBound.String(), fast.Count > 0 && fast.P99 < ms(shedBound),
			"%d shed: p50 %.2f ms, p99 %.2f ms, max %.2f ms", fast.Count, fast.P50, fast.P99, fast.Max)
		r.machineCheck("goodput", fmt.Sprintf("≥ 90%% of capacity (%.0f req/s)", capacity), l.GoodputRPS >= 0.9*capacity,
			"%.0f req/s (%.0f%%)", l.GoodputRPS, 100*l.GoodputRPS/capacity)
		r.machineCheck("memory", fmt.Sprintf("peak RSS < %d MiB", RSSBoundMiB), r.Process.PeakRSSMiB < RSSBoundMiB,
			"%.0f MiB (heap %.0f MiB)", r.Process.PeakRSSMiB, r.Process.PeakHeapMiB)
		return nil
	}})
}

// meanService is the mix's mean service time on a warm origin.
func meanService(m workload.Mix) time.Duration {
	var sum float64
	for _, c := range m.Classes {
		sum += c.Percent / 100 * float64(c.Latency)
	}
	return time.Duration(sum)
}
