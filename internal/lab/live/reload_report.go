package live

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/corput/corput/internal/report"
)

// Plot files of the reload experiment in Options.Out.
const (
	ReloadCreatedPlot = "live-reload-created.png"
	ReloadOpenPlot    = "live-reload-open.png"
)

// table is the reload experiment's comparison: each window's connections
// created and requests.
func (res *ReloadResult) table() report.Table {
	t := report.Table{
		Title:  "Reloads vs a restart of one gateway: upstream connections created, origins (ground truth) / corput_upstream_connections_created_total",
		Header: []string{"window", "seconds", "what happened", "created", "created/s max", "answered", "failed"},
		Note: "created: between the samples at the window's edges; created/s max: the highest one-second rate in it. " +
			"answered / failed: the clients' tally from the window's start to 1 s after its end (loadgen reports it once a second); " +
			"failed is no answer or not 2xx/3xx.",
	}
	for _, w := range res.Windows {
		t.Rows = append(t.Rows, []string{
			w.Name, fmt.Sprintf("%.1f–%.1f", w.From, w.To), res.happened(w.Name),
			fmt.Sprintf("%d / %.0f", w.OriginCreated, w.MetricsCreated),
			fmt.Sprintf("%.0f / %.0f", w.OriginPeak, w.MetricsPeak),
			fmt.Sprint(w.Answered), fmt.Sprint(w.Failed),
		})
	}
	return t
}

// happened says what the lab did in the window called name.
func (res *ReloadResult) happened(name string) string {
	switch name {
	case WindowBaseline:
		return "the steady load, nothing else"
	case WindowReloads:
		routes, caps, sizes := 0, 0, 0
		for _, e := range res.Events {
			if e.Kind == "reload" {
				switch {
				case strings.HasPrefix(e.Detail, "route"):
					routes++
				case strings.HasPrefix(e.Detail, "fleet.size"):
					sizes++
				default:
					caps++
				}
			}
		}
		return fmt.Sprintf("%d SIGHUPs (%d routes added, %d pool.max_connections and %d fleet.size changes); applied: %.0f (reloads_total ok), rejected %.0f",
			res.Reloads, routes, caps, sizes, res.ReloadsOK, res.ReloadsRejected)
	case WindowRestart:
		at := func(kind string) float64 {
			for _, e := range res.Events {
				if e.Kind == kind {
					return e.T
				}
			}
			return 0
		}
		r := at("restart")
		return fmt.Sprintf("a new corput serve on the same config and socket, ready after %.2f s; the old one SIGTERM'd, exited %.2f s later",
			at("ready")-r, at("exited")-at("sigterm"))
	}
	return ""
}

// marks are the reload instants (numbered) and the restart's.
func (res *ReloadResult) marks() []report.Mark {
	var m []report.Mark
	n := 0
	for _, e := range res.Events {
		switch e.Kind {
		case "reload":
			n++
			m = append(m, report.Mark{X: e.T, Label: fmt.Sprint(n)})
		case "restart":
			m = append(m, report.Mark{X: e.T, Label: "restart"})
		}
	}
	return m
}

// series are the open connections and the creation rate over time, at the
// origins first and from /metrics second.
func (res *ReloadResult) series() (open, created [2]report.Series) {
	open = [2]report.Series{{Name: "origins (ground truth)"}, {Name: "corput /metrics"}}
	created = open
	for i, x := range res.Samples {
		open[0].X, open[0].Y = append(open[0].X, x.T), append(open[0].Y, float64(x.OriginOpen))
		open[1].X, open[1].Y = append(open[1].X, x.T), append(open[1].Y, x.MetricsOpen)
		if i == 0 {
			continue
		}
		ro, rm := rates(res.Samples[i-1].Sample, x.Sample)
		created[0].X, created[0].Y = append(created[0].X, x.T), append(created[0].Y, ro)
		created[1].X, created[1].Y = append(created[1].X, x.T), append(created[1].Y, rm)
	}
	return open, created
}

// section draws the plots and is the report's section on the experiment.
func (res *ReloadResult) section(dir string, checks []Check) (report.Section, error) {
	sec := report.Section{
		Title:  "Reloads vs a restart",
		Tables: []report.Table{res.table()},
		Plots:  []string{ReloadCreatedPlot, ReloadOpenPlot},
	}
	open, created := res.series()
	marks := res.marks()
	if err := report.LinePlot(filepath.Join(dir, ReloadCreatedPlot), report.LineOptions{
		Title:  fmt.Sprintf("connections created per second: %d reloads (numbered) vs a restart", res.Reloads),
		XLabel: "seconds since the load started", YLabel: "connections/s", Marks: marks,
	}, created[:]...); err != nil {
		return sec, err
	}
	if err := report.LinePlot(filepath.Join(dir, ReloadOpenPlot), report.LineOptions{
		Title:  "open upstream connections (both processes' while they overlap in the restart)",
		XLabel: "seconds since the load started", YLabel: "connections", Marks: marks,
	}, open[:]...); err != nil {
		return sec, err
	}
	var b strings.Builder
	st := res.Step
	fmt.Fprintf(&b, "One gateway (%d loops, %s, subset %s of %d, prewarm %d: %d connections pre-warmed) serves a socket the lab handed over, under %g requests/s "+
		"(%d streams, one per loop). After a %.0f s warm-up, a steady baseline window, then %d SIGHUPs %.1f s apart, each after the config "+
		"file was renamed over with a real change (odd: a route added; even: pool.max_connections %d ↔ %d), each waited for in "+
		"`corput_config_reloads_total`. Then a restart: a new `corput serve` on the same file and socket, and once it is ready SIGTERM "+
		"to the old one, which drains. Marks on the plots: the reload instants (numbered) and the restart's.\n\n",
		st.Loops, st.Protocol, st.Subset, st.SubsetSize, st.Prewarm, res.Prewarmed, res.Load.Rate, res.Load.Streams,
		reloadWarmup.Seconds(), res.Reloads, res.EverySeconds, capHigh, capLow)
	for _, c := range checks {
		fmt.Fprintf(&b, "- **%s** %s: %s\n", c.Status(), c.Name, c.Detail)
	}
	b.WriteString("\nEvents:\n\n")
	for _, e := range res.Events {
		fmt.Fprintf(&b, "- %.2f s %s", e.T, e.Kind)
		if e.Detail != "" {
			fmt.Fprintf(&b, ": %s", e.Detail)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nThe file as first written:\n\n```yaml\n%s```", elideEndpoints(res.Config))
	sec.Text = b.String()
	return sec, nil
}
