package slo

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/clock"
)

// The guard's and the mix monitor's timing (docs/slo.md, docs/decisions.md).
const (
	// Tick is how often the monitor decides.
	Tick = time.Second
	// SlotLength and Slots make the rolling window: the current slot and
	// the Slots−1 before it, 55–60 s.
	SlotLength = 5 * time.Second
	Slots      = 12
	// EnterAfter: a class's p99 over its budget at this many ticks in a
	// row engages the guard.
	EnterAfter = 5
	// LeaveAfter: a guarded class's p99 under LeaveRatio × its budget at
	// this many ticks in a row releases it.
	LeaveAfter = 30
	LeaveRatio = 0.8
	// MinSamples: a window with fewer samples of a class decides nothing
	// for it.
	MinSamples = 100
	// ZoneRatio: the worst zone is down-weighted only when its mean
	// latency is at least this many times the other zones' mean, and it
	// stays down-weighted until it is back under it.
	ZoneRatio = 1.5
)

// Class is one workload class as the monitor sees it.
type Class struct {
	Name string
	// P99 is the class's budget (workload.classes[].slo.p99); 0: no
	// budget, the class is measured but never guarded.
	P99 time.Duration
}

// ScaleOut is workload.scale_out.
type ScaleOut struct {
	// AbovePercent and For: the signal rises once the heavy share has
	// been above AbovePercent in every second of For, and clears once it
	// has been at or below it in every second of For.
	AbovePercent float64
	For          time.Duration
}

// Config is what a Monitor watches.
type Config struct {
	Classes []Class
	// Heavy is the index of the heavy class (the costliest), -1 for none:
	// then there is no scale-out signal.
	Heavy    int
	ScaleOut ScaleOut
}

// Balancer is what the guard steers: an origin's balancer.
type Balancer interface {
	// ZoneLatencies returns the mean latency of each zone's endpoints in
	// service ("" is a zone like any other).
	ZoneLatencies() map[string]time.Duration
	// PenalizeZone down-weights zone's endpoints ("": none).
	PenalizeZone(zone string)
}

// Event is what the monitor posts when the scale-out signal changes.
type Event struct {
	Type         string    `json:"type"` // "scale_out"
	Origin       string    `json:"origin"`
	Signal       bool      `json:"signal"` // true: raised; false: cleared
	HeavyClass   string    `json:"heavy_class"`
	HeavyPercent float64   `json:"heavy_percent"` // in the last second
	AbovePercent float64   `json:"above_percent"`
	For          string    `json:"for"`
	At           time.Time `json:"at"`
}

// Monitor watches one origin's classes. Record and ShedLow are the request
// path's: lock-free and allocation-free. Everything else runs on the
// monitor's ticker or for the admin API.
type Monitor struct {
	origin string
	clk    clock.Clock
	bal    Balancer
	notify func(Event) // nil: no webhook

	set  atomic.Pointer[classSet]
	shed atomic.Bool // some class is guarded: shed priority low

	mu        sync.Mutex // guards following
	timer     clock.Timer
	closed    bool
	ticks     int64
	penalized string
	zones     map[string]time.Duration // the balancer's zone latencies at the last tick
	scale     scaleState
}

// classSet is a configuration with its per-class state; a new
// configuration starts a new set.
type classSet struct {
	cfg     Config
	classes []classState
	mix     []atomic.Uint64 // requests per class in the current second
}

type classState struct {
	win    *Window
	over   int // ticks in a row over budget
	under  int // ticks in a row under LeaveRatio × budget, while guarded
	active bool
	n      uint64
	q      [3]time.Duration // p50, p90, p99 at the last tick
}

type scaleState struct {
	on           bool
	above, below int // seconds in a row above, at or below the threshold
	share        float64
}

var quantiles = []float64{0.5, 0.9, 0.99}

// NewMonitor starts a monitor of cfg for origin on clk; notify hears
// scale-out events (nil: none). Close stops it.
func NewMonitor(origin string, cfg Config, clk clock.Clock, bal Balancer, notify func(Event)) *Monitor {
	m := &Monitor{origin: origin, clk: clk, bal: bal, notify: notify}
	m.set.Store(newClassSet(cfg))
	m.mu.Lock()
	m.timer = clk.AfterFunc(Tick, m.tick)
	m.mu.Unlock()
	return m
}

