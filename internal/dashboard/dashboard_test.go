package dashboard

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newFake starts a Dashboard over a fresh registry on a fake clock.
func newFake(t *testing.T, window time.Duration) (*Dashboard, *telemetry.Metrics, *clock.Fake) {
	t.Helper()
	m := telemetry.New()
	clk := clock.NewFake(t0)
	d := New(Options{Metrics: m, Clock: clk, Interval: time.Second, Window: window})
	t.Cleanup(d.Close)
	return d, m, clk
}

func TestSamplerRatesAndLevelsPerOriginAndInAll(t *testing.T) {
	d, m, clk := newFake(t, time.Minute)
	m.ConnectionsCreated.WithLabelValues("app", "0", "h1").Add(3)
	m.ConnectionsCreated.WithLabelValues("app", "1", "h2").Add(2)
	m.ConnectionsCreated.WithLabelValues("db", "0", "h1").Add(4)
	m.ConnectionsOpen.WithLabelValues("app", "0", "h1").Set(7)
	m.ConnectionsOpen.WithLabelValues("db", "0", "h1").Set(1)
	m.ConnectionsClosed.WithLabelValues("app", telemetry.CloseIdle).Add(1)
	m.RequestDuration.WithLabelValues("app", "2xx").Observe(0.01)
	m.RequestDuration.WithLabelValues("app", "5xx").Observe(0.2)
	m.RequestsShed.WithLabelValues("db", forward.PendingFull.String()).Inc()
	m.ZoneRequests.WithLabelValues("app", "local").Add(3)
	m.ZoneRequests.WithLabelValues("app", "remote").Add(1)
	m.OutlierEjected.WithLabelValues("app").Set(2)
	m.PanicMode.WithLabelValues("db").Set(1)
	clk.Advance(2 * time.Second) // two ticks: the counters moved in the first

	h := d.History()
	if len(h.Points) != 2 || h.IntervalSeconds != 1 || h.WindowSeconds != 60 {
		t.Fatalf("history: %d points, interval %v, window %v; want 2, 1, 60", len(h.Points), h.IntervalSeconds, h.WindowSeconds)
	}
	first, second := h.Points[0], h.Points[1]
	if !first.T.Equal(t0.Add(time.Second)) || !second.T.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("points at %v, %v; want t0+1s, t0+2s", first.T, second.T)
	}
	app, db := first.Origins["app"], first.Origins["db"]
	if app.CreatedPerSec != 5 || app.ClosedPerSec != 1 || app.RequestsPerSec != 2 || app.Open != 7 ||
		app.ZoneLocalPerSec != 3 || app.ZoneRemotePerSec != 1 || app.Ejected != 2 || app.Panic {
		t.Fatalf("app figures %+v", app)
	}
	if db.CreatedPerSec != 4 || db.ShedPerSec != 1 || db.Open != 1 || !db.Panic {
		t.Fatalf("db figures %+v", db)
	}
	if first.CreatedPerSec != 9 || first.Open != 8 || !first.Panic || first.Ejected != 2 {
		t.Fatalf("gateway figures %+v, want the sum of both origins", first.Figures)
	}
	// Nothing moved in the second interval: rates fall to zero, levels stay.
	if second.CreatedPerSec != 0 || second.RequestsPerSec != 0 || second.Open != 8 {
		t.Fatalf("second point %+v: want zero rates and the same levels", second.Figures)
	}
	if h.Totals.Created != 9 || h.Totals.Requests != 2 || h.OriginTotals["app"].ZoneLocal != 3 {
		t.Fatalf("totals %+v / %+v", h.Totals, h.OriginTotals)
	}
}

func TestSamplerRateIsPerSecondOverTheInterval(t *testing.T) {
	m := telemetry.New()
	clk := clock.NewFake(t0)
	d := New(Options{Metrics: m, Clock: clk, Interval: 5 * time.Second})
	defer d.Close()
	m.ConnectionsCreated.WithLabelValues("app", "0", "h1").Add(10)
	clk.Advance(5 * time.Second)
	h := d.History()
	if len(h.Points) != 1 || h.Points[0].CreatedPerSec != 2 {
		t.Fatalf("points %+v: want one at 10 connections / 5 s = 2/s", h.Points)
	}
	if h.WindowSeconds != DefaultWindow.Seconds() {
		t.Fatalf("window %v s, want the default %v", h.WindowSeconds, DefaultWindow.Seconds())
	}
}

func TestHistoryKeepsTheLastWindowOldestFirst(t *testing.T) {
	d, m, clk := newFake(t, 5*time.Second)
	c := m.ConnectionsCreated.WithLabelValues("app", "0", "h1")
	for i := 1; i <= 8; i++ {
		c.Add(float64(i)) // point i has rate i
		clk.Advance(time.Second)
	}
	h := d.History()
	if len(h.Points) != 5 {
		t.Fatalf("%d points, want the window's 5", len(h.Points))
	}
	for k, p := range h.Points {
		want := float64(k + 4)
		if p.CreatedPerSec != want || !p.T.Equal(t0.Add(time.Duration(k+4)*time.Second)) {
			t.Fatalf("point %d: rate %v at %v, want %v at t0+%ds", k, p.CreatedPerSec, p.T, want, k+4)
		}
	}
}

