package drill

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

var deployDrill = drill{
	name:    "deploy",
	summary: "a rolling restart of every origin: errors < 0.1%, the reconnect spike spread by jitter (compared with pools that retry in step)",
	short:   4 * time.Second,
	run:     runDeploy,
}

// Reconnects compares how the gateway's pools reconnect to restarted
// origins with reconnect jitter (each pool its own random stream, as when
// serving) and without (every pool the same stream: they retry in step).
type Reconnects struct {
	Restarts int     `json:"restarts"`
	GapMs    float64 `json:"gap_ms"`    // how long each origin was down
	WindowMs float64 `json:"window_ms"` // the spike window
	Jitter   Arm     `json:"jitter"`
	NoJitter Arm     `json:"no_jitter"`
}

// Arm is one side of the comparison.
type Arm struct {
	Sent       int64   `json:"sent"`
	Errors     int64   `json:"errors"` // non-2xx answers and lost requests
	ErrorRatio float64 `json:"error_ratio"`
	// Reconnected counts connections opened to each restarted origin
	// once it was back; Spike is the most of them opened within one
	// window; SpreadMs the time from the first to the last.
	Reconnected int     `json:"reconnected"`
	Spike       int     `json:"spike"`
	SpreadMs    float64 `json:"spread_ms"`
	// Reasons are the gateway's answers other than 2xx.
	Reasons map[string]int64 `json:"reasons,omitempty"`
}

const (
	restartGap  = 300 * time.Millisecond
	spikeWindow = 20 * time.Millisecond
)

// runDeploy restarts each of six origins in turn (down for restartGap),
// once with the gateway's reconnect jitter and once without, under the
// same load.
func runDeploy(ctx context.Context, o Options, r *Result) error {
	const loops = 4
	origins := or(o.Origins, 6)
	rate := or(o.Rate, 200)
	d := &Reconnects{Restarts: origins, GapMs: ms(restartGap), WindowMs: ms(spikeWindow)}
	for _, same := range []bool{false, true} {
		arm, res := &d.Jitter, r
		if same {
			arm, res = &d.NoJitter, &Result{Drill: r.Drill}
		}
		if err := deployArm(ctx, o, res, origins, loops, rate, same, arm); err != nil {
			return err
		}
	}
	r.Deploy = d
	r.check("errors during the rolling restart", "< 0.1% of requests", d.Jitter.ErrorRatio < 0.001,
		"%.3f%% (%d of %d; %v)", 100*d.Jitter.ErrorRatio, d.Jitter.Errors, d.Jitter.Sent, r.Load.Reasons)
	r.machineCheck("reconnect spike spread by jitter", "spike with jitter ≤ spike without", d.Jitter.Spike <= d.NoJitter.Spike,
		"%d vs %d connections within %v (spread %.0f vs %.0f ms)", d.Jitter.Spike, d.NoJitter.Spike, spikeWindow, d.Jitter.SpreadMs, d.NoJitter.SpreadMs)
	return nil
}

func deployArm(ctx context.Context, o Options, r *Result, origins, loops int, rate float64, same bool, arm *Arm) error {
	// Restarts spread over the load, a settle time at each end. The
	// ejection time is compressed with them: an origin restarted every
	// half second would otherwise still be ejected (30s) when the next one
	// stops, and the 20% ejection cap would keep that one in rotation.
	cycle := (o.Duration - restartGap) / time.Duration(origins+1)
	spec := fleetSpec{origins: origins, loops: loops, sameJitter: same, keys: []string{
		"timeouts: {connect: 250ms, request: 2s}",
		fmt.Sprintf("outlier: {base_ejection_time: %v}", (cycle * 3 / 4).Round(time.Millisecond)),
	}, pool: []string{"prewarm: 2"}}
	var mu sync.Mutex
	back := make([]time.Time, origins)
	var stages []stage
	for i := 0; i < origins; i++ {
		stages = append(stages, stage{at: cycle/2 + time.Duration(i)*cycle, what: fmt.Sprintf("origin o%d drains, stops, starts again %v later", i, restartGap), do: func(f *fleet) error {
			f.drainOrigin(i)
			time.Sleep(restartGap)
			err := f.startOrigin(i)
			mu.Lock()
			back[i] = time.Now()
			mu.Unlock()
			return err
		}})
	}
	return exercise(ctx, o, r, spec, rate, stages, hooks{after: func(f *fleet) error {
		l := &r.Load
		arm.Sent, arm.Errors, arm.Reasons = l.Sent, l.Sent-l.OK, l.Reasons
		if l.Sent > 0 {
			arm.ErrorRatio = float64(arm.Errors) / float64(l.Sent)
		}
		mu.Lock()
		defer mu.Unlock()
		for i, t := range back {
			created := f.dials.created(f.addrs[i], t)
			arm.Reconnected += len(created)
			arm.Spike = max(arm.Spike, peakWithin(created, spikeWindow))
			if len(created) > 1 {
				arm.SpreadMs = max(arm.SpreadMs, ms(created[len(created)-1].Sub(created[0])))
			}
		}
		return nil
	}})
}

// peakWithin is the most times within any window w.
func peakWithin(ts []time.Time, w time.Duration) int {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	peak, lo := 0, 0
	for hi := range ts {
		for ts[hi].Sub(ts[lo]) >= w {
			lo++
		}
		peak = max(peak, hi-lo+1)
	}
	return peak
}
