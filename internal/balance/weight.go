package balance

import (
	"math"
	"time"
)

// warm marks an endpoint that is not in slow start.
const warm = math.MinInt64

// params is the part of a Config the request path reads, converted once to
// the units it computes in. It is immutable after NewOrigin.
type params struct {
	window   int64   // slow-start window in ns; 0: slow start off
	minFrac  float64 // min_weight_percent / 100
	invAggr  float64 // 1 / aggression
	tauMs    float64 // Peak EWMA τ in ms
	rttNs    float64 // default RTT in ns
	tie      float64 // TieRatio
	bias     float64 // least_request active_request_bias
	choices  int
	maxPend  int64
	failures int32 // consecutive_5xx
}

func newParams(c Config) params {
	return params{
		window:   int64(c.SlowStart.Window),
		minFrac:  float64(c.SlowStart.MinWeightPercent) / 100,
		invAggr:  1 / c.SlowStart.Aggression,
		tauMs:    float64(c.EWMADecay) / float64(time.Millisecond),
		rttNs:    float64(c.DefaultRTT),
		tie:      c.TieRatio,
		bias:     c.ActiveRequestBias,
		choices:  c.Choices,
		maxPend:  int64(c.MaxPending),
		failures: int32(c.Outlier.Consecutive5xx),
	}
}

// effective is the slow-start weight of an endpoint of configured weight w
// that entered service at from (ns since the origin's epoch, or warm) at
// instant now: w × max(minFrac, (t/window)^(1/aggression)), t = now − from.
func (p *params) effective(w float64, from, now int64) float64 {
	if from == warm {
		return w
	}
	t := now - from
	if t >= p.window {
		return w
	}
	f := 0.0
	if t > 0 {
		f = float64(t) / float64(p.window)
		if p.invAggr != 1 {
			f = math.Pow(f, p.invAggr)
		}
	}
	return w * max(f, p.minFrac)
}

// warmAt is the instant an endpoint that entered service at from leaves
// slow start, or warm when it is not in slow start.
func (p *params) warmAt(from int64) int64 {
	if from == warm || p.window == 0 {
		return warm
	}
	return from + p.window
}
