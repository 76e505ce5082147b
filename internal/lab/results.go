package lab

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/subset"
)

// Results is everything a lab run measured: the contents of results.json.
type Results struct {
	Scenario           Scenario           `json:"scenario"`
	Steps              []StepResult       `json:"steps"`
	Herd               []HerdResult       `json:"herd"`
	Subsets            *subset.Report     `json:"subsets,omitempty"`
	LB                 []LBResult         `json:"lb"`
	LBWithoutSlowStart []LBResult         `json:"lb_without_slow_start"`
	ColdStart          []ColdStartResult  `json:"cold_start"`
	Resilience         []ResilienceResult `json:"resilience"`
	Spread             []SpreadResult     `json:"spread"`
	FleetRings         []FleetRingsResult `json:"fleet_rings"`
	Payments           []PaymentsResult   `json:"payments,omitempty"`
	Checks             []Check            `json:"checks"`
}

// Check is one of the "must show" inequalities, evaluated on the
// run's own figures.
type Check struct {
	Name    string `json:"name"`
	Pass    bool   `json:"pass"`
	Skipped bool   `json:"skipped,omitempty"` // its experiment did not run
	Detail  string `json:"detail"`
}

// Status is PASS, FAIL or SKIP.
func (c Check) Status() string {
	switch {
	case c.Skipped:
		return "SKIP"
	case c.Pass:
		return "PASS"
	}
	return "FAIL"
}

// Passed reports whether no check failed.
func (r *Results) Passed() bool {
	for _, c := range r.Checks {
		if !c.Pass && !c.Skipped {
			return false
		}
	}
	return true
}

// Step returns the step called name, or nil.
func (r *Results) Step(name string) *StepResult {
	for i := range r.Steps {
		if r.Steps[i].Name == name {
			return &r.Steps[i]
		}
	}
	return nil
}

// Policy returns the load-balancing result of policy p (with slow start)
// on constant service times, or nil.
func (r *Results) Policy(p balance.Policy) *LBResult { return r.PolicyOn(p, modelConstant, true) }

// PolicyOn returns the load-balancing result of policy p on the service-time
// model (LBResult.Model), with or without slow start, or nil.
func (r *Results) PolicyOn(p balance.Policy, model string, slowStart bool) *LBResult {
	list := r.LB
	if !slowStart {
		list = r.LBWithoutSlowStart
	}
	for i := range list {
		if list[i].Policy == string(p) && list[i].Model == model {
			return &list[i]
		}
	}
	return nil
}

// coldStart returns the cold-start row of policy p on constant service
// times, or nil.
func (r *Results) coldStart(p balance.Policy, slowStart bool) *ColdStartResult {
	return r.coldStartOn(p, modelConstant, slowStart)
}

func (r *Results) coldStartOn(p balance.Policy, model string, slowStart bool) *ColdStartResult {
	for i := range r.ColdStart {
		if c := &r.ColdStart[i]; c.Policy == string(p) && c.SlowStart == slowStart && c.Model == model {
			return c
		}
	}
	return nil
}

