package live

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/corput/corput/internal/loadgen"
	"github.com/corput/corput/internal/rng"
)

// Load is what the clients saw during a step: the sum of G×K open-loop
// Poisson streams (internal/loadgen, the 70/30 mix), one per (gateway,
// loop).
//
// Each stream speaks prior-knowledge HTTP/2 to its gateway, so it is
// exactly one downstream connection; a gateway assigns connections to loops
// round-robin, so the K streams of a gateway land on its K loops and every
// loop carries 1/(G×K) of the traffic.
type Load struct {
	Streams     int              `json:"streams"`
	Rate        float64          `json:"rate"` // asked, per second, all streams
	Requests    int64            `json:"requests"`
	Answered    int64            `json:"answered"`
	StatusCodes map[string]int64 `json:"status_codes"`
	Errors      map[string]int64 `json:"errors,omitempty"`
	// Latency is over every answered request. Max and Count are exact;
	// P50, P90 and P99 are the streams' percentiles averaged with their
	// request counts as weights (loadgen reports percentiles, not
	// samples), which is close to the pooled percentile when the streams
	// are alike, as here.
	Latency loadgen.Latency `json:"latency"`
}

// drive sends rate requests per second for d, split evenly over loops
// streams per gateway, and sums what they saw. A non-nil progress hears
// each stream's running tally about once a second, from that stream's
// goroutine.
func drive(ctx context.Context, gateways []*part, loops int, rate float64, d time.Duration, seed uint64, progress func(stream int, p loadgen.Progress)) (Load, error) {
	n := len(gateways) * loops
	reports := make([]loadgen.Report, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		gw := gateways[i/loops]
		var tally func(loadgen.Progress)
		if progress != nil {
			tally = func(p loadgen.Progress) { progress(i, p) }
		}
		wg.Go(func() {
			reports[i], errs[i] = loadgen.Run(ctx, loadgen.Options{
				Target:   "http://" + gw.addr,
				Rate:     rate / float64(n),
				Duration: d,
				Seed:     rng.Mix64(seed + uint64(i)),
				Timeout:  10 * time.Second,
				Proto:    "h2c",
				MaxConns: 1, // one downstream connection: one loop
				Progress: tally,
			})
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return sumLoad(reports, rate), err // once, not once per stream
	}
	return sumLoad(reports, rate), errors.Join(errs...)
}

// sumLoad adds the streams' reports up (see Load.Latency for percentiles).
func sumLoad(reports []loadgen.Report, rate float64) Load {
	l := Load{Streams: len(reports), Rate: rate, StatusCodes: map[string]int64{}, Errors: map[string]int64{}}
	var p50, p90, p99 float64
	for _, r := range reports {
		l.Requests += r.Requests
		l.Answered += r.Answered
		for k, v := range r.StatusCodes {
			l.StatusCodes[k] += v
		}
		for k, v := range r.Errors {
			l.Errors[k] += v
		}
		if r.Overall == nil || r.Overall.Count == 0 {
			continue
		}
		o := *r.Overall
		w := float64(o.Count)
		l.Latency.Count += o.Count
		p50, p90, p99 = p50+w*o.P50, p90+w*o.P90, p99+w*o.P99
		l.Latency.Max = max(l.Latency.Max, o.Max)
	}
	if c := float64(l.Latency.Count); c > 0 {
		l.Latency.P50, l.Latency.P90, l.Latency.P99 = p50/c, p90/c, p99/c
	}
	if len(l.Errors) == 0 {
		l.Errors = nil
	}
	return l
}

// ok is the number of requests answered 2xx.
func (l Load) ok() int64 {
	var n int64
	for k, v := range l.StatusCodes {
		if len(k) == 3 && k[0] == '2' {
			n += v
		}
	}
	return n
}
