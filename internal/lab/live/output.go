package live

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/corput/corput/internal/report"
)

// Output file names in Options.Out.
const (
	ResultsFile = "live-results.json"
	ReportFile  = "live-report.md"
)

// summarize condenses a step's samples (see Summary).
func summarize(st Step, o Options, samples []Sample, rest Sample, closed map[string]float64, leftOpen int64) Summary {
	pools := st.poolsPerGateway(o.Endpoints) * o.Gateways
	s := Summary{Pools: pools, Floor: pools * st.Prewarm, Closed: closed, LeftOpen: leftOpen,
		MeanGapMS: float64(o.meanGap(pools).Microseconds()) / 1000}
	if len(samples) == 0 {
		return s
	}
	first := samples[0]
	s.OriginStart, s.MetricsStart = first.OriginAccepted, first.MetricsCreated
	s.OriginTotal, s.MetricsTotal = rest.OriginAccepted, rest.MetricsCreated
	half := o.StepDuration.Seconds() / 2
	var steady []Sample
	for _, x := range samples {
		if x.T >= half {
			steady = append(steady, x)
		}
	}
	for _, x := range steady {
		s.OriginOpen += float64(x.OriginOpen) / float64(len(steady))
		s.MetricsOpen += x.MetricsOpen / float64(len(steady))
	}
	if n := len(steady); n > 1 {
		a, b := steady[0], steady[n-1]
		if dt := b.T - a.T; dt > 0 {
			s.OriginSteady = float64(b.OriginAccepted-a.OriginAccepted) / dt
			s.MetricsSteady = (b.MetricsCreated - a.MetricsCreated) / dt
		}
	}
	for i, x := range samples {
		s.OriginOpenMax = max(s.OriginOpenMax, x.OriginOpen)
		s.MetricsOpenMax = max(s.MetricsOpenMax, x.MetricsOpen)
		if i > 0 && x.T-samples[i-1].T >= minPeakInterval {
			ro, rm := rates(samples[i-1], x)
			s.OriginPeak, s.MetricsPeak = max(s.OriginPeak, ro), max(s.MetricsPeak, rm)
		}
	}
	return s
}

// minPeakInterval is the shortest sampling interval a peak rate is read
// from: the two sides are read one after the other, so over a shorter
// interval that skew dominates the rate.
const minPeakInterval = 0.5

// rates are the connections created per second between two samples, at
// the origins and by the gateways' count.
func rates(a, b Sample) (origin, metrics float64) {
	dt := b.T - a.T
	if dt <= 0 {
		return 0, 0
	}
	return float64(b.OriginAccepted-a.OriginAccepted) / dt, (b.MetricsCreated - a.MetricsCreated) / dt
}

// tables are the comparison tables: the steps' two, if they ran, then the
// reload experiment's.
func (res *Results) tables() []report.Table {
	var out []report.Table
	if len(res.Steps) > 0 {
		out = append(out, res.stepTables()...)
	}
	if res.Reload != nil {
		out = append(out, res.Reload.table())
	}
	return out
}