// evaluate computes the checks from the figures.
func (r *Results) evaluate() {
	r.Checks = nil
	add := func(name string, ok bool, skipped bool, format string, args ...any) {
		r.Checks = append(r.Checks, Check{Name: name, Pass: ok && !skipped, Skipped: skipped, Detail: fmt.Sprintf(format, args...)})
	}
	perLoop, sub, zero := r.Step("per_loop_pools"), r.Step("subsetting"), r.Step("conn_per_request")
	if perLoop == nil || sub == nil || sub.OpenSteady == 0 {
		add("open connections: per_loop_pools ÷ subsetting ≥ 8", false, true, "steps not run")
	} else {
		ratio := perLoop.OpenSteady / sub.OpenSteady
		add("open connections: per_loop_pools ÷ subsetting ≥ 8", ratio >= 8, false,
			"steady %.0f ÷ %.0f = %.1f× (peak %.0f ÷ %.0f = %.1f×)", perLoop.OpenSteady, sub.OpenSteady, ratio,
			perLoop.OpenPeak, sub.OpenPeak, perLoop.OpenPeak/max(1, sub.OpenPeak))
	}
	if sub == nil || zero == nil || zero.CreatedSteady == 0 {
		add("steady created/s: subsetting + h2 ≤ 1% of step 0", false, true, "steps not run")
	} else {
		pct := 100 * sub.CreatedSteady / zero.CreatedSteady
		add("steady created/s: subsetting + h2 ≤ 1% of step 0", pct <= 1, false,
			"%.2f/s vs %.1f/s = %.3f%%", sub.CreatedSteady, zero.CreatedSteady, pct)
	}
	ewma, p2c, rr := r.Policy(balance.PeakEWMA), r.Policy(balance.P2C), r.Policy(balance.RoundRobin)
	if ewma == nil || p2c == nil || rr == nil {
		add("p99: peak_ewma < p2c < round_robin", false, true, "lb not run")
	} else {
		add("p99: peak_ewma < p2c < round_robin", ewma.P99 < p2c.P99 && p2c.P99 < rr.P99, false,
			"%.1f ms < %.1f ms < %.1f ms", ewma.P99, p2c.P99, rr.P99)
	}
	lw := func(model string, slowStart bool) (a, b *LBResult) {
		return r.PolicyOn(balance.LeastWork, model, slowStart), r.PolicyOn(balance.PeakEWMA, model, slowStart)
	}
	if a, b := lw(modelConstant, true); a == nil || b == nil {
		add("p99: least_work ≤ peak_ewma in every lb run, on both service-time models", false, true, "lb not run")
	} else {
		ok, detail := true, ""
		for _, model := range []string{modelConstant, modelVariance} {
			for _, ss := range []bool{true, false} {
				a, b := lw(model, ss)
				if a == nil || b == nil {
					ok = false
					continue
				}
				ok = ok && a.P99 <= b.P99
				if detail != "" {
					detail += "; "
				}
				detail += fmt.Sprintf("%s%s: %.1f ms vs %.1f ms", model, map[bool]string{true: "", false: " without slow start"}[ss], a.P99, b.P99)
			}
		}
		add("p99: least_work ≤ peak_ewma in every lb run, on both service-time models", ok, false, "%s", detail)
	}
	if a, b := r.coldStartOn(balance.LeastWork, modelConstant, true), r.coldStartOn(balance.LeastWork, modelVariance, true); a == nil || b == nil {
		add("JIT drill: least_work's cold endpoint ≤ 10 concurrent in its first 30 s, on both service-time models", false, true, "lb not run")
	} else {
		add("JIT drill: least_work's cold endpoint ≤ 10 concurrent in its first 30 s, on both service-time models",
			a.MaxConcurrency <= 10 && b.MaxConcurrency <= 10, false, "constant %d, log-normal %d (the seed's bound: under 20)", a.MaxConcurrency, b.MaxConcurrency)
	}
	tied, plain := r.spread("peak_ewma", 0.1), r.spread("peak_ewma (tie_ratio 1)", 0.1)
	if tied == nil || plain == nil {
		add("even load, noisy service times: peak_ewma within 0.85–1.15× per endpoint, the plain Peak EWMA wider", false, true, "spread not run")
	} else {
		add("even load, noisy service times: peak_ewma within 0.85–1.15× per endpoint, the plain Peak EWMA wider",
			tied.EndpointMin >= 0.85 && tied.EndpointMax <= 1.15 && plain.EndpointMax-plain.EndpointMin > tied.EndpointMax-tied.EndpointMin, false,
			"peak_ewma %.2f–%.2f×, tie_ratio 1 %.2f–%.2f× over %d endpoints", tied.EndpointMin, tied.EndpointMax, plain.EndpointMin, plain.EndpointMax, tied.Reached)
	}
	if c, n := r.spread(string(balance.LeastWork), 0), r.spread(string(balance.LeastWork), 0.1); c == nil || n == nil {
		add("even load: least_work within 0.85–1.15× per endpoint, on both service-time models", false, true, "spread not run")
	} else {
		add("even load: least_work within 0.85–1.15× per endpoint, on both service-time models",
			c.EndpointMin >= 0.85 && c.EndpointMax <= 1.15 && n.EndpointMin >= 0.85 && n.EndpointMax <= 1.15, false,
			"constant %.2f–%.2f×, noisy %.2f–%.2f× over %d endpoints", c.EndpointMin, c.EndpointMax, n.EndpointMin, n.EndpointMax, n.Reached)
	}
	with, without := r.coldStart(balance.PeakEWMA, true), r.coldStart(balance.PeakEWMA, false)
	if with == nil || without == nil {
		add("cold endpoint: max concurrency in first 30 s < 20 with slow start, higher without", false, true, "lb not run")
	} else {
		add("cold endpoint: max concurrency in first 30 s < 20 with slow start, higher without",
			with.MaxConcurrency < 20 && without.MaxConcurrency > with.MaxConcurrency, false,
			"peak_ewma: %d with slow start, %d without", with.MaxConcurrency, without.MaxConcurrency)
	}
	r.fleetChecks(add)
	r.paymentsChecks(add)
}

// WriteJSON writes r to path, indented.
func (r *Results) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("lab: results: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("lab: results: %w", err)
	}
	return nil
}

// spread returns the even-load run of policy (as SpreadResult names it) on
// the service-time model whose σ is noise (any positive σ for noise > 0).
func (r *Results) spread(policy string, noise float64) *SpreadResult {
	for i := range r.Spread {
		if x := &r.Spread[i]; x.Policy == policy && (x.Noise > 0) == (noise > 0) {
			return x
		}
	}
	return nil
}