func newClassSet(cfg Config) *classSet {
	s := &classSet{cfg: cfg, classes: make([]classState, len(cfg.Classes)), mix: make([]atomic.Uint64, len(cfg.Classes))}
	for i := range s.classes {
		s.classes[i].win = NewWindow(Slots)
	}
	return s
}

// Configure replaces the classes watched. State starts again when they
// changed; an equal configuration keeps it.
func (m *Monitor) Configure(cfg Config) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.set.Load(); old.cfg.Heavy == cfg.Heavy && old.cfg.ScaleOut == cfg.ScaleOut && slices.Equal(old.cfg.Classes, cfg.Classes) {
		return
	}
	m.set.Store(newClassSet(cfg))
	m.shed.Store(false)
	m.scale = scaleState{}
}

// Record counts a request of class (−1: of no class) that took d.
func (m *Monitor) Record(class int, d time.Duration) {
	s := m.set.Load()
	if class < 0 || class >= len(s.classes) {
		return
	}
	s.mix[class].Add(1)
	s.classes[class].win.Record(d)
}

// ShedLow reports whether routes of priority low are shed now.
func (m *Monitor) ShedLow() bool { return m.shed.Load() }

// Close stops the ticker.
func (m *Monitor) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.timer != nil {
		m.timer.Stop()
	}
}

func (m *Monitor) tick() {
	var ev *Event
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.ticks++
	s := m.set.Load()
	guarded := m.guardLocked(s)
	m.shed.Store(guarded)
	m.zonesLocked(guarded)
	ev = m.scaleLocked(s)
	if m.ticks%int64(SlotLength/Tick) == 0 {
		for i := range s.classes {
			s.classes[i].win.Rotate()
		}
	}
	m.timer = m.clk.AfterFunc(Tick, m.tick)
	m.mu.Unlock()
	if ev != nil && m.notify != nil {
		m.notify(*ev)
	}
}

// guardLocked updates every class's quantiles and guard state and reports
// whether any class is guarded.
func (m *Monitor) guardLocked(s *classSet) (guarded bool) {
	for i := range s.classes {
		c, budget := &s.classes[i], s.cfg.Classes[i].P99
		c.n = c.win.Quantiles(quantiles, c.q[:])
		if budget > 0 && c.n >= MinSamples {
			p99 := c.q[2]
			if p99 > budget {
				c.over++
			} else {
				c.over = 0
			}
			if c.active && float64(p99) < LeaveRatio*float64(budget) {
				c.under++
			} else {
				c.under = 0
			}
			switch {
			case !c.active && c.over >= EnterAfter:
				c.active, c.under = true, 0
			case c.active && c.under >= LeaveAfter:
				c.active, c.over = false, 0
			}
		}
		guarded = guarded || c.active
	}
	return guarded
}

// zonesLocked down-weights the worst zone while the origin is guarded and
// that zone is clearly the slowest; a down-weighted zone stays so until
// its latency is back within ZoneRatio of the others'.
func (m *Monitor) zonesLocked(guarded bool) {
	if m.bal == nil {
		return
	}
	lat := m.bal.ZoneLatencies()
	m.zones = lat
	if !guarded && m.penalized == "" {
		return
	}
	if m.penalized != "" {
		d, ok := lat[m.penalized]
		if ok && float64(d) >= ZoneRatio*othersMean(lat, m.penalized) {
			return
		}
		m.penalized = ""
		m.bal.PenalizeZone("")
	}
	if !guarded || len(lat) < 2 {
		return
	}
	worst, wd := "", time.Duration(-1)
	for z, d := range lat {
		if d > wd || (d == wd && z < worst) {
			worst, wd = z, d
		}
	}
	if float64(wd) >= ZoneRatio*othersMean(lat, worst) {
		m.penalized = worst
		m.bal.PenalizeZone(worst)
	}
}