// stepTables are the steps' comparison tables.
func (res *Results) stepTables() []report.Table {
	conns := report.Table{
		Title: "Upstream connections: origins (ground truth) / gateway /metrics",
		Header: []string{"step", "pools", "floor", "open (steady)", "created at start",
			"created/s steady", "created/s peak", "left open"},
		Note: "pools: (endpoint, loop) pools in the fleet; floor: pools × prewarm. open: mean over the load's second half; " +
			"created at start: while the gateways pre-warmed; created/s steady: over the load's second half; peak: the highest one-second rate; " +
			"left open: at the origins after the gateways stopped (0 = no leak).",
	}
	lat := report.Table{
		Title:  "What the clients saw (70/30 mix, open-loop Poisson)",
		Header: []string{"step", "requests", "2xx", "not 2xx", "p50 ms", "p90 ms", "p99 ms", "max ms", "gateway closes by reason"},
		Note: "p50/p90/p99: the request-weighted mean of the G×K client streams' percentiles (each stream is one downstream " +
			"connection to one loop); max is exact.",
	}
	for _, sr := range res.Steps {
		st, s, l := sr.Step, sr.Summary, sr.Load
		conns.Rows = append(conns.Rows, []string{
			st.ID + ": " + st.Title, fmt.Sprint(s.Pools), fmt.Sprint(s.Floor),
			fmt.Sprintf("%.0f / %.0f", s.OriginOpen, s.MetricsOpen),
			fmt.Sprintf("%d / %.0f", s.OriginStart, s.MetricsStart),
			fmt.Sprintf("%.1f / %.1f", s.OriginSteady, s.MetricsSteady),
			fmt.Sprintf("%.0f / %.0f", s.OriginPeak, s.MetricsPeak),
			fmt.Sprint(s.LeftOpen),
		})
		lat.Rows = append(lat.Rows, []string{
			st.ID, fmt.Sprint(l.Requests), fmt.Sprint(l.ok()), fmt.Sprint(l.Requests - l.ok()),
			fmt.Sprintf("%.1f", l.Latency.P50), fmt.Sprintf("%.1f", l.Latency.P90),
			fmt.Sprintf("%.1f", l.Latency.P99), fmt.Sprintf("%.1f", l.Latency.Max),
			closes(s.Closed),
		})
	}
	return []report.Table{conns, lat}
}

