package dashboard

import (
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/telemetry"
)

// Point is one sample: levels at its time and rates over the interval that
// ended then. The top-level fields sum every origin.
type Point struct {
	T time.Time `json:"t"`
	Figures
	Origins map[string]Figures `json:"origins"`
	// Mirrors are the routes' mirroring rates (routes[].mirror), by route.
	Mirrors map[string]MirrorRates `json:"mirrors,omitempty"`
	// Splits are the routes sent to more than one origin (routes[].split):
	// requests per second routed to each target, by route then origin
	// (corput_route_requests_total).
	Splits map[string]map[string]float64 `json:"splits,omitempty"`
}

// MirrorRates are one route's mirrors per second over an interval.
type MirrorRates struct {
	MirroredPerSec float64 `json:"mirrored_per_s"`
	DroppedPerSec  float64 `json:"dropped_per_s"`
}

// MirrorTotals are one route's mirror counts since the gateway started:
// its shadow origin, the requests mirrored, and the mirrors dropped by
// reason (corput_route_mirrored_total, corput_route_mirror_dropped_total).
type MirrorTotals struct {
	Origin   string             `json:"origin"`
	Mirrored float64            `json:"mirrored"`
	Dropped  map[string]float64 `json:"dropped"`
}

func (m MirrorTotals) dropped() float64 {
	n := 0.0
	for _, v := range m.Dropped {
		n += v
	}
	return n
}

// Figures are one origin's (or the gateway's) levels and rates.
type Figures struct {
	Open             float64 `json:"open"`          // upstream connections open
	CreatedPerSec    float64 `json:"created_per_s"` // the churn line
	ClosedPerSec     float64 `json:"closed_per_s"`
	RequestsPerSec   float64 `json:"requests_per_s"` // upstream requests answered
	ShedPerSec       float64 `json:"shed_per_s"`
	ZoneLocalPerSec  float64 `json:"zone_local_per_s"`
	ZoneRemotePerSec float64 `json:"zone_remote_per_s"`
	Ejected          float64 `json:"ejected"`
	Panic            bool    `json:"panic"`
}

// Totals are counters since the gateway started.
type Totals struct {
	Created    float64 `json:"created"`
	Closed     float64 `json:"closed"`
	Requests   float64 `json:"requests"`
	Shed       float64 `json:"shed"`
	ZoneLocal  float64 `json:"zone_local"`
	ZoneRemote float64 `json:"zone_remote"`
}

// History is the sampler's ring buffer, oldest point first, served as
// JSON at /dashboard/history.
type History struct {
	IntervalSeconds float64           `json:"interval_s"`
	WindowSeconds   float64           `json:"window_s"`
	Totals          Totals            `json:"totals"`
	OriginTotals    map[string]Totals `json:"origin_totals"`
	// MirrorTotals are the mirroring routes' counts, by route.
	MirrorTotals map[string]MirrorTotals `json:"mirror_totals,omitempty"`
	Points       []Point                 `json:"points"`
}

// sample is what one Gather reads: counters and levels by origin.
type sample struct {
	at      time.Time
	totals  map[string]Totals
	levels  map[string]Figures    // Open, Ejected and Panic only
	routed  map[[2]string]float64 // corput_route_requests_total by route, origin
	mirrors map[string]MirrorTotals
}

// sampler reads the metrics registry every interval and keeps the last
// capacity points. Its timer chain is armed and stopped under mu, and wg
// counts the armed or running tick, so Close returns only once no tick can
// run again.
type sampler struct {
	clk      clock.Clock
	metrics  *telemetry.Metrics
	interval time.Duration
	wg       sync.WaitGroup

	mu     sync.Mutex // guards following
	points []Point    // ring buffer of at most cap(points)
	next   int        // where the next point goes once the buffer is full
	last   sample
	timer  clock.Timer
	closed bool
}

func newSampler(clk clock.Clock, m *telemetry.Metrics, interval time.Duration, capacity int) *sampler {
	s := &sampler{clk: clk, metrics: m, interval: interval, points: make([]Point, 0, capacity)}
	s.last = s.read()
	s.wg.Add(1)
	s.mu.Lock()
	s.timer = clk.AfterFunc(interval, s.tick)
	s.mu.Unlock()
	return s
}

// tick takes one sample and re-arms the timer unless the sampler closed.
func (s *sampler) tick() {
	defer s.wg.Done()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return
	}
	cur := s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appendLocked(point(s.last, cur))
	s.last = cur
	if !s.closed {
		s.wg.Add(1)
		s.timer.Reset(s.interval)
	}
}

func (s *sampler) appendLocked(p Point) {
	if len(s.points) < cap(s.points) {
		s.points = append(s.points, p)
		return
	}
	s.points[s.next] = p
	s.next = (s.next + 1) % len(s.points)
}

