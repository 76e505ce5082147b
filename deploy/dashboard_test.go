package deploy

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/corput/corput/internal/telemetry"
)

// seriesInfo is what a scrape of corput shows under one series name.
type seriesInfo struct {
	family string              // the metric family, e.g. x for the series x_bucket
	typ    dto.MetricType      // of the family
	suffix string              // "_bucket", "_sum" or "_count" of a histogram or summary; "" otherwise
	labels map[string][]string // label name → values seen
}

// counterLike reports whether rate() and increase() make sense on the
// series: counters and the cumulative series of histograms and summaries.
func (s *seriesInfo) counterLike() bool {
	return s.typ == dto.MetricType_COUNTER || s.suffix != ""
}

// exportedSeries gathers the registry telemetry.New builds, after
// InitOrigin, and returns every series name it exports with its labels.
// Nothing here lists metric names: the registry is the list.
func exportedSeries() (map[string]*seriesInfo, error) {
	m := telemetry.New()
	m.InitOrigin("payments", 2, []string{"h1", "h2"})
	// InitOrigin creates per-origin and per-loop series; a per-endpoint
	// series appears once the gateway learns an endpoint.
	m.RequestsActive.WithLabelValues("payments", "10.0.0.7:8443")
	// A guard series per workload class appears with the workload.
	m.SLOGuardActive.WithLabelValues("payments", "light")
	fams, err := m.Registry.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather telemetry's registry: %w", err)
	}
	out := map[string]*seriesInfo{}
	add := func(fam *dto.MetricFamily, suffix string, lbls []*dto.LabelPair, extra ...string) {
		name := fam.GetName() + suffix
		s := out[name]
		if s == nil {
			s = &seriesInfo{family: fam.GetName(), typ: fam.GetType(), suffix: suffix, labels: map[string][]string{}}
			out[name] = s
		}
		for _, l := range lbls {
			if !slices.Contains(s.labels[l.GetName()], l.GetValue()) {
				s.labels[l.GetName()] = append(s.labels[l.GetName()], l.GetValue())
			}
		}
		for _, l := range extra {
			if _, ok := s.labels[l]; !ok {
				s.labels[l] = nil
			}
		}
	}
	for _, fam := range fams {
		for _, mt := range fam.GetMetric() {
			switch fam.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(fam, "_bucket", mt.GetLabel(), "le")
				add(fam, "_sum", mt.GetLabel())
				add(fam, "_count", mt.GetLabel())
			case dto.MetricType_SUMMARY:
				add(fam, "", mt.GetLabel(), "quantile")
				add(fam, "_sum", mt.GetLabel())
				add(fam, "_count", mt.GetLabel())
			default:
				add(fam, "", mt.GetLabel())
			}
		}
	}
	return out, nil
}

// hasLabel reports whether a series carries label l, by itself or as a
// target label the scrape adds.
func (s *seriesInfo) hasLabel(l string) bool {
	_, ok := s.labels[l]
	return ok || slices.Contains(operatorTargetLabels, l)
}

// checkPromQL parses an expression and checks it against the exported
// series: metric names, labels in selectors and groupings, literal label
// values, rate() on counters, histogram_quantile on buckets grouped by le.
func checkPromQL(q string, series map[string]*seriesInfo) []string {
	e, err := parsePromQL(q)
	if err != nil {
		return []string{fmt.Sprintf("parse: %v", err)}
	}
	var out []string
	e.walk(func(n *expr) {
		switch n.kind {
		case selectorExpr:
			out = append(out, checkSelector(n, series)...)
		case callExpr:
			out = append(out, checkCall(n, series)...)
		case aggExpr, binaryExpr:
			out = append(out, checkGrouping(n, series)...)
		}
	})
	return out
}

func checkSelector(n *expr, series map[string]*seriesInfo) []string {
	s, ok := series[n.name]
	if !ok {
		return []string{fmt.Sprintf("%s is not a metric telemetry.New exports", n.name)}
	}
	var out []string
	for _, m := range n.matchers {
		if !s.hasLabel(m.label) {
			out = append(out, fmt.Sprintf("%s has no label %q (it has %s)", n.name, m.label, strings.Join(slices.Sorted(maps.Keys(s.labels)), ", ")))
			continue
		}
		values, own := s.labels[m.label]
		if !own || strings.Contains(m.value, "$") || (m.op != "=" && m.op != "=~") {
			continue // a scrape label, a dashboard variable, or a negative matcher
		}
		pattern := "^(?:" + m.value + ")$"
		if m.op == "=" {
			pattern = "^" + regexp.QuoteMeta(m.value) + "$"
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			out = append(out, fmt.Sprintf("%s{%s=~%q}: %v", n.name, m.label, m.value, err))
			continue
		}
		if !slices.ContainsFunc(values, re.MatchString) {
			out = append(out, fmt.Sprintf("%s{%s%s%q}: no series has such a value (seen: %s)", n.name, m.label, m.op, m.value, strings.Join(values, ", ")))
		}
	}
	return out
}