// closes formats non-zero close counts, e.g. "idle 1204, lifetime 3".
func closes(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// write prints the tables and writes the results, the plots and the
// report into dir.
func (res *Results) write(dir string, stdout io.Writer) error {
	tables := res.tables()
	for _, t := range tables {
		fmt.Fprintln(stdout)
		fmt.Fprint(stdout, t.Text())
	}
	if len(res.Checks) > 0 {
		fmt.Fprintln(stdout)
	}
	for _, c := range res.Checks {
		fmt.Fprintf(stdout, "%s  %s: %s\n", c.Status(), c.Name, c.Detail)
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ResultsFile), data, 0o644); err != nil {
		return err
	}
	doc, err := res.document(dir, tables)
	if err != nil {
		return err
	}
	if err := doc.WriteMarkdown(filepath.Join(dir, ReportFile)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s, %s and plots to %s\n", ResultsFile, ReportFile, dir)
	return nil
}

// document draws the plots and assembles the report: the steps'
// comparison and sections, if they ran, then the reload experiment's.
func (res *Results) document(dir string, tables []report.Table) (report.Doc, error) {
	doc := report.Doc{
		Title: "corput lab --live",
		Intro: fmt.Sprintf("%d gateways × %d loops × %d endpoints on loopback (%s), %g requests/s of the 70/30 mix for %gs per step, seed %d; "+
			"%.0f s wall time. Every connection is counted twice: at the origins (TCP accepts, ground truth) and by the gateways' "+
			"`corput_upstream_connections_created_total` / `_open`. docs/lab-live.md explains how to read this, docs/lab.md the reload experiment.",
			res.Gateways, res.Loops, res.Endpoints, res.Mode, res.Rate, res.StepSeconds, res.Seed, res.WallSeconds),
	}
	if len(res.Steps) > 0 {
		stepTables := tables
		if res.Reload != nil {
			stepTables = tables[:len(tables)-1] // the reload table is in its own section
		}
		secs, err := res.stepSections(dir, stepTables)
		if err != nil {
			return doc, err
		}
		doc.Sections = secs
	} else {
		doc.Intro = fmt.Sprintf("The reload experiment on loopback (%s), %g requests/s of the 70/30 mix, seed %d, %.0f s wall time. "+
			"Every connection is counted twice: at the origins (TCP accepts, ground truth) and by the gateway's "+
			"`corput_upstream_connections_created_total`. docs/lab.md explains how to read this.", res.Mode, res.Rate, res.Seed, res.WallSeconds)
	}
	if res.Reload != nil {
		sec, err := res.Reload.section(dir, res.Checks)
		if err != nil {
			return doc, err
		}
		doc.Sections = append(doc.Sections, sec)
	}
	return doc, nil
}

// stepSections draws the steps' plots: the comparison first, then one
// section per step.
func (res *Results) stepSections(dir string, tables []report.Table) ([]report.Section, error) {
	overview := report.Section{Title: "Comparison", Tables: tables}
	var secs []report.Section
	var openAll, createdAll []report.Series
	for _, sr := range res.Steps {
		id := sr.Step.ID
		open, created := sr.series()
		openAll = append(openAll, report.Series{Name: "step " + id, X: open[0].X, Y: open[0].Y})
		createdAll = append(createdAll, report.Series{Name: "step " + id, X: created[0].X, Y: created[0].Y})
		sec := report.Section{
			Title: fmt.Sprintf("Step %s: %s", id, sr.Step.Title),
			Text:  sr.narrative(),
			Plots: []string{"live-step" + id + "-open.png", "live-step" + id + "-created.png"},
		}
		if err := report.LinePlot(filepath.Join(dir, sec.Plots[0]), report.LineOptions{
			Title: "step " + id + ": open upstream connections", XLabel: "seconds since the load started", YLabel: "connections",
		}, open[:]...); err != nil {
			return nil, err
		}
		if err := report.LinePlot(filepath.Join(dir, sec.Plots[1]), report.LineOptions{
			Title: "step " + id + ": connections created per second", XLabel: "seconds since the load started", YLabel: "connections/s",
		}, created[:]...); err != nil {
			return nil, err
		}
		secs = append(secs, sec)
	}
	overview.Plots = []string{"live-open.png", "live-created.png"}
	if err := report.LinePlot(filepath.Join(dir, overview.Plots[0]), report.LineOptions{
		Title: "open upstream connections at the origins, by step", XLabel: "seconds since the load started", YLabel: "connections",
	}, openAll...); err != nil {
		return nil, err
	}
	if err := report.LinePlot(filepath.Join(dir, overview.Plots[1]), report.LineOptions{
		Title: "connections created per second at the origins, by step (log scale; 0 drawn at 0.1)", XLabel: "seconds since the load started",
		YLabel: "connections/s", LogY: true,
	}, createdAll...); err != nil {
		return nil, err
	}
	return append([]report.Section{overview}, secs...), nil
}

// series are a step's open connections and creation rate over time, at the
// origins first and from /metrics second; the last point is at rest.
func (sr StepResult) series() (open, created [2]report.Series) {
	open = [2]report.Series{{Name: "origins (ground truth)"}, {Name: "gateway /metrics"}}
	created = open
	all := append(slices.Clip(sr.Samples), sr.Rest)
	for i, x := range all {
		open[0].X, open[0].Y = append(open[0].X, x.T), append(open[0].Y, float64(x.OriginOpen))
		open[1].X, open[1].Y = append(open[1].X, x.T), append(open[1].Y, x.MetricsOpen)
		if i == 0 {
			continue
		}
		ro, rm := rates(all[i-1], x)
		created[0].X, created[0].Y = append(created[0].X, x.T), append(created[0].Y, ro)
		created[1].X, created[1].Y = append(created[1].X, x.T), append(created[1].Y, rm)
	}
	return open, created
}

// narrative is a step's text in the report: what ran and its config.
func (sr StepResult) narrative() string {
	st, s := sr.Step, sr.Summary
	return fmt.Sprintf("Loops %d, protocol %s, subset %s, prewarm %d, idle_timeout %v, max_lifetime %v: %d pools "+
		"(one request every %.0f ms per pool on average). Steady open connections %.0f at the origins, %.0f by /metrics; "+
		"%.1f connections/s created at the origins, %.1f by /metrics.\n\nGateway 0's config:\n\n```yaml\n%s```",
		st.Loops, st.Protocol, st.Subset, st.Prewarm, st.IdleTimeout, st.MaxLifetime, s.Pools, s.MeanGapMS,
		s.OriginOpen, s.MetricsOpen, s.OriginSteady, s.MetricsSteady, elideEndpoints(sr.Config))
}

// elideEndpoints keeps the first endpoint line of a config and counts the
// rest.
func elideEndpoints(cfg string) string {
	var b strings.Builder
	n := 0
	for _, line := range strings.SplitAfter(cfg, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "- {address:") {
			if n++; n > 1 {
				continue
			}
		} else if n > 1 {
			fmt.Fprintf(&b, "      # … and %d more endpoints\n", n-1)
			n = 1
		}
		b.WriteString(line)
	}
	return b.String()
}