// close stops the ticks and waits for one that is running.
func (s *sampler) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		if s.timer.Stop() {
			s.wg.Done()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// history copies the buffer, oldest first.
func (s *sampler) history() History {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := History{
		IntervalSeconds: s.interval.Seconds(),
		WindowSeconds:   s.interval.Seconds() * float64(cap(s.points)),
		OriginTotals:    s.last.totals,
		MirrorTotals:    s.last.mirrors,
		Points:          make([]Point, 0, len(s.points)),
	}
	for _, t := range s.last.totals {
		h.Totals = h.Totals.plus(t)
	}
	h.Points = append(h.Points, s.points[s.next:]...)
	h.Points = append(h.Points, s.points[:s.next]...)
	return h
}

// read refreshes the state gauges and gathers the registry. A failed
// Gather (a collector error) still returns what was gathered.
func (s *sampler) read() sample {
	s.metrics.Refresh()
	mfs, _ := s.metrics.Registry.Gather()
	out := sample{at: s.clk.Now(), totals: map[string]Totals{}, levels: map[string]Figures{}, routed: map[[2]string]float64{}}
	for _, mf := range mfs {
		if readMirrors(&out, mf) {
			continue
		}
		for _, m := range mf.GetMetric() {
			origin := label(m, "origin")
			if origin == "" {
				continue
			}
			if mf.GetName() == "corput_route_requests_total" {
				out.routed[[2]string{label(m, "route"), origin}] += m.GetCounter().GetValue()
				continue
			}
			t, l := out.totals[origin], out.levels[origin]
			switch mf.GetName() {
			case "corput_upstream_connections_created_total":
				t.Created += m.GetCounter().GetValue()
			case "corput_upstream_connections_closed_total":
				t.Closed += m.GetCounter().GetValue()
			case "corput_upstream_request_duration_seconds":
				t.Requests += float64(m.GetHistogram().GetSampleCount())
			case "corput_requests_shed_total":
				t.Shed += m.GetCounter().GetValue()
			case "corput_zone_requests_total":
				if label(m, "locality") == "local" {
					t.ZoneLocal += m.GetCounter().GetValue()
				} else {
					t.ZoneRemote += m.GetCounter().GetValue()
				}
			case "corput_upstream_connections_open":
				l.Open += m.GetGauge().GetValue()
			case "corput_outlier_ejected":
				l.Ejected = m.GetGauge().GetValue()
			case "corput_panic_mode":
				l.Panic = m.GetGauge().GetValue() > 0
			default:
				continue
			}
			out.totals[origin], out.levels[origin] = t, l
		}
	}
	return out
}

// readMirrors reads mf into out's mirrors when it is a mirror counter,
// and reports whether it was.
func readMirrors(out *sample, mf *dto.MetricFamily) bool {
	name := mf.GetName()
	if name != "corput_route_mirrored_total" && name != "corput_route_mirror_dropped_total" {
		return false
	}
	if out.mirrors == nil {
		out.mirrors = map[string]MirrorTotals{}
	}
	for _, m := range mf.GetMetric() {
		route := label(m, "route")
		t := out.mirrors[route]
		t.Origin = label(m, "origin")
		if t.Dropped == nil {
			t.Dropped = map[string]float64{}
		}
		if name == "corput_route_mirrored_total" {
			t.Mirrored += m.GetCounter().GetValue()
		} else {
			t.Dropped[label(m, "reason")] += m.GetCounter().GetValue()
		}
		out.mirrors[route] = t
	}
	return true
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

func (t Totals) plus(u Totals) Totals {
	return Totals{Created: t.Created + u.Created, Closed: t.Closed + u.Closed, Requests: t.Requests + u.Requests,
		Shed: t.Shed + u.Shed, ZoneLocal: t.ZoneLocal + u.ZoneLocal, ZoneRemote: t.ZoneRemote + u.ZoneRemote}
}

// point turns two samples into levels at cur and rates between them. A
// counter that went down (a restart) counts as zero.
func point(prev, cur sample) Point {
	p := Point{T: cur.at, Origins: make(map[string]Figures, len(cur.levels))}
	dt := cur.at.Sub(prev.at).Seconds()
	rate := func(a, b float64) float64 {
		if dt <= 0 || b < a {
			return 0
		}
		return (b - a) / dt
	}
	for origin, lv := range cur.levels {
		a, b := prev.totals[origin], cur.totals[origin]
		f := lv
		f.CreatedPerSec = rate(a.Created, b.Created)
		f.ClosedPerSec = rate(a.Closed, b.Closed)
		f.RequestsPerSec = rate(a.Requests, b.Requests)
		f.ShedPerSec = rate(a.Shed, b.Shed)
		f.ZoneLocalPerSec = rate(a.ZoneLocal, b.ZoneLocal)
		f.ZoneRemotePerSec = rate(a.ZoneRemote, b.ZoneRemote)
		p.Origins[origin] = f
		p.Figures = p.Figures.plus(f)
	}
	for route, b := range cur.mirrors {
		if p.Mirrors == nil {
			p.Mirrors = map[string]MirrorRates{}
		}
		a := prev.mirrors[route]
		p.Mirrors[route] = MirrorRates{MirroredPerSec: rate(a.Mirrored, b.Mirrored), DroppedPerSec: rate(a.dropped(), b.dropped())}
	}
	p.Splits = splits(prev, cur, rate)
	return p
}

// splits are the per-target request rates of the routes with more than
// one origin.
func splits(prev, cur sample, rate func(a, b float64) float64) map[string]map[string]float64 {
	by := map[string]map[string]float64{}
	for k, v := range cur.routed {
		if by[k[0]] == nil {
			by[k[0]] = map[string]float64{}
		}
		by[k[0]][k[1]] = rate(prev.routed[k], v)
	}
	for r, targets := range by {
		if len(targets) < 2 {
			delete(by, r)
		}
	}
	if len(by) == 0 {
		return nil
	}
	return by
}

// plus sums two origins' figures; the sum is in panic if either is.
func (f Figures) plus(g Figures) Figures {
	return Figures{
		Open: f.Open + g.Open, CreatedPerSec: f.CreatedPerSec + g.CreatedPerSec, ClosedPerSec: f.ClosedPerSec + g.ClosedPerSec,
		RequestsPerSec: f.RequestsPerSec + g.RequestsPerSec, ShedPerSec: f.ShedPerSec + g.ShedPerSec,
		ZoneLocalPerSec: f.ZoneLocalPerSec + g.ZoneLocalPerSec, ZoneRemotePerSec: f.ZoneRemotePerSec + g.ZoneRemotePerSec,
		Ejected: f.Ejected + g.Ejected, Panic: f.Panic || g.Panic,
	}
}