func TestCloseStopsSampling(t *testing.T) {
	d, m, clk := newFake(t, time.Minute)
	clk.Advance(time.Second)
	d.Close()
	d.Close() // idempotent
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers pending after Close", n)
	}
	m.ConnectionsCreated.WithLabelValues("app", "0", "h1").Inc()
	clk.Advance(10 * time.Second)
	if n := len(d.History().Points); n != 1 {
		t.Fatalf("%d points after Close, want the 1 taken before", n)
	}
}

// A counter that goes down (a restarted process behind the same series)
// counts as no events rather than a negative rate.
func TestPointTreatsACounterResetAsZero(t *testing.T) {
	prev := sample{at: t0, totals: map[string]Totals{"app": {Created: 10}}}
	cur := sample{at: t0.Add(time.Second), totals: map[string]Totals{"app": {Created: 4}}, levels: map[string]Figures{"app": {Open: 3}}}
	p := point(prev, cur)
	if p.CreatedPerSec != 0 || p.Open != 3 {
		t.Fatalf("point %+v: want rate 0 and level 3", p.Figures)
	}
}

// The real clock: a dashboard ticking every millisecond collects points and
// leaves no goroutine behind after Close (goleak checks at exit).
func TestRealClockSamplerStops(t *testing.T) {
	d := New(Options{Metrics: telemetry.New(), Interval: time.Millisecond, Window: time.Second})
	for deadline := time.Now().Add(5 * time.Second); len(d.History().Points) < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("fewer than 3 points in 5 s at a 1 ms interval")
		}
	}
	d.Close()
	n := len(d.History().Points)
	time.Sleep(20 * time.Millisecond)
	if m := len(d.History().Points); m != n {
		t.Fatalf("%d points after Close, then %d", n, m)
	}
}

const gatewayYAML = `
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 2
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    endpoints: ENDPOINTS
    pool: {prewarm: 1}
    zone: {local: us-east-1a, local_percent: 85}
`

// Served by a real gateway's admin listener: the page and its assets, the
// history as JSON with the figures the origins saw, and a 404 for anything
// else under /dashboard/.
func TestServedOnTheAdminListener(t *testing.T) {
	clk := clock.NewFake(t0)
	f := startFleet(t, 3, -1, gatewayYAML, Options{Clock: clk, Window: time.Minute})
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()

	code, ctype, body := get(t, c, f.admin+"/")
	if code != 200 || !strings.HasPrefix(ctype, "text/html") || !strings.Contains(body, `<script src="/dashboard/app.js">`) {
		t.Fatalf("GET / = %d %s:\n%.300s", code, ctype, body)
	}
	for _, asset := range []struct{ path, ctype, text string }{
		{"/dashboard/app.js", "javascript", "drawRing"},
		{"/dashboard/style.css", "text/css", "--churn"},
	} {
		code, ctype, body := get(t, c, f.admin+asset.path)
		if code != 200 || !strings.Contains(ctype, asset.ctype) || !strings.Contains(body, asset.text) {
			t.Errorf("GET %s = %d %s, body has %q: %v", asset.path, code, ctype, asset.text, strings.Contains(body, asset.text))
		}
	}
	if code, _, _ := get(t, c, f.admin+"/dashboard/nope.js"); code != 404 {
		t.Errorf("GET /dashboard/nope.js = %d, want 404", code)
	}
	if code, _, _ := get(t, c, f.admin+"/metrics"); code != 200 {
		t.Errorf("GET /metrics = %d with the dashboard mounted", code)
	}

	const requests = 20
	for range requests {
		if code, _, _ := get(t, c, f.target+"/light"); code != 200 {
			t.Fatalf("request through the gateway: %d", code)
		}
	}
	clk.Advance(time.Second)
	code, ctype, body = get(t, c, f.admin+"/dashboard/history")
	if code != 200 || ctype != "application/json" {
		t.Fatalf("GET /dashboard/history = %d %s", code, ctype)
	}
	var h History
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatalf("history JSON: %v\n%s", err, body)
	}
	if len(h.Points) != 1 {
		t.Fatalf("%d points after one interval, want 1", len(h.Points))
	}
	p := h.Points[0].Origins["app"]
	if p.RequestsPerSec != requests || h.Totals.Requests != requests {
		t.Errorf("requests/s %v, total %v; want %d sent in the one-second interval", p.RequestsPerSec, h.Totals.Requests, requests)
	}
	if accepted := f.acceptedConnections(); h.Totals.Created != float64(accepted) {
		t.Errorf("connections created %v, origins accepted %d", h.Totals.Created, accepted)
	}
	if p.Open < 3 {
		t.Errorf("open connections %v: want at least the 3 pre-warmed", p.Open)
	}
	if z := h.OriginTotals["app"]; z.ZoneLocal+z.ZoneRemote != requests {
		t.Errorf("zone counters %+v do not add up to %d requests", z, requests)
	}
}
