package telemetry

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// contract is docs/contract.md: every metric name with its type and labels.
var contract = map[string]struct {
	typ    string
	labels []string
}{
	"corput_upstream_connections_created_total": {"COUNTER", []string{"origin", "loop", "protocol"}},
	"corput_upstream_connections_closed_total":  {"COUNTER", []string{"origin", "reason"}},
	"corput_upstream_connections_open":          {"GAUGE", []string{"origin", "loop", "protocol"}},
	"corput_pool_utilization":                   {"GAUGE", []string{"origin", "loop"}},
	"corput_pool_acquire_wait_seconds":          {"HISTOGRAM", []string{"origin"}},
	"corput_upstream_requests_active":           {"GAUGE", []string{"origin", "endpoint"}},
	"corput_upstream_request_duration_seconds":  {"HISTOGRAM", []string{"origin", "code_class"}},
	"corput_outlier_ejections_total":            {"COUNTER", []string{"origin", "reason"}},
	"corput_outlier_ejected":                    {"GAUGE", []string{"origin"}},
	"corput_panic_mode":                         {"GAUGE", []string{"origin"}},
	"corput_zone_requests_total":                {"COUNTER", []string{"origin", "locality"}},
	"corput_requests_shed_total":                {"COUNTER", []string{"origin", "reason"}},
	"corput_subset_size":                        {"GAUGE", []string{"origin", "loop"}},
	"corput_membership_changes_total":           {"COUNTER", []string{"origin"}},
	"corput_downstream_requests_total":          {"COUNTER", []string{"code_class"}},
}

type fakeSource struct{ ready, dead atomic.Bool }

func (s *fakeSource) Origins() any { return map[string]int{"payments": 2} }
func (s *fakeSource) Subsets(o string) (any, bool) {
	if o != "payments" {
		return nil, false
	}
	return []float64{0, 0.5}, true
}
func (s *fakeSource) Ready() bool     { return s.ready.Load() }
func (s *fakeSource) Live() bool      { return !s.dead.Load() }
func (s *fakeSource) ConfigView() any { return map[string]string{"hash": "sha256:00"} }
func (s *fakeSource) ReloadConfig() (int, any) {
	return http.StatusBadRequest, map[string][]string{"errors": {"corput.yaml:3: origins[0].nmae: unknown key"}}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, body := adminGet(t, "GET", url, "", "")
	return resp.StatusCode, body
}

func TestScrapeHasEveryContractMetric(t *testing.T) {
	m := New()
	m.InitOrigin("payments", 2, []string{"h1", "h2"})
	refreshed := 0
	m.OnScrape(func() {
		refreshed++
		m.RequestsActive.WithLabelValues("payments", "127.0.0.1:9001").Set(3)
	})
	srv := httptest.NewServer(AdminHandler(m, &fakeSource{}, nil))
	defer srv.Close()

	code, body := get(t, srv.URL+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	if refreshed != 1 {
		t.Fatalf("scrape ran %d refreshes, want 1", refreshed)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	for name, want := range contract {
		f, ok := families[name]
		if !ok {
			t.Errorf("scrape lacks %s", name)
			continue
		}
		if got := f.GetType().String(); got != want.typ {
			t.Errorf("%s type %s, want %s", name, got, want.typ)
		}
		if len(f.Metric) == 0 {
			t.Errorf("%s has no series", name)
			continue
		}
		var got []string
		for _, l := range f.Metric[0].Label {
			got = append(got, l.GetName())
		}
		wantSorted := append([]string(nil), want.labels...)
		sort.Strings(wantSorted)
		sort.Strings(got) // the exposition sorts label names
		if strings.Join(got, ",") != strings.Join(wantSorted, ",") {
			t.Errorf("%s labels %v, want %v", name, got, want.labels)
		}
	}
	// The seed's latency buckets, in ms: 2,5,10,15,20,30,50,100,250,500 (+Inf).
	h := families["corput_upstream_request_duration_seconds"].Metric[0].GetHistogram()
	if n := len(h.Bucket); n != 10 && n != 11 {
		t.Fatalf("duration histogram has %d buckets, want 10 (+Inf)", n)
	}
	if ub := h.Bucket[3].GetUpperBound(); ub != 0.015 {
		t.Fatalf("fourth bucket %v, want 0.015", ub)
	}
}

// A server that has no liveness of its own (a nil live, as the control
// plane's admin) answers /healthz ok whatever its readiness.
func TestProbesWithoutLiveness(t *testing.T) {
	var ready atomic.Bool
	mux := http.NewServeMux()
	HandleProbes(mux, nil, ready.Load)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, want := range []struct {
		ready           bool
		healthz, readyz int
		readyBody       string
	}{{false, 200, 503, "not ready\n"}, {true, 200, 200, "ready\n"}} {
		ready.Store(want.ready)
		if code, body := get(t, srv.URL+"/healthz"); code != want.healthz || body != "ok\n" {
			t.Errorf("ready %v: /healthz = %d %q, want %d \"ok\\n\"", want.ready, code, body, want.healthz)
		}
		if code, body := get(t, srv.URL+"/readyz"); code != want.readyz || body != want.readyBody {
			t.Errorf("ready %v: /readyz = %d %q, want %d %q", want.ready, code, body, want.readyz, want.readyBody)
		}
	}
}

func TestAdminEndpoints(t *testing.T) {
	src := &fakeSource{}
	dash := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "dashboard") })
	srv := httptest.NewServer(AdminHandler(New(), src, dash))
	defer srv.Close()

	if code, _ := get(t, srv.URL+"/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	if code, _ := get(t, srv.URL+"/readyz"); code != 503 {
		t.Fatalf("/readyz before ready = %d, want 503", code)
	}
	src.ready.Store(true)
	if code, _ := get(t, srv.URL+"/readyz"); code != 200 {
		t.Fatalf("/readyz when ready = %d, want 200", code)
	}
	src.dead.Store(true)
	if code, _ := get(t, srv.URL+"/healthz"); code != 503 {
		t.Fatalf("/healthz once not live = %d, want 503", code)
	}
	src.dead.Store(false)
	code, body := get(t, srv.URL+"/admin/origins")
	var v map[string]int
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || v["payments"] != 2 {
		t.Fatalf("/admin/origins = %d %q", code, body)
	}
	if code, _ := get(t, srv.URL+"/admin/subsets?origin=payments"); code != 200 {
		t.Fatalf("/admin/subsets known = %d", code)
	}
	if code, _ := get(t, srv.URL+"/admin/subsets?origin=nope"); code != 404 {
		t.Fatalf("/admin/subsets unknown = %d, want 404", code)
	}
	if code, _ := get(t, srv.URL+"/admin/subsets"); code != 400 {
		t.Fatalf("/admin/subsets without origin = %d, want 400", code)
	}
	if code, body := get(t, srv.URL+"/"); code != 200 || body != "dashboard" {
		t.Fatalf("/ = %d %q", code, body)
	}
	if code, _ := get(t, srv.URL+"/nope"); code != 404 {
		t.Fatalf("/nope = %d, want 404", code)
	}
}

func TestCodeClass(t *testing.T) {
	for code, want := range map[int]string{101: "1xx", 200: "2xx", 304: "3xx", 431: "4xx", 503: "5xx"} {
		if got := CodeClass(code); got != want {
			t.Errorf("CodeClass(%d) = %s, want %s", code, got, want)
		}
	}
}
