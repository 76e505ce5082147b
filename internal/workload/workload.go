// Package workload is the request mix that corput's lab, load generator,
// test origins and benchmarks share: the second seed's workload model
// (MC-WM-01). Requests belong to cost classes with a share of traffic and a
// service time; the default mix is 70 % light balance inquiries at 15 ms and
// 30 % heavy card authorizations at 140 ms.
//
// A mix without cost skew (one class, or every class with the same service
// time) is refused as evidence: the seed's ADV-BW-01 forbids justifying a
// balancer with uniform-cost benchmarks.
package workload

import (
	"errors"
	"fmt"
	"time"
)

// CodeNoSkew is the diagnostic for a workload without cost skew.
const CodeNoSkew = "ERR_BENCHMARK_WITHOUT_WORKLOAD_REJECTED"

// ErrNoSkew is returned (wrapped) by Mix.Validate for a uniform mix.
var ErrNoSkew = errors.New(CodeNoSkew)

// Class is one request cost class.
type Class struct {
	Name    string        `json:"name" yaml:"name"`
	Percent float64       `json:"percent" yaml:"percent"` // share of requests, 0–100
	Latency time.Duration `json:"latency" yaml:"latency"` // mean service time on a warm origin
	// Cost is what a request of the class weighs for the balancer
	// (least_work), in units of the lightest class (0 < cost ≤ MaxCost);
	// nil: Latency ÷ the lightest class's Latency (see Mix.Costs).
	Cost *float64 `json:"cost,omitempty" yaml:"cost"`
	// Match says which of the gateway's requests belong to the class (see
	// Classifier); nil: only a route's class: names it.
	Match *Match `json:"match,omitempty" yaml:"match"`
	// SLO is the class's latency budget (docs/slo.md): the gateway's SLO
	// guard acts when the class's p99 stays over SLO.P99; nil: none.
	SLO *Budget `json:"slo,omitempty" yaml:"slo"`
}

// Budget is a class's latency targets, as percentiles (seed 002, MC-BG-01;
// an average alone is no target). P99 is required; the guard acts on it,
// P50 and P90 are shown beside the measured ones.
type Budget struct {
	P50 time.Duration `json:"p50,omitempty" yaml:"p50"`
	P90 time.Duration `json:"p90,omitempty" yaml:"p90"`
	P99 time.Duration `json:"p99" yaml:"p99"`
}

// ScaleOut is the workload-mix monitor's rule (MC-WM-01): raise the
// scale-out signal when the heavy class's share of an origin's requests
// stays above AbovePercent for For; with Webhook set, post each change
// there. Zero values take the defaults.
type ScaleOut struct {
	AbovePercent float64       `json:"above_percent,omitempty" yaml:"above_percent"`
	For          time.Duration `json:"for,omitempty" yaml:"for"`
	Webhook      string        `json:"webhook,omitempty" yaml:"webhook"`
}

// The scale-out rule's defaults.
const (
	DefaultScaleOutPercent = 45
	DefaultScaleOutFor     = 30 * time.Second
)

// Rule returns s (nil: the defaults) with its defaults filled in.
func (s *ScaleOut) Rule() ScaleOut {
	var r ScaleOut
	if s != nil {
		r = *s
	}
	if r.AbovePercent == 0 {
		r.AbovePercent = DefaultScaleOutPercent
	}
	if r.For == 0 {
		r.For = DefaultScaleOutFor
	}
	return r
}

// Match is a classifier rule: a request matches when its method is one of
// Methods (any method when empty), its path starts with PathPrefix and ends
// with PathSuffix (either may be empty, not both with Methods).
type Match struct {
	Methods    []string `json:"methods,omitempty" yaml:"methods"`
	PathPrefix string   `json:"path_prefix,omitempty" yaml:"path_prefix"`
	PathSuffix string   `json:"path_suffix,omitempty" yaml:"path_suffix"`
}

// MaxCost bounds workload.classes[].cost.
const MaxCost = 1000

// Mix is a workload: classes whose percents add up to 100.
type Mix struct {
	Classes []Class `json:"classes" yaml:"classes"`
	// ScaleOut is the scale-out signal's rule; nil: the defaults, no
	// webhook.
	ScaleOut *ScaleOut `json:"scale_out,omitempty" yaml:"scale_out"`
}