// othersMean is the mean latency of the zones other than zone.
func othersMean(lat map[string]time.Duration, zone string) float64 {
	sum, n := 0.0, 0
	for z, d := range lat {
		if z != zone {
			sum += float64(d)
			n++
		}
	}
	if n == 0 {
		return math.Inf(1)
	}
	return sum / float64(n)
}

// scaleLocked takes the last second's mix and returns the event of a change
// of the scale-out signal, if any.
func (m *Monitor) scaleLocked(s *classSet) *Event {
	var total, heavy uint64
	for i := range s.mix {
		c := s.mix[i].Swap(0)
		total += c
		if i == s.cfg.Heavy {
			heavy = c
		}
	}
	so := s.cfg.ScaleOut
	if s.cfg.Heavy < 0 || so.For <= 0 {
		return nil
	}
	st := &m.scale
	st.share = 0
	if total > 0 {
		st.share = 100 * float64(heavy) / float64(total)
	}
	if total > 0 && st.share > so.AbovePercent {
		st.above, st.below = st.above+1, 0
	} else {
		st.above, st.below = 0, st.below+1
	}
	need := int((so.For + Tick - 1) / Tick)
	switch {
	case !st.on && st.above >= need:
		st.on = true
	case st.on && st.below >= need:
		st.on = false
	default:
		return nil
	}
	return &Event{Type: "scale_out", Origin: m.origin, Signal: st.on, HeavyClass: s.cfg.Classes[s.cfg.Heavy].Name,
		HeavyPercent: math.Round(st.share*100) / 100, AbovePercent: so.AbovePercent, For: so.For.String(), At: m.clk.Now()}
}

// View is the monitor's state for the admin API and the dashboard.
type View struct {
	Classes []ClassView `json:"classes"`
	// ShedLow: routes of priority low to the origin are shed (slo_shed).
	ShedLow bool `json:"shed_low"`
	// PenalizedZone is the zone the guard down-weights ("" none).
	PenalizedZone string `json:"penalized_zone"`
	// ZoneLatency is each zone's latency as the guard compares them, in
	// ms (balance.Origin.ZoneLatencies).
	ZoneLatency map[string]float64 `json:"zone_latency_ms"`
	ScaleOut    ScaleView          `json:"scale_out"`
}

// ClassView is one class's rolling quantiles and guard state.
type ClassView struct {
	Name     string  `json:"name"`
	Count    uint64  `json:"count"` // requests in the window
	P50      float64 `json:"p50_ms"`
	P90      float64 `json:"p90_ms"`
	P99      float64 `json:"p99_ms"`
	BudgetMs float64 `json:"p99_budget_ms"` // 0: none
	Guarded  bool    `json:"guard_active"`
}

// ScaleView is the workload-mix monitor's state.
type ScaleView struct {
	HeavyClass   string  `json:"heavy_class"`
	HeavyPercent float64 `json:"heavy_percent"` // in the last second
	Signal       bool    `json:"signal"`
	// Counting is the requests of a class counted so far in the current
	// second.
	Counting uint64 `json:"requests_this_second"`
}

// View returns the state at the last tick.
func (m *Monitor) View() View {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.set.Load()
	v := View{ShedLow: m.shed.Load(), PenalizedZone: m.penalized, Classes: make([]ClassView, len(s.classes)),
		ScaleOut: ScaleView{HeavyPercent: math.Round(m.scale.share*100) / 100, Signal: m.scale.on}}
	if s.cfg.Heavy >= 0 {
		v.ScaleOut.HeavyClass = s.cfg.Classes[s.cfg.Heavy].Name
	}
	for i := range s.mix {
		v.ScaleOut.Counting += s.mix[i].Load()
	}
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }
	v.ZoneLatency = make(map[string]float64, len(m.zones))
	for z, d := range m.zones {
		v.ZoneLatency[z] = ms(d)
	}
	for i, c := range s.classes {
		v.Classes[i] = ClassView{Name: s.cfg.Classes[i].Name, Count: c.n, P50: ms(c.q[0]), P90: ms(c.q[1]), P99: ms(c.q[2]),
			BudgetMs: ms(s.cfg.Classes[i].P99), Guarded: c.active}
	}
	return v
}
