package lab

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corput/corput/internal/report"
)

// The report's plot files, relative to the output directory.
const (
	plotStepsOpen       = "steps_open.png"
	plotStepsChurn      = "steps_churn.png"
	plotHerd            = "herd_churn.png"
	plotSubsetsCoverage = "subsets_coverage.png"
	plotSubsetsChurn    = "subsets_churn.png"
	plotLBP99           = "lb_p99.png"
	plotLBShares        = "lb_shares.png"
	plotLBCold          = "lb_cold_concurrency.png"
	plotResilience      = "resilience_random.png"
	plotResilienceSame  = "resilience_same_subset.png"
)

func stepPlot(name string) string { return "step_" + name + ".png" }

// WriteReport writes results.json, every plot, report.md and report.html
// into dir.
func WriteReport(dir string, r *Results) error {
	if err := r.WriteJSON(filepath.Join(dir, "results.json")); err != nil {
		return err
	}
	if err := r.writePlots(dir); err != nil {
		return err
	}
	doc := r.doc()
	if err := doc.WriteMarkdown(filepath.Join(dir, "report.md")); err != nil {
		return err
	}
	return doc.WriteHTML(filepath.Join(dir, "report.html"))
}

// Print writes every table and one PASS/FAIL line per check to w.
func (r *Results) Print(w io.Writer, out string) {
	for _, s := range r.doc().Sections {
		if s.Title == checksTitle {
			continue // printed as lines below
		}
		for _, t := range s.Tables {
			fmt.Fprintf(w, "%s\n", t.Text())
		}
	}
	for _, c := range r.Checks {
		fmt.Fprintf(w, "%s  %s: %s\n", c.Status(), c.Name, c.Detail)
	}
	if out != "" {
		fmt.Fprintf(w, "\nreport: %s (results.json, report.md, plots)\n", filepath.Join(out, "report.html"))
	}
}

func (r *Results) doc() report.Doc {
	sc := r.Scenario
	d := report.Doc{
		Title: "corput lab",
		Intro: fmt.Sprintf("Simulated on virtual time with the real subset, pool and balance code (seed %d, scale %s). "+
			"Workload: %s, Poisson arrivals. Latencies are percentiles from arrival to answer; no figure is an average alone. "+
			"docs/lab.md explains every table and plot.", sc.Seed, sc.Scale, mixString(sc)),
	}
	add := func(ok bool, section func() report.Section) {
		if ok {
			d.Sections = append(d.Sections, section())
		}
	}
	add(len(r.Steps) > 0, r.stepsSection)
	add(len(r.Herd) > 0, r.herdSection)
	add(r.Subsets != nil, r.subsetsSection)
	add(len(r.LB) > 0, r.lbSection)
	add(len(r.Resilience) > 0, r.resilienceSection)
	add(len(r.Spread) > 0, r.spreadSection)
	add(len(r.FleetRings) > 0, r.fleetSection)
	add(len(r.Payments) > 0, r.paymentsSection)
	add(len(r.Checks) > 0, r.checksSection)
	return d
}

func mixString(sc Scenario) string {
	var parts []string
	for _, c := range sc.Mix.Classes {
		parts = append(parts, fmt.Sprintf("%s %g%% at %v", c.Name, c.Percent, c.Latency))
	}
	return strings.Join(parts, ", ")
}

