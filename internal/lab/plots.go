package lab

import (
	"errors"
	"path/filepath"

	"github.com/corput/corput/internal/report"
)

// writePlots draws every plot of the experiments that ran into dir.
func (r *Results) writePlots(dir string) error {
	var errs []error
	try := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	at := func(name string) string { return filepath.Join(dir, name) }
	if len(r.Steps) > 0 {
		marks := r.stepMarks()
		var open, churn []report.Series
		for _, st := range r.Steps {
			label := st.Step + " " + st.Name
			xs := seconds(len(st.Series.Open))
			open = append(open, report.Series{Name: label, X: xs, Y: st.Series.Open})
			churn = append(churn, report.Series{Name: label, X: xs, Y: st.Series.Created})
			try(report.LinePlot(at(stepPlot(st.Name)), report.LineOptions{
				Title: "step " + st.Step + ": " + st.Title, XLabel: "virtual time (s)", YLabel: "connections (log)", LogY: true, Marks: marks},
				report.Series{Name: "open", X: xs, Y: st.Series.Open},
				report.Series{Name: "created per second", X: xs, Y: st.Series.Created}))
		}
		try(report.LinePlot(at(plotStepsOpen), report.LineOptions{Title: "open connections per step", XLabel: "virtual time (s)",
			YLabel: "open connections (log)", LogY: true, Marks: marks}, open...))
		try(report.LinePlot(at(plotStepsChurn), report.LineOptions{Title: "connections created per second (churn) per step", XLabel: "virtual time (s)",
			YLabel: "created per second (log)", LogY: true, Marks: marks}, churn...))
	}
	if len(r.Herd) > 0 {
		var ss []report.Series
		for _, v := range r.Herd {
			ss = append(ss, report.Series{Name: v.Name, X: seconds(len(v.Series.Created)), Y: v.Series.Created})
		}
		try(report.LinePlot(at(plotHerd), report.LineOptions{Title: "gateway fleet deploy: connections created per second",
			XLabel: "seconds after the deploy", YLabel: "created per second (log)", LogY: true}, ss...))
	}
	if rep := r.Subsets; rep != nil {
		var names []string
		var cov, churn []float64
		for _, a := range rep.Algorithms {
			names = append(names, a.Name)
			cov = append(cov, a.Coverage.MaxOverMean)
			churn = append(churn, 50*(a.Churn.AddEndpoint.Fraction+a.Churn.RemoveEndpoint.Fraction))
		}
		try(report.BarPlot(at(plotSubsetsCoverage), "coverage: max/mean frontends per endpoint (1 = perfect)", "max / mean", names, cov))
		try(report.BarPlot(at(plotSubsetsChurn), "churn: pairs changed when one endpoint is added or removed (mean, %)", "% of (frontend, endpoint) pairs", names, churn))
	}
	if len(r.LB) > 0 {
		all := append(append([]LBResult(nil), r.LB...), r.LBWithoutSlowStart...)
		var names []string
		var p99 []float64
		var shares, cold []report.Series
		for _, x := range all {
			names = append(names, runLabel(x))
			p99 = append(p99, x.P99)
			var xs, ys []float64
			for i, s := range x.Shares {
				xs, ys = append(xs, float64(i+1)), append(ys, 100*s.Share)
			}
			shares = append(shares, report.Series{Name: runLabel(x), X: xs, Y: ys})
			cx := make([]float64, len(x.ColdConcurrency))
			cy := make([]float64, len(x.ColdConcurrency))
			for i, c := range x.ColdConcurrency {
				cx[i], cy[i] = float64(i+1)*coldStep.Seconds(), float64(c)
			}
			cold = append(cold, report.Series{Name: runLabel(x), X: cx, Y: cy})
		}
		try(report.BarPlot(at(plotLBP99), "p99 latency per policy (degraded + flaky + cold endpoint)", "p99 (ms)", names, p99))
		try(report.LinePlot(at(plotLBShares), report.LineOptions{Title: "share of requests per endpoint (1 = degraded, 2 = flaky, last = cold)",
			XLabel: "endpoint", YLabel: "% of requests"}, shares...))
		try(report.LinePlot(at(plotLBCold), report.LineOptions{Title: "cold endpoint: highest concurrency per 100 ms over its first 30 s",
			XLabel: "seconds since it joined", YLabel: "requests queued + in service (log)", LogY: true}, cold...))
	}
	if len(r.Resilience) > 0 {
		var random, same []report.Series
		for _, x := range r.Resilience {
			xs := make([]float64, len(x.Failures))
			a, b := make([]float64, len(x.Failures)), make([]float64, len(x.Failures))
			for i, n := range x.Failures {
				xs[i], a[i], b[i] = float64(n), 100*x.WorstLoopMedian[i], 100*x.SameSubset[i]
			}
			name := "subset of " + f1(x.SubsetSize)
			random = append(random, report.Series{Name: name, X: xs, Y: a})
			same = append(same, report.Series{Name: name, X: xs, Y: b})
		}
		try(report.LinePlot(at(plotResilience), report.LineOptions{Title: "worst loop's capacity left, f random endpoints failed",
			XLabel: "failed endpoints f", YLabel: "% of its subset in use"}, random...))
		try(report.LinePlot(at(plotResilienceSame), report.LineOptions{Title: "a loop's capacity left, f endpoints of its subset failed",
			XLabel: "failed endpoints f", YLabel: "% of its subset in use"}, same...))
	}
	if len(r.FleetRings) > 0 {
		try(r.writeFleetPlots(dir))
	}
	return errors.Join(errs...)
}

// stepMarks are the timeline's events for the step plots.
func (r *Results) stepMarks() []report.Mark {
	s := r.Scenario.Steps
	return []report.Mark{
		{X: s.DeployAt.Seconds(), Label: "deploy"},
		{X: s.deployEnd(r.Scenario.Fleet.Endpoints).Seconds(), Label: "deploy done"},
		{X: s.AutoscaleAt.Seconds(), Label: "autoscale"},
	}
}
