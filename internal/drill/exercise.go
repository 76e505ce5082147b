package drill

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corput/corput/internal/workload"
)

// Observed is what the gateway did during the load, sampled every 50ms
// from its admin view and its dialer.
type Observed struct {
	// MaxPending is the most requests one endpoint held in admission
	// (waiting for a connection) at once; MaxPoolWaiters the most one
	// (endpoint, loop) pool queued. Both are bounded by max_pending.
	MaxPending     int64 `json:"max_pending"`
	MaxPoolWaiters int   `json:"max_pool_waiters"`
	// MaxActive is the most requests in flight on one endpoint.
	MaxActive int64 `json:"max_active"`
	// Ejected maps each endpoint seen ejected to the seconds from the
	// start of load until it was first seen so.
	Ejected map[string]float64 `json:"ejected,omitempty"`
	// ConnectionsCreated counts upstream connections opened during the
	// load; DialFailures the dials that failed.
	ConnectionsCreated int   `json:"connections_created"`
	DialFailures       int   `json:"dial_failures"`
	OriginServed       int64 `json:"origin_served"` // ground truth: requests the live origins answered
}

// stage is a fault injected at a time after load starts.
type stage struct {
	at   time.Duration
	what string
	do   func(*fleet) error
}

// hooks run on the fleet: ready before the load, after once it ended
// (the fleet still up).
type hooks struct {
	ready, after func(*fleet) error
}

// exercise runs one load against a fleet while the stages run, filling r's
// Setup, Faults, Load, Gateway and process peaks.
func exercise(ctx context.Context, o Options, r *Result, spec fleetSpec, rate float64, stages []stage, h hooks) error {
	spec.seed, spec.log, spec.poolOverride = o.Seed, o.Logger, splitKeys(o.Pool)
	if o.NetHTTP {
		spec.top = append(spec.top, strings.TrimSpace(fastPathKey(o)))
	}
	if spec.mix.Classes == nil {
		spec.mix = workload.Default()
	}
	f, err := startFleet(spec)
	if err != nil {
		return err
	}
	defer f.close()
	timeout := f.timeout
	r.Setup = Setup{
		Origins: spec.origins, Workers: spec.workers, Loops: spec.loops, Rate: rate,
		DurationS: o.Duration.Seconds(), RequestTimeout: timeout.String(),
		ClientTimeout: (timeout + clientMargin).String(),
		Gateway:       strings.Join(append(slices.Clone(spec.keys), "pool: {"+strings.Join(spec.poolKeys(), ", ")+"}"), "; "),
		Path:          "net/http path",
	}
	if f.gw.FastPath(originName) {
		r.Setup.Path = "fast path"
	}

	if h.ready != nil {
		if err := h.ready(f); err != nil {
			return err
		}
	}
	start := time.Now()
	stop := f.sample(start, r)
	var faultErr error
	var wg sync.WaitGroup
	faultCtx, cancelFaults := context.WithCancel(ctx)
	defer cancelFaults()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, s := range stages {
			t := time.NewTimer(time.Until(start.Add(s.at)))
			select {
			case <-faultCtx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			r.Faults = append(r.Faults, Fault{AtS: time.Since(start).Seconds(), What: s.what})
			if err := s.do(f); err != nil {
				faultErr = fmt.Errorf("%s: %w", s.what, err)
				return
			}
		}
	}()
	r.Load = runLoad(ctx, loadSpec{
		target: f.url(), rate: rate, duration: o.Duration, mix: spec.mix, seed: o.Seed,
		timeout: timeout + clientMargin, progress: o.Progress,
	})
	wg.Wait() // a stage later than the load still runs: drills time them inside it
	stop()
	if faultErr != nil {
		return faultErr
	}
	r.Gateway.OriginServed = f.served()
	r.Gateway.ConnectionsCreated = len(f.dials.created("", start))
	f.dials.mu.Lock()
	r.Gateway.DialFailures = f.dials.fails
	f.dials.mu.Unlock()
	commonChecks(r)
	if h.after != nil {
		return h.after(f)
	}
	return nil
}

// clientMargin is how much longer than the gateway's request timeout a
// client waits before it counts a request as lost.
const clientMargin = 2 * time.Second

// sample watches the gateway and the process every 50ms until the
// returned stop is called.
func (f *fleet) sample(start time.Time, r *Result) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	obs := &r.Gateway
	obs.Ejected = map[string]float64{}
	go func() {
		defer close(finished)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			v := f.view()
			for _, e := range v.Endpoints {
				obs.MaxPending = max(obs.MaxPending, e.Pending)
				obs.MaxActive = max(obs.MaxActive, e.Active)
				if _, seen := obs.Ejected[e.Address]; e.Ejected && !seen {
					obs.Ejected[e.Address] = time.Since(start).Seconds()
				}
			}
			for _, l := range v.Loops {
				for _, p := range l.Pools {
					obs.MaxPoolWaiters = max(obs.MaxPoolWaiters, p.Pending)
				}
			}
			r.Process.observe(sampleProcess())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// commonChecks are the bounds every drill keeps.
func commonChecks(r *Result) {
	l := &r.Load
	r.check("nothing lost", "0 requests without an answer before the client timeout", l.Lost == 0,
		"%d of %d lost %v", l.Lost, l.Sent, l.Errors)
	r.check("every error is the gateway's, with a reason", "0 5xx without X-Corput-Error", l.OriginErrors == 0,
		"%d", l.OriginErrors)
	r.check("every shed 503 says when to retry", "Retry-After: 1 on every gateway 503",
		l.ShedWithRetryAfter == int64(l.Shed.Count), "%d of %d", l.ShedWithRetryAfter, l.Shed.Count)
}
