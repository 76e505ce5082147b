package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/slo"
	"github.com/corput/corput/internal/waitfor"
)

// TestScaleOutSignal is the workload monitor's drill (MC-WM-01): a load
// whose heavy share goes from 30 % to 50 % at t=40s, ten requests a second
// over real sockets, the monitor on an injected clock. The signal
// (corput_workload_scale_out_signal, /admin/origins) rises 30 s after the
// share went above 45 %, not a second earlier, and the webhook — a real
// HTTP server on loopback — receives exactly one event, which says so.
func TestScaleOutSignal(t *testing.T) {
	var (
		mu     sync.Mutex
		events []slo.Event
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e slo.Event
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil || r.Method != http.MethodPost {
			t.Errorf("webhook got %s with %v", r.Method, err)
		}
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	origin := newZonedOrigin(t)
	origin.slow.Store(5) // 1 ms and 3 ms: the test is about the mix, not latency
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast_path=%v", fast), func(t *testing.T) {
			mu.Lock()
			events = nil
			mu.Unlock()
			cfg := payYAML(fast, "slow_start: {window: 60s}", fmt.Sprintf("[{address: %q}]", origin.addr()), fmt.Sprintf(`workload:
  classes:
    - {name: light, percent: 70, latency: 1ms, match: {path_suffix: /light}}
    - {name: heavy, percent: 30, latency: 2ms, match: {path_suffix: /heavy}}
  scale_out: {above_percent: 45, for: 30s, webhook: %q}
`, hook.URL+"/scale"))
			g, fake := startSLOGateway(t, cfg)
			c, done := client()
			defer done()
			const switchAt = 40
			rose := -1
			for sec := 0; sec < 80; sec++ {
				heavy := 3
				if sec >= switchAt {
					heavy = 5
				}
				for i := range 10 {
					p := "/x/light"
					if i < heavy {
						p = "/x/heavy"
					}
					if resp, _ := get(t, c, "http://"+g.Addr()+p); resp.StatusCode != 200 {
						t.Fatalf("GET %s: %d", p, resp.StatusCode)
					}
				}
				// A request is counted just after its answer went out:
				// the second ends once all ten are.
				waitfor.Until(t, "the second's requests to be counted", func() bool { return sloView(t, g).ScaleOut.Counting == 10 })
				fake.Advance(time.Second)
				if v := sloView(t, g); v.ScaleOut.Signal && rose < 0 {
					rose = sec + 1 // the clock now reads sec+1 s
					if v.ScaleOut.HeavyPercent != 50 || v.ScaleOut.HeavyClass != "heavy" {
						t.Errorf("at the rise the view says %+v, want heavy at 50 %%", v.ScaleOut)
					}
				}
				if sec == switchAt-1 {
					if s, _ := scrapeFamilies(t, g).value("corput_workload_scale_out_signal", "origin", "pay"); s != 0 {
						t.Errorf("at a 30 %% heavy share the signal is %v, want 0", s)
					}
				}
			}
			t.Logf("heavy share 30 %% → 50 %% at t=%ds; the signal rose at t=%ds", switchAt, rose)
			if rose-switchAt != 30 {
				t.Fatalf("the signal rose %d s after the heavy share went to 50 %%, want 30", rose-switchAt)
			}
			if s, _ := scrapeFamilies(t, g).value("corput_workload_scale_out_signal", "origin", "pay"); s != 1 {
				t.Errorf("corput_workload_scale_out_signal = %v after the rise, want 1", s)
			}
			n := g.webhook.Load()
			waitfor.Until(t, "the webhook to get the event", func() bool { return n.Sent.Load()+n.Failed.Load() >= 1 })
			mu.Lock()
			defer mu.Unlock()
			if len(events) != 1 || n.Sent.Load() != 1 || n.Dropped.Load() != 0 || n.Failed.Load() != 0 {
				t.Fatalf("webhook got %d events (sent %d, dropped %d, failed %d), want exactly 1: %+v",
					len(events), n.Sent.Load(), n.Dropped.Load(), n.Failed.Load(), events)
			}
			e := events[0]
			if e.Type != "scale_out" || e.Origin != "pay" || !e.Signal || e.HeavyClass != "heavy" || e.HeavyPercent != 50 || e.AbovePercent != 45 {
				t.Errorf("webhook event %+v", e)
			}
		})
	}
}

// TestReloadWorkload: an origin of a gateway started without a workload
// gets its SLO monitor from a reload that adds one, with the new classes and
// budgets; a reload that changes a budget keeps the monitor and shows the
// new budget; one that drops the workload leaves it watching nothing.
func TestReloadWorkload(t *testing.T) {
	origin := newZonedOrigin(t)
	eps := fmt.Sprintf("[{address: %q}]", origin.addr())
	g := newGateway(t, payYAML(true, "slow_start: {window: 60s}", eps, ""), Options{})
	if v := g.Origins().([]cluster.OriginView)[0].SLO; v != nil {
		t.Fatalf("an origin without a workload shows slo %+v", v)
	}
	reload := func(extra string) {
		t.Helper()
		cfg, err := config.Parse([]byte(payYAML(true, "slow_start: {window: 60s}", eps, extra)), "reload.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Reload(cfg); err != nil {
			t.Fatal(err)
		}
	}
	wl := func(budget string) string {
		return "workload:\n  classes:\n    - {name: light, percent: 70, latency: 1ms, slo: {p99: " + budget + "}}\n    - {name: heavy, percent: 30, latency: 9ms}\n"
	}
	reload(wl("20ms"))
	v := sloView(t, g)
	if len(v.Classes) != 2 || v.Classes[0].BudgetMs != 20 || v.ScaleOut.HeavyClass != "heavy" {
		t.Fatalf("after adding the workload: %+v", v)
	}
	reload(wl("30ms"))
	if v := sloView(t, g); v.Classes[0].BudgetMs != 30 {
		t.Fatalf("after changing the budget: %+v", v)
	}
	reload("")
	if v := sloView(t, g); len(v.Classes) != 0 {
		t.Fatalf("after dropping the workload the monitor still watches %+v", v.Classes)
	}
}