func checkCall(n *expr, series map[string]*seriesInfo) []string {
	switch n.name {
	case "rate", "irate", "increase":
		a := n.args[0]
		if a.kind != selectorExpr || a.rng == "" {
			return []string{n.name + "() needs a range selector, name{...}[range]"}
		}
		if s, ok := series[a.name]; ok && !s.counterLike() {
			return []string{fmt.Sprintf("%s() of %s, a %s: it needs a counter", n.name, a.name, s.typ)}
		}
	case "delta", "idelta", "deriv":
		a := n.args[0]
		if s, ok := series[a.name]; ok && a.kind == selectorExpr && s.counterLike() {
			return []string{fmt.Sprintf("%s() of %s, a counter: use rate() or increase()", n.name, a.name)}
		}
	case "histogram_quantile":
		var out []string
		if q, err := strconv.ParseFloat(n.args[0].name, 64); n.args[0].kind != numberExpr || err != nil || q < 0 || q > 1 {
			out = append(out, "histogram_quantile's first argument must be a number in [0, 1]")
		}
		for _, sel := range n.args[1].selectors() {
			if s, ok := series[sel.name]; ok && s.suffix != "_bucket" {
				out = append(out, fmt.Sprintf("histogram_quantile over %s, not a _bucket series", sel.name))
			}
		}
		var top *expr // the outermost aggregation decides whether le survives
		n.args[1].walk(func(x *expr) {
			if top == nil && x.kind == aggExpr {
				top = x
			}
		})
		if top != nil && slices.Contains(top.grouping, "le") == top.without {
			out = append(out, fmt.Sprintf("histogram_quantile: %s drops the le label; group by (le, ...)", top.name))
		}
		return out
	}
	return nil
}

// checkGrouping: every label of a by/without/on/ignoring clause exists on
// every series the clause applies to.
func checkGrouping(n *expr, series map[string]*seriesInfo) []string {
	var out []string
	for _, l := range n.grouping {
		for _, a := range n.args {
			for _, sel := range a.selectors() {
				if s, ok := series[sel.name]; ok && !s.hasLabel(l) {
					out = append(out, fmt.Sprintf("%s (%s): %s has no label %q", n.name, strings.Join(n.grouping, ", "), sel.name, l))
				}
			}
		}
	}
	return out
}

