package telemetry

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/corput/corput/internal/mdtable"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// contractDoc is the contract page, relative to this package's directory.
var contractDoc = filepath.Join("..", "..", "docs", "contract.md")

// TestEveryMetricIsInTheContract: every corput_ metric the registry
// exports has its row in docs/contract.md, with its type and every label,
// so that a metric added to New without documenting it fails here.
func TestEveryMetricIsInTheContract(t *testing.T) {
	doc, err := os.ReadFile(contractDoc)
	if err != nil {
		t.Fatalf("the contract page: %v", err)
	}
	families := exportedFamilies(t)
	if len(families) == 0 {
		t.Fatal("the registry exports no corput_ metric: the test would check nothing")
	}
	for _, p := range contractProblems(string(doc), families) {
		t.Errorf("%s: %s", contractDoc, p)
	}

	t.Run("a missing metric is found", func(t *testing.T) {
		gone := families[0].GetName()
		cut := mdtable.Without(string(doc), "`"+gone+"`")
		if cut == string(doc) {
			t.Fatalf("removing %s changed nothing: the check has no row to lose", gone)
		}
		before := contractProblems(string(doc), families)
		var added []string
		for _, p := range contractProblems(cut, families) {
			if !slices.Contains(before, p) {
				added = append(added, p)
			}
		}
		if len(added) != 1 || !strings.Contains(added[0], gone) {
			t.Fatalf("with the row of %s removed, the new problems are %q; want exactly one naming it", gone, added)
		}
	})
	t.Run("a missing label or type is found", func(t *testing.T) {
		f := &dto.MetricFamily{
			Name: new("corput_probe_total"),
			Type: dto.MetricType_COUNTER.Enum(),
			Metric: []*dto.Metric{{Label: []*dto.LabelPair{
				{Name: new("origin"), Value: new("o")},
				{Name: new("shard"), Value: new("0")},
			}}},
		}
		doc := "| metric | type | labels | meaning |\n| --- | --- | --- | --- |\n" +
			"| `corput_probe_total` | gauge | origin | a probe |\n"
		probs := contractProblems(doc, []*dto.MetricFamily{f})
		if len(probs) != 2 || !strings.Contains(probs[0], "counter") || !strings.Contains(probs[1], `"shard"`) {
			t.Fatalf("problems = %q; want the type counter and the label shard reported", probs)
		}
		if probs := contractProblems(doc, nil); len(probs) != 0 {
			t.Fatalf("no families, problems = %q", probs)
		}
	})
	t.Run("a name outside a table row does not count", func(t *testing.T) {
		f := &dto.MetricFamily{Name: new("corput_probe_total"), Type: dto.MetricType_COUNTER.Enum()}
		probs := contractProblems("Planned: `corput_probe_total`.\n", []*dto.MetricFamily{f})
		if len(probs) != 1 || !strings.Contains(probs[0], "corput_probe_total") {
			t.Fatalf("problems = %q; want the metric reported as missing", probs)
		}
	})
}

// exportedFamilies gathers a fresh registry after giving every vector at
// least one child (a vector exports nothing until it has one), and returns
// its corput_ families sorted by name. It fails the test when a collector of
// Metrics still exports nothing, so that a metric added later cannot slip
// past the check for want of a child.
func exportedFamilies(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	m := New()
	m.InitOrigin("o", 1, []string{"h1", "h2"})
	m.RequestsActive.WithLabelValues("o", "127.0.0.1:9001")
	m.StaleRetries.WithLabelValues("o")
	m.IdleTimeouts.WithLabelValues("o")
	m.Retries.WithLabelValues("o", RetryReplay)
	m.RequestsRefused.WithLabelValues("r", "rate_limited")
	m.RouteRequests.WithLabelValues("r", "o")
	m.RouteMirrored.WithLabelValues("r", "o")
	m.RouteMirrorDropped.WithLabelValues("r", "o", "max_in_flight")
	m.InitHealth("o")
	m.SLOGuardActive.WithLabelValues("o", "light")

	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		c, ok := v.Field(i).Interface().(prometheus.Collector)
		if !ok {
			continue
		}
		if n := countSeries(c); n == 0 {
			t.Errorf("Metrics.%s exports no series in this test: give it a child in exportedFamilies so that its name is checked against %s",
				v.Type().Field(i).Name, contractDoc)
		}
	}

	all, err := m.Registry.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var out []*dto.MetricFamily
	for _, f := range all {
		if strings.HasPrefix(f.GetName(), "corput_") {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

// countSeries is the number of series c collects now.
func countSeries(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	n := 0
	for range ch {
		n++
	}
	return n
}

// contractProblems lists what doc lacks for families: a table row whose
// first cell is the metric's name in backquotes, with the metric's type in
// the second cell and every label name in the third.
func contractProblems(doc string, families []*dto.MetricFamily) []string {
	var probs []string
	for _, f := range families {
		name := f.GetName()
		cells, ok := mdtable.Find(doc, 0, "`"+name+"`")
		if !ok {
			probs = append(probs, "no table row names the metric "+name+" (exported by telemetry.New): add a row | `"+name+"` | type | labels | meaning | to the metrics table")
			continue
		}
		if typ := strings.ToLower(f.GetType().String()); len(cells) < 2 || cells[1] != typ {
			probs = append(probs, "the row of "+name+" does not give its type "+typ+" in the second column")
		}
		for _, l := range labelNames(f) {
			if len(cells) < 3 || !containsWord(cells[2], l) {
				probs = append(probs, "the row of "+name+" does not name its label \""+l+"\" in the third column")
			}
		}
	}
	return probs
}

// labelNames are the label names of f's first series, sorted.
func labelNames(f *dto.MetricFamily) []string {
	if len(f.GetMetric()) == 0 {
		return nil
	}
	var out []string
	for _, l := range f.GetMetric()[0].GetLabel() {
		out = append(out, l.GetName())
	}
	slices.Sort(out)
	return out
}

// containsWord reports whether s contains w with no letter, digit or '_'
// on either side.
func containsWord(s, w string) bool {
	isWord := func(b byte) bool {
		return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
	}
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(w)
		if (j == 0 || !isWord(s[j-1])) && (end == len(s) || !isWord(s[end])) {
			return true
		}
		i = j + 1
	}
}