// Default is the seed's mix: 70 % light at 15 ms, 30 % heavy at 140 ms.
func Default() Mix {
	return Mix{Classes: []Class{
		{Name: "light", Percent: 70, Latency: 15 * time.Millisecond},
		{Name: "heavy", Percent: 30, Latency: 140 * time.Millisecond},
	}}
}

// Validate checks that the mix is well formed and has cost skew. A uniform
// mix yields an error wrapping ErrNoSkew.
func (m Mix) Validate() error {
	if len(m.Classes) == 0 {
		return fmt.Errorf("%w: workload has no classes; use at least two classes with different latencies, e.g. 70%% light 15ms and 30%% heavy 140ms", ErrNoSkew)
	}
	sum := 0.0
	for i, c := range m.Classes {
		if c.Name == "" {
			return fmt.Errorf("workload.classes[%d].name: empty; name every class", i)
		}
		if c.Percent <= 0 || c.Percent > 100 {
			return fmt.Errorf("workload.classes[%d].percent: %v is outside (0, 100]", i, c.Percent)
		}
		if c.Latency <= 0 {
			return fmt.Errorf("workload.classes[%d].latency: must be positive, e.g. 15ms", i)
		}
		for j := range i {
			if m.Classes[j].Name == c.Name {
				return fmt.Errorf("workload.classes[%d].name: %q is also classes[%d]'s name; name each class once", i, c.Name, j)
			}
		}
		if c.Cost != nil && !(*c.Cost > 0 && *c.Cost <= MaxCost) {
			return fmt.Errorf("workload.classes[%d].cost: %v is outside (0, %d]; leave it out for latency ÷ the lightest class's latency", i, *c.Cost, MaxCost)
		}
		if err := c.Match.validate(); err != nil {
			return fmt.Errorf("workload.classes[%d].match%w", i, err)
		}
		if err := c.SLO.validate(); err != nil {
			return fmt.Errorf("workload.classes[%d].slo%w", i, err)
		}
		sum += c.Percent
	}
	if sum < 99.999 || sum > 100.001 {
		return fmt.Errorf("workload.classes: percents add up to %v, want 100", sum)
	}
	if err := m.ScaleOut.validate(); err != nil {
		return fmt.Errorf("workload.scale_out%w", err)
	}
	skewed := false
	for _, c := range m.Classes[1:] {
		if c.Latency != m.Classes[0].Latency {
			skewed = true
		}
	}
	if !skewed {
		return fmt.Errorf("%w: every workload class costs %v; a uniform-cost benchmark is not evidence (seed ADV-BW-01): add a heavy class, e.g. 30%% at 140ms", ErrNoSkew, m.Classes[0].Latency)
	}
	return nil
}

// Costs returns each class's cost, in units of the lightest class: its Cost
// when set, else its Latency ÷ the lowest Latency of the mix (the seed's
// weighted request cost factor: 140 ms ÷ 15 ms = 9.33 for the default
// mix's heavy class).
func (m Mix) Costs() []float64 {
	lightest := time.Duration(0)
	for _, c := range m.Classes {
		if c.Latency > 0 && (lightest == 0 || c.Latency < lightest) {
			lightest = c.Latency
		}
	}
	out := make([]float64, len(m.Classes))
	for i, c := range m.Classes {
		switch {
		case c.Cost != nil && *c.Cost > 0:
			out[i] = *c.Cost
		case lightest > 0 && c.Latency > 0:
			out[i] = float64(c.Latency) / float64(lightest)
		default:
			out[i] = 1
		}
	}
	return out
}

// Index returns the position of the class called name.
func (m Mix) Index(name string) (int, bool) {
	for i, c := range m.Classes {
		if c.Name == name {
			return i, true
		}
	}
	return 0, false
}

// Pick returns the class for a uniform draw u in [0, 1).
func (m Mix) Pick(u float64) Class {
	x := u * 100
	for _, c := range m.Classes {
		if x < c.Percent {
			return c
		}
		x -= c.Percent
	}
	return m.Classes[len(m.Classes)-1]
}

// Heavy returns the index of the heavy class, the costliest (the first of
// equals), and false for a mix of fewer than two classes.
func (m Mix) Heavy() (int, bool) {
	if len(m.Classes) < 2 {
		return 0, false
	}
	costs, h := m.Costs(), 0
	for i, c := range costs {
		if c > costs[h] {
			h = i
		}
	}
	return h, true
}