// grafanaDashboard mirrors the fields of a Grafana dashboard model that
// corput.json uses, so that a strict decode catches a misspelt key.
type grafanaDashboard struct {
	UID           string   `json:"uid"`
	Title         string   `json:"title"`
	Description   string   `json:"description"`
	Tags          []string `json:"tags"`
	Timezone      string   `json:"timezone"`
	Editable      bool     `json:"editable"`
	GraphTooltip  int      `json:"graphTooltip"`
	Refresh       string   `json:"refresh"`
	SchemaVersion int      `json:"schemaVersion"`
	Version       int      `json:"version"`
	Time          struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"time"`
	Templating struct {
		List []grafanaVariable `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaVariable struct {
	Name       string             `json:"name"`
	Label      string             `json:"label"`
	Type       string             `json:"type"`
	Query      string             `json:"query"`
	Definition string             `json:"definition"`
	Datasource *grafanaDatasource `json:"datasource"`
	Refresh    int                `json:"refresh"`
	Sort       int                `json:"sort"`
	IncludeAll bool               `json:"includeAll"`
	Multi      bool               `json:"multi"`
	AllValue   string             `json:"allValue"`
}

type grafanaPanel struct {
	ID          int                `json:"id"`
	Type        string             `json:"type"`
	Title       string             `json:"title"`
	Description string             `json:"description"`
	Collapsed   bool               `json:"collapsed"`
	Panels      []grafanaPanel     `json:"panels"` // a collapsed row's panels
	GridPos     grafanaGridPos     `json:"gridPos"`
	Datasource  *grafanaDatasource `json:"datasource"`
	Targets     []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	FieldConfig *struct {
		Defaults struct {
			Unit       string            `json:"unit"`
			Min        *float64          `json:"min"`
			Max        *float64          `json:"max"`
			Thresholds *grafanaThreshold `json:"thresholds"`
			Mappings   []struct {
				Type    string `json:"type"`
				Options map[string]struct {
					Text  string `json:"text"`
					Color string `json:"color"`
					Index int    `json:"index"`
				} `json:"options"`
			} `json:"mappings"`
			Custom *struct {
				FillOpacity       int    `json:"fillOpacity"`
				LineWidth         int    `json:"lineWidth"`
				LineInterpolation string `json:"lineInterpolation"`
				ThresholdsStyle   *struct {
					Mode string `json:"mode"`
				} `json:"thresholdsStyle"`
			} `json:"custom"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Options *struct {
		Legend *struct {
			DisplayMode string   `json:"displayMode"`
			Placement   string   `json:"placement"`
			ShowLegend  bool     `json:"showLegend"`
			Calcs       []string `json:"calcs"`
		} `json:"legend"`
		Tooltip *struct {
			Mode string `json:"mode"`
			Sort string `json:"sort"`
		} `json:"tooltip"`
		ReduceOptions *struct {
			Calcs  []string `json:"calcs"`
			Fields string   `json:"fields"`
			Values bool     `json:"values"`
		} `json:"reduceOptions"`
		ColorMode   string `json:"colorMode"`
		GraphMode   string `json:"graphMode"`
		TextMode    string `json:"textMode"`
		JustifyMode string `json:"justifyMode"`
		Orientation string `json:"orientation"`
	} `json:"options"`
}

type grafanaGridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

type grafanaThreshold struct {
	Mode  string `json:"mode"`
	Steps []struct {
		Color string   `json:"color"`
		Value *float64 `json:"value"`
	} `json:"steps"`
}

// grafanaBuiltins are the variables Grafana defines itself.
var grafanaBuiltins = []string{"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s"}

// variableRef finds $name, ${name} and ${name:format} in a string.
var variableRef = regexp.MustCompile(`\$\{?(\w+)(?::\w+)?\}?`)

// labelValuesQuery is a Prometheus query variable: label_values(selector, label).
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// allPanels returns the dashboard's panels, collapsed rows' panels included.
func (d *grafanaDashboard) allPanels() []grafanaPanel {
	var out []grafanaPanel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// problems checks the dashboard's layout, variables and every PromQL
// expression against the exported series, and that every corput_* metric
// has a panel.
func (d *grafanaDashboard) problems(series map[string]*seriesInfo) []string {
	var out []string
	if d.UID == "" || d.Title == "" {
		out = append(out, "the dashboard needs a uid and a title")
	}
	if d.SchemaVersion < 36 {
		out = append(out, fmt.Sprintf("schemaVersion %d: datasources as {type, uid} need 36 or later", d.SchemaVersion))
	}
	defined := slices.Clone(grafanaBuiltins)
	for _, v := range d.Templating.List {
		defined = append(defined, v.Name)
	}
	usesVariables := func(where, s string) {
		for _, m := range variableRef.FindAllStringSubmatch(s, -1) {
			if !slices.Contains(defined, m[1]) {
				out = append(out, fmt.Sprintf("%s: variable $%s is not defined", where, m[1]))
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		where := "variable " + v.Name
		m := labelValuesQuery.FindStringSubmatch(v.Query)
		if m == nil {
			out = append(out, fmt.Sprintf("%s: query %q is not label_values(selector, label)", where, v.Query))
			continue
		}
		usesVariables(where, v.Query)
		for _, p := range checkPromQL(fmt.Sprintf("sum by (%s) (%s)", m[2], m[1]), series) {
			out = append(out, where+": "+p)
		}
	}

	used := map[string]bool{}
	ids := map[int]bool{}
	var boxes []grafanaPanel
	for _, p := range d.allPanels() {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID <= 0 || ids[p.ID] {
			out = append(out, where+": id must be positive and unique")
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			out = append(out, fmt.Sprintf("%s: gridPos %+v is off the 24-column grid", where, g))
		}
		for _, b := range boxes {
			if g.X < b.GridPos.X+b.GridPos.W && b.GridPos.X < g.X+g.W && g.Y < b.GridPos.Y+b.GridPos.H && b.GridPos.Y < g.Y+g.H {
				out = append(out, fmt.Sprintf("%s overlaps panel %d %q", where, b.ID, b.Title))
			}
		}
		boxes = append(boxes, p)
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			out = append(out, where+": datasource must be the ${datasource} variable")
		}
		if p.FieldConfig == nil || p.FieldConfig.Defaults.Unit == "" {
			out = append(out, where+": no unit")
		}
		if len(p.Targets) == 0 {
			out = append(out, where+": no queries")
		}
		refs := map[string]bool{}
		for _, t := range p.Targets {
			tw := fmt.Sprintf("%s query %s", where, t.RefID)
			if t.RefID == "" || refs[t.RefID] {
				out = append(out, tw+": refId must be set and unique in the panel")
			}
			refs[t.RefID] = true
			usesVariables(tw, t.Expr)
			for _, pr := range checkPromQL(t.Expr, series) {
				out = append(out, tw+": "+pr)
			}
			if e, err := parsePromQL(t.Expr); err == nil {
				for _, sel := range e.selectors() {
					if s, ok := series[sel.name]; ok {
						used[s.family] = true
					}
				}
			}
		}
	}
	for name, s := range series {
		if strings.HasPrefix(s.family, "corput_") && !used[s.family] {
			out = append(out, fmt.Sprintf("%s (exported by telemetry) has no panel", name))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
