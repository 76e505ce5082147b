package lab

import (
	"github.com/corput/corput/internal/latency"
	"math"

	"slices"
	"strconv"
	"time"

	"github.com/corput/corput/internal/workload"
)

// classOf returns the index of class c in the run's mix.
func (e *engine) classOf(c workload.Class) int {
	for i := range e.mix.Classes {
		if e.mix.Classes[i].Name == c.Name {
			return i
		}
	}
	return len(e.mix.Classes) - 1
}

// recorder keeps the request-level figures of the requests that arrived in
// [from, until): latencies per class (from arrival to the answer, pool wait
// and handshake included), errors, sheds and acquisition waits.
type recorder struct {
	from, until time.Duration // until 0: no end
	keepWaits   bool

	lat         [][]float64 // ms, per class, answered requests only
	waits       []float64   // ms, every granted acquisition
	arrivals    int64
	errors      int64 // 5xx answers, timeouts included
	timeouts    int64
	sheds       map[string]int64 // answered by the gateway itself (503, 502, …), by reason
	done        int64            // answered, by the origin or the gateway
	answers     map[string]int64 // the gateway's own answers by "status reason" (keepAnswers)
	keepAnswers bool

	// phaseEnds, when set, also splits the latencies by the instant of
	// arrival into byPhase[phase][class]: phase i holds the arrivals
	// before phaseEnds[i] (and after phaseEnds[i-1]), the last one the rest.
	phaseEnds []time.Duration
	byPhase   [][][]float64

	// failed: per class, the requests answered by the gateway itself or
	// with a 5xx; retried: the requests that went again after a failed
	// attempt; twice: those that reached an instance twice or more.
	failed         []int64
	retried, twice int64
}

// ended counts what every answered request adds, however it was answered.
func (rc *recorder) ended(e *engine, r *request, failed bool) {
	if failed {
		for len(rc.failed) < len(e.mix.Classes) {
			rc.failed = append(rc.failed, 0)
		}
		rc.failed[r.class]++
	}
	if r.retried {
		rc.retried++
	}
	if r.visits > 1 {
		rc.twice++
	}
}

func (rc *recorder) phase(arrived time.Time) int {
	at := arrived.Sub(epoch)
	for i, end := range rc.phaseEnds {
		if at < end {
			return i
		}
	}
	return len(rc.phaseEnds)
}

func (rc *recorder) in(arrived time.Time) bool {
	at := arrived.Sub(epoch)
	return at >= rc.from && (rc.until == 0 || at < rc.until)
}

func (rc *recorder) arrived(e *engine) {
	if rc.in(e.clk.Now()) {
		rc.arrivals++
	}
}

func (rc *recorder) shed(e *engine, r *request, reason string) {
	if !rc.in(r.arrived) {
		return
	}
	if rc.sheds == nil {
		rc.sheds = map[string]int64{}
	}
	rc.sheds[reason]++
	rc.done++
	rc.ended(e, r, true)
	if rc.keepAnswers {
		if rc.answers == nil {
			rc.answers = map[string]int64{}
		}
		rc.answers[strconv.Itoa(r.a.Reason().Status())+" "+reason]++
	}
}

func (rc *recorder) answered(e *engine, r *request, at time.Time, failed bool) {
	if !rc.in(r.arrived) {
		return
	}
	for len(rc.lat) < len(e.mix.Classes) {
		rc.lat = append(rc.lat, nil)
	}
	rc.lat[r.class] = append(rc.lat[r.class], ms(at.Sub(r.arrived)))
	rc.done++
	rc.ended(e, r, failed)
	if rc.phaseEnds != nil {
		p := rc.phase(r.arrived)
		for len(rc.byPhase) <= p {
			rc.byPhase = append(rc.byPhase, nil)
		}
		for len(rc.byPhase[p]) < len(e.mix.Classes) {
			rc.byPhase[p] = append(rc.byPhase[p], nil)
		}
		rc.byPhase[p][r.class] = append(rc.byPhase[p][r.class], ms(at.Sub(r.arrived)))
	}
	if failed {
		rc.errors++
		if r.timedOut {
			rc.timeouts++
		}
	}
}

func (rc *recorder) waited(d time.Duration) {
	if rc.keepWaits {
		rc.waits = append(rc.waits, ms(d))
	}
}

func (rc *recorder) shedTotal() int64 {
	var n int64
	for _, v := range rc.sheds {
		n += v
	}
	return n
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Percentiles summarises a latency distribution (no mean: see package
// latency).
type Percentiles = latency.Percentiles

// percentiles computes nearest-rank percentiles of vals (sorted in place),
// rounded to two decimals for the report.
func percentiles(vals []float64) Percentiles { return latency.OfMillis(vals).Rounded() }

// timeSeries holds one value per virtual second: index i covers (i, i+1].
type timeSeries struct {
	lastCreated, lastClosed, lastArrivals int64

	Created    []float64 `json:"created_per_second"`
	Closed     []float64 `json:"closed_per_second"`
	Open       []float64 `json:"open"`
	OriginOpen []float64 `json:"origin_open"` // counted by the origins' dialers: the ground truth
	Requests   []float64 `json:"requests_per_second"`
}

func (t *timeSeries) sample(e *engine) {
	c, x, a := e.tally.Created(), e.tally.ClosedTotal(), e.rec.arrivals
	t.Created = append(t.Created, float64(c-t.lastCreated))
	t.Closed = append(t.Closed, float64(x-t.lastClosed))
	t.Requests = append(t.Requests, float64(a-t.lastArrivals))
	t.Open = append(t.Open, float64(c-x))
	var open int64
	for _, in := range e.insts {
		open += in.dialer.Stats().Open
	}
	t.OriginOpen = append(t.OriginOpen, float64(open))
	t.lastCreated, t.lastClosed, t.lastArrivals = c, x, a
}

// window returns vals over seconds [from, to).
func window(vals []float64, from, to time.Duration) []float64 {
	i, j := int(from/time.Second), int(to/time.Second)
	i, j = max(0, min(i, len(vals))), max(0, min(j, len(vals)))
	return vals[i:j]
}

func peak(vals []float64) float64 {
	m := 0.0
	for _, v := range vals {
		m = max(m, v)
	}
	return m
}

func sum(vals []float64) float64 {
	s := 0.0
	for _, v := range vals {
		s += v
	}
	return s
}

func median(vals []float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	c := slices.Clone(vals)
	slices.Sort(c)
	return c[len(c)/2]
}

// seconds returns the x axis 1..n of a per-second series.
func seconds(n int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	return xs
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