func f0(x float64) string  { return strconv.FormatFloat(x, 'f', 0, 64) }
func f1(x float64) string  { return strconv.FormatFloat(x, 'f', 1, 64) }
func f2(x float64) string  { return strconv.FormatFloat(x, 'f', 2, 64) }
func pct(x float64) string { return strconv.FormatFloat(100*x, 'f', 1, 64) + "%" }
func secs(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

func (r *Results) stepsSection() report.Section {
	f, s := r.Scenario.Fleet, r.Scenario.Steps
	t := report.Table{
		Title:  fmt.Sprintf("Steps: %d gateways × %d loops × %d endpoints, %.0f req/s", f.Gateways, f.Loops, f.Endpoints, f.RatePerGateway*float64(f.Gateways)),
		Header: []string{"step", "name", "pools", "proto", "subset", "idle", "open peak", "open steady", "created/s steady", "created/s peak", "created/s deploy peak", "p50 ms", "p99 ms"},
		Note: fmt.Sprintf("steady = %v–%v (median of open, rate of created); rolling deploy of every endpoint from %v (%d at a time every %v), autoscale +%d at %v",
			s.SteadyFrom, s.SteadyTo, s.DeployAt, s.DeployBatch, s.DeployEvery, s.AutoscaleAdd, s.AutoscaleAt),
	}
	plots := []string{plotStepsOpen, plotStepsChurn}
	for _, st := range r.Steps {
		t.Rows = append(t.Rows, []string{st.Step, st.Name, st.Pools, st.Protocol, st.Subset, secs(st.IdleTimeout),
			f0(st.OpenPeak), f0(st.OpenSteady), f2(st.CreatedSteady), f0(st.CreatedPeak), f0(st.CreatedDeployPeak), f1(st.Latency.P50), f1(st.Latency.P99)})
		plots = append(plots, stepPlot(st.Name))
	}
	return report.Section{
		Title: "1. Steps: connections and churn",
		Text: "Each step adds one technique to the previous one (gw-04, docs/spec.md). Open connections are counted from the pools' " +
			"events and match the origins' own count; the churn plot is connections created per second.",
		Tables: []report.Table{t}, Plots: plots,
	}
}

func (r *Results) herdSection() report.Section {
	h := r.Scenario.Herd
	t := report.Table{
		Title:  "Thundering herd: a gateway fleet deploy with empty pools",
		Header: []string{"variant", "ready after", "created/s peak", "created", "requests waiting for a dial", "acquire wait p99 ms", "p99 ms", "max ms"},
		Note:   fmt.Sprintf("jitter %v, ramp %v; only the new fleet's traffic is simulated (the old fleet is warm)", h.Jitter, h.Ramp),
	}
	for _, v := range r.Herd {
		t.Rows = append(t.Rows, []string{v.Name, secs(v.ReadyAfter), f0(v.CreatedPeak), strconv.FormatInt(v.CreatedTotal, 10),
			strconv.FormatInt(v.WaitedForDial, 10), f2(v.AcquireWait.P99), f1(v.Latency.P99), f1(v.Latency.Max)})
	}
	return report.Section{Title: "2. Thundering herd", Tables: []report.Table{t}, Plots: []string{plotHerd},
		Text: "Every pool starts empty; pre-warm takes the handshakes off the request path, jitter and a traffic ramp spread them."}
}

func (r *Results) subsetsSection() report.Section {
	rep := r.Subsets
	t := report.Table{
		Title:  fmt.Sprintf("Subsetting ranking: %d endpoints, %d gateways × %d loops, %d trials", rep.Origins, rep.Gateways, rep.Loops, rep.Trials),
		Header: []string{"rank", "algorithm", "size", "max/mean", "min/mean", "add endpoint churn", "remove endpoint churn", "add gateway churn", "score"},
		Note:   "churn = (frontend, endpoint) pairs changed as a share of all pairs; score = (max/mean − 1) + mean of the two endpoint churns",
	}
	for _, a := range rep.Algorithms {
		t.Rows = append(t.Rows, []string{strconv.Itoa(a.Rank), a.Name, strconv.Itoa(a.SubsetSize), f2(a.Coverage.MaxOverMean), f2(a.Coverage.MinOverMean),
			pct(a.Churn.AddEndpoint.Fraction), pct(a.Churn.RemoveEndpoint.Fraction), pct(a.Churn.AddGateway.Fraction), strconv.FormatFloat(a.Score, 'f', 4, 64)})
	}
	return report.Section{Title: "3. Subsetting ranking", Tables: []report.Table{t}, Plots: []string{plotSubsetsCoverage, plotSubsetsChurn}}
}

func (r *Results) lbSection() report.Section {
	l := r.Scenario.LB
	all := append(append([]LBResult(nil), r.LB...), r.LBWithoutSlowStart...)
	main := report.Table{
		Title: fmt.Sprintf("Load balancing: %d gateways × %d loops, %d endpoints × %d workers (one %g× degraded, one %g%% 5xx), a cold one joins at %v, %.0f req/s",
			l.Gateways, l.Loops, l.Endpoints, l.Workers, l.Slowdown, 100*l.ErrorRate, l.ColdAt, l.Rate),
		Header: []string{"policy", "slow start", "service times", "p50 ms", "p90 ms", "p99 ms", "max ms", "degraded share", "cold share", "flaky share", "5xx", "timeouts", "shed", "cold max conc. 30 s"},
		Note:   fmt.Sprintf("service times: constant (each class's mean), or log-normal around it (σ %g, mean kept)", l.Variance),
	}
	classes := report.Table{Title: "Latency per class (ms: p50 / p90 / p99 / max)", Header: []string{"policy", "slow start", "service times"}}
	for _, c := range r.Scenario.Mix.Classes {
		classes.Header = append(classes.Header, c.Name)
	}
	for _, x := range all {
		ss := yesNo(x.SlowStart)
		main.Rows = append(main.Rows, []string{x.Policy, ss, x.Model, f1(x.P50), f1(x.P90), f1(x.P99), f1(x.Max), pct(x.DegradedShare), pct(x.ColdShare), pct(x.FlakyShare),
			strconv.FormatInt(x.Errors, 10), strconv.FormatInt(x.Timeouts, 10), strconv.FormatInt(x.Shed, 10), strconv.Itoa(x.ColdMaxConcurrency)})
		row := []string{x.Policy, ss, x.Model}
		for _, c := range r.Scenario.Mix.Classes {
			p := x.Classes[c.Name]
			row = append(row, fmt.Sprintf("%s / %s / %s / %s", f1(p.P50), f1(p.P90), f1(p.P99), f1(p.Max)))
		}
		classes.Rows = append(classes.Rows, row)
	}
	var shareTables []report.Table
	for _, model := range []string{modelConstant, modelVariance} {
		var runs []LBResult
		for _, x := range all {
			if x.Model == model {
				runs = append(runs, x)
			}
		}
		if len(runs) == 0 {
			continue
		}
		shares := report.Table{Title: "Share of requests per endpoint, " + model + " service times", Header: []string{"endpoint", "role"}}
		for _, x := range runs {
			shares.Header = append(shares.Header, runLabel(x))
		}
		for i, s := range runs[0].Shares {
			row := []string{s.Address, s.Role}
			for _, x := range runs {
				row = append(row, pct(x.Shares[i].Share))
			}
			shares.Rows = append(shares.Rows, row)
		}
		shareTables = append(shareTables, shares)
	}
	cold := report.Table{Title: "Cold endpoint: highest concurrency (queued + in service) in its first 30 s", Header: []string{"policy", "slow start", "service times", "max concurrency"}}
	for _, c := range r.ColdStart {
		cold.Rows = append(cold.Rows, []string{c.Policy, yesNo(c.SlowStart), c.Model, strconv.Itoa(c.MaxConcurrency)})
	}
	tables := append(append([]report.Table{main, classes}, shareTables...), cold)
	return report.Section{Title: "4. Load balancing", Tables: tables, Plots: []string{plotLBP99, plotLBShares, plotLBCold},
		Text: "Latency from arrival to answer over every answered request (5xx and timeouts included; gateway 503s are counted as shed)."}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func runLabel(x LBResult) string {
	var tags []string
	if !x.SlowStart {
		tags = append(tags, "no slow start")
	}
	if x.Model != modelConstant {
		tags = append(tags, x.Model)
	}
	if len(tags) == 0 {
		return x.Policy
	}
	return x.Policy + " (" + strings.Join(tags, ", ") + ")"
}

func (r *Results) resilienceSection() report.Section {
	rs := r.Scenario.Resilience
	head := []string{"subset.size", "endpoints per subset", "subsets"}
	for n := 0; n <= rs.MaxFailures; n++ {
		head = append(head, "f="+strconv.Itoa(n))
	}
	random := report.Table{Title: fmt.Sprintf("Worst loop's capacity left when f random endpoints fail (median of %d trials)", rs.Trials), Header: head}
	same := report.Table{Title: "A loop's capacity left when f endpoints of its own subset fail", Header: head}
	for _, x := range r.Resilience {
		a := []string{strconv.Itoa(x.Size), f1(x.SubsetSize), strconv.Itoa(x.Subsets)}
		b := append([]string(nil), a...)
		for n := range x.Failures {
			a = append(a, pct(x.WorstLoopMedian[n]))
			b = append(b, pct(x.SameSubset[n]))
		}
		random.Rows = append(random.Rows, a)
		same.Rows = append(same.Rows, b)
	}
	return report.Section{Title: "5. Subset size as a resilience knob", Tables: []report.Table{random, same}, Plots: []string{plotResilience, plotResilienceSame},
		Text: "Failed endpoints are ejected by the real outlier detector; a loop's capacity is the share of its subset its picker still uses."}
}

func (r *Results) spreadSection() report.Section {
	s := r.Scenario.Spread
	t := report.Table{
		Title:  fmt.Sprintf("Even load: %d identical endpoints behind one gateway of %d loops, %.0f req/s on one %v path", s.Endpoints, s.Loops, s.Rate, s.Latency),
		Header: []string{"policy", "service times", "endpoints reached", "per endpoint min/mean", "per endpoint max/mean", "per loop min/mean", "per loop max/mean"},
	}
	for _, x := range r.Spread {
		model := "constant"
		if x.Noise > 0 {
			model = fmt.Sprintf("log-normal σ %g", x.Noise)
		}
		t.Rows = append(t.Rows, []string{x.Policy, model, fmt.Sprintf("%d of %d", x.Reached, s.Endpoints),
			f2(x.EndpointMin), f2(x.EndpointMax), f2(x.LoopMin), f2(x.LoopMax)})
	}
	return report.Section{Title: "6. Even load over identical endpoints", Tables: []report.Table{t},
		Text: "Where requests go, not how fast they are answered (one path, so no balancer evidence): requests per endpoint and per loop as multiples of an even share. " +
			"Requests are placed on the loops round robin, as the gateway places them. peak_ewma (tie_ratio 1) is the plain Peak EWMA, before the tie rule (docs/balancing.md)."}
}

const checksTitle = "Checks"

func (r *Results) checksSection() report.Section {
	t := report.Table{Title: "Checks (docs/lab.md, must show)", Header: []string{"result", "check", "measured"}}
	for _, c := range r.Checks {
		t.Rows = append(t.Rows, []string{c.Status(), c.Name, c.Detail})
	}
	return report.Section{Title: checksTitle, Tables: []report.Table{t}}
}
