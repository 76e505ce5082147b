// Package latency summarises a latency distribution the one way every
// corput report does: the count and the nearest-rank p50, p90, p99 and max in
// milliseconds. There is no mean on purpose: an average alone hides the tail
// (LB-PAY-001's ADV-AO-01 and INV-LB-04, docs/spec.md).
package latency

import (
	"math"
	"slices"
	"time"
)

// Percentiles summarises a distribution in milliseconds.
type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Of summarises d, sorting it in place.
func Of(d []time.Duration) Percentiles {
	slices.Sort(d)
	p := Percentiles{Count: len(d)}
	if len(d) == 0 {
		return p
	}
	at := func(q float64) float64 { return Millis(d[rankIndex(len(d), q)]) }
	p.P50, p.P90, p.P99, p.Max = at(0.50), at(0.90), at(0.99), Millis(d[len(d)-1])
	return p
}

// OfMillis summarises values already in milliseconds, sorting them in place.
func OfMillis(ms []float64) Percentiles {
	slices.Sort(ms)
	p := Percentiles{Count: len(ms)}
	if len(ms) == 0 {
		return p
	}
	at := func(q float64) float64 { return ms[rankIndex(len(ms), q)] }
	p.P50, p.P90, p.P99, p.Max = at(0.50), at(0.90), at(0.99), ms[len(ms)-1]
	return p
}

// Rounded returns p with every figure rounded to two decimals, for reports.
func (p Percentiles) Rounded() Percentiles {
	r := func(x float64) float64 { return math.Round(x*100) / 100 }
	p.P50, p.P90, p.P99, p.Max = r(p.P50), r(p.P90), r(p.P99), r(p.Max)
	return p
}

// Millis is d in milliseconds.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rankIndex is the index of the nearest-rank q-quantile among n sorted
// values: ceil(q·n) − 1, clamped.
func rankIndex(n int, q float64) int {
	i := int(math.Ceil(q*float64(n))) - 1
	return min(max(i, 0), n-1)
}
