package live

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/testbin"
)

// shortReload is the reload experiment shortened: reloads a second apart
// and a 4 s restart window, 14 s of load for 3 reloads.
func shortReload(t *testing.T, reloads int) Options {
	o := small(t)
	o.Scenario, o.Reloads, o.ReloadEvery, o.RestartWindow = ScenarioReload, reloads, time.Second, 4*time.Second
	return o
}

// checkReload asserts what the configuration fixes: h2c pools of one
// pre-warmed connection carry this load without growing, so a reload
// creates none and a restart exactly its pre-warm, on both sides of the
// count; every reload is applied and no request fails.
func checkReload(t *testing.T, o Options, res Results) {
	t.Helper()
	rr := res.Reload
	if rr == nil || len(res.Steps) != 0 {
		t.Fatalf("reload %v, %d steps: want the reload experiment alone", rr, len(res.Steps))
	}
	for _, c := range res.Checks {
		if !c.Pass {
			t.Errorf("%s  %s: %s", c.Status(), c.Name, c.Detail)
		}
	}
	// One per pool: K×S, or more where K×S loops' subsets cannot cover
	// the N endpoints of a fleet of one.
	if rr.Prewarmed < int64(o.Loops*o.SubsetSize) || float64(rr.Prewarmed) != rr.Samples[0].MetricsCreated {
		t.Errorf("the first process pre-warmed %d connections at the origins, %v by /metrics; want one per pool, at least K×S = %d",
			rr.Prewarmed, rr.Samples[0].MetricsCreated, o.Loops*o.SubsetSize)
	}
	b, rl, rs := rr.window(WindowBaseline), rr.window(WindowReloads), rr.window(WindowRestart)
	if rl.OriginCreated != 0 || rl.MetricsCreated != 0 || b.OriginCreated != 0 {
		t.Errorf("created in the reload window %d / %v, in the baseline %d: want none", rl.OriginCreated, rl.MetricsCreated, b.OriginCreated)
	}
	if rs.OriginCreated != rr.RestartPrewarm || rs.MetricsCreated != float64(rr.RestartPrewarm) {
		t.Errorf("created in the restart window %d / %v, want the new process's pre-warm, %d", rs.OriginCreated, rs.MetricsCreated, rr.RestartPrewarm)
	}
	if rl.Failed != 0 || rs.Failed != 0 || rr.Load.Requests != rr.Load.ok() || rr.Load.Requests == 0 {
		t.Errorf("failed: %d in the reload window, %d in the restart's; %d of %d requests 2xx: %v",
			rl.Failed, rs.Failed, rr.Load.ok(), rr.Load.Requests, rr.Load.Errors)
	}
	applied, kinds := 0, map[string]int{}
	for _, e := range rr.Events {
		kinds[e.Kind]++
		if e.Kind == "applied" {
			applied++
		}
	}
	if applied != o.Reloads || kinds["reload"] != o.Reloads || kinds["restart"] != 1 || kinds["exited"] != 1 {
		t.Errorf("events %v, want %d reloads applied, one restart, the old process exited", kinds, o.Reloads)
	}
	for _, e := range rr.Events {
		if e.Kind == "reload" && (e.T < rl.From || e.T > rl.To) {
			t.Errorf("a reload at %.2fs, outside its window %.1f–%.1f", e.T, rl.From, rl.To)
		}
		if e.Kind == "restart" && (e.T < rs.From || e.T > rs.To) {
			t.Errorf("the restart at %.2fs, outside its window %.1f–%.1f", e.T, rs.From, rs.To)
		}
	}
	routes, caps, sizes := (o.Reloads+2)/3, (o.Reloads+1)/3, o.Reloads/3 // reloadFile.next's turns
	if cfg := rr.Running.Config; len(cfg.Routes) != 1+routes || len(cfg.Origins) != 1 ||
		cfg.Origins[0].Pool.MaxConnections != map[bool]int{true: capLow, false: capHigh}[caps%2 == 1] || cfg.Fleet.Size != 1+sizes%2 {
		t.Errorf("GET /admin/config after the reloads: %+v", cfg)
	}
	if rr.RestartPrewarm <= 0 {
		t.Errorf("the pools before the restart × prewarm: %d", rr.RestartPrewarm)
	}
	if rr.LeftOpen != 0 {
		t.Errorf("%d connections left open at the origins after both processes stopped", rr.LeftOpen)
	}
	last := rr.Samples[len(rr.Samples)-1]
	if float64(last.OriginOpen) != last.MetricsOpen || float64(last.OriginAccepted) != last.MetricsCreated {
		t.Errorf("at the end %d open / %d accepted at the origins, %v / %v by /metrics", last.OriginOpen, last.OriginAccepted, last.MetricsOpen, last.MetricsCreated)
	}
	if len(rr.Gateways) != 2 || rr.Gateways[0] != rr.Gateways[1] {
		t.Errorf("the processes served %v: want one socket, twice", rr.Gateways)
	}
	for _, f := range []string{ReportFile, ReloadCreatedPlot, ReloadOpenPlot} {
		if st, err := os.Stat(filepath.Join(o.Out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestReloadProcesses runs a shortened reload experiment (3 reloads, a
// restart) with real `corput origin` and `corput serve` children: SIGHUP,
// socket activation through sh, SIGTERM and drain.
func TestReloadProcesses(t *testing.T) {
	t.Parallel()
	o := shortReload(t, 3)
	o.Binary = testbin.Corput(t)
	var out bytes.Buffer
	o.Stdout = &out
	if err := Run(context.Background(), o); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	res := readResults(t, o.Out)
	if res.Mode != "processes" {
		t.Fatalf("mode %q", res.Mode)
	}
	checkReload(t, o, res)
	if n := strings.Count(out.String(), "PASS  reload:"); n != 4 {
		t.Errorf("%d PASS lines, want 4:\n%s", n, out.String())
	}
	log, err := os.ReadFile(filepath.Join(o.Out, "live-run", "reload-gw-a.log"))
	if err != nil || strings.Count(string(log), "configuration reloaded") != o.Reloads {
		t.Errorf("the first process's log does not show %d reloads (%v):\n%s", o.Reloads, err, log)
	}
	noChildren(t, o.Binary)
	for _, addr := range res.Origins {
		refused(t, "origin", addr, o.Binary)
	}
	refused(t, "gateway", res.Reload.Gateways[0], o.Binary)
	t.Logf("\n%s", out.String())
}

// TestReloadInProcess runs it with origins and gateways in this process:
// Gateway.ReloadFromSource and a restart through a copy of the socket.
func TestReloadInProcess(t *testing.T) {
	t.Parallel()
	o := shortReload(t, 2)
	o.InProcess = true
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	res := readResults(t, o.Out)
	if res.Mode != "in-process" {
		t.Fatalf("mode %q", res.Mode)
	}
	checkReload(t, o, res)
}

// reloadSeries is a result with the short experiment's windows over
// per-second samples: 8 pre-warmed connections, 40 answers a second and
// nothing else, to be broken by the tests.
func reloadSeries(t *testing.T) ReloadResult {
	t.Helper()
	o, err := shortReload(t, 3).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	b, rl, rs, d := o.reloadSpans()
	res := ReloadResult{Reloads: 3, ReloadsOK: 3, Prewarmed: 8, RestartPrewarm: 8, FileHash: "sha256:f11e", Windows: []Window{
		{Name: WindowBaseline, From: b[0], To: b[1]},
		{Name: WindowReloads, From: rl[0], To: rl[1]},
		{Name: WindowRestart, From: rs[0], To: rs[1]},
	}}
	res.Running.Hash = res.FileHash
	for s := range int(d.Seconds()) + 1 {
		res.Samples = append(res.Samples, ReloadSample{
			Sample:   Sample{T: float64(s) + 0.01, OriginOpen: 8, OriginAccepted: 8, MetricsOpen: 8, MetricsCreated: 8},
			Answered: 40 * int64(s),
		})
	}
	// The restart: 8 new connections in its first second.
	for i := range res.Samples {
		if res.Samples[i].T > rs[0]+1 {
			res.Samples[i].OriginAccepted += 8
			res.Samples[i].MetricsCreated += 8
		}
	}
	return res
}

// The checks pass on a flat reload window and fail on each kind of
// breakage: a spike, a reload not applied, a failed request.
func TestReloadChecksCanFail(t *testing.T) {
	status := func(res ReloadResult) string {
		res.measure()
		var s []string
		for _, c := range res.checks() {
			s = append(s, c.Status())
		}
		return strings.Join(s, " ")
	}
	if got := status(reloadSeries(t)); got != "PASS PASS PASS PASS" {
		t.Fatalf("a flat reload window: %s", got)
	}
	at := func(res *ReloadResult, from float64, f func(*ReloadSample)) {
		for i := range res.Samples {
			if res.Samples[i].T > from {
				f(&res.Samples[i])
			}
		}
	}
	for name, c := range map[string]struct {
		broken func(*ReloadResult)
		want   string
	}{
		"a spike at the origins in the reload window": {func(r *ReloadResult) {
			at(r, r.Windows[1].From+1.5, func(s *ReloadSample) { s.OriginAccepted += 5 })
		}, "FAIL PASS PASS PASS"},
		"a spike counted by /metrics only": {func(r *ReloadResult) {
			at(r, r.Windows[1].From+1.5, func(s *ReloadSample) { s.MetricsCreated++ })
		}, "FAIL PASS PASS PASS"},
		"one reload not applied":    {func(r *ReloadResult) { r.ReloadsOK = 2 }, "PASS FAIL PASS PASS"},
		"one reload rejected":       {func(r *ReloadResult) { r.ReloadsRejected = 1 }, "PASS FAIL PASS PASS"},
		"the last file not running": {func(r *ReloadResult) { r.Running.Hash = "sha256:01d" }, "PASS FAIL PASS PASS"},
		"a request failed in the reload window": {func(r *ReloadResult) {
			at(r, r.Windows[1].From+1.5, func(s *ReloadSample) { s.Failed++ })
		}, "PASS PASS FAIL PASS"},
		"a restart that opens nothing": {func(r *ReloadResult) {
			at(r, 0, func(s *ReloadSample) { s.OriginAccepted, s.MetricsCreated = 8, 8 })
		}, "PASS PASS PASS FAIL"},
	} {
		res := reloadSeries(t)
		c.broken(&res)
		if got := status(res); got != c.want {
			t.Errorf("%s: %s, want %s", name, got, c.want)
		}
	}
	// As many connections in the reload window as in the baseline's is
	// allowed: churn that was there anyway.
	res := reloadSeries(t)
	at(&res, res.Windows[0].From+1.5, func(s *ReloadSample) { s.OriginAccepted, s.MetricsCreated = s.OriginAccepted+1, s.MetricsCreated+1 })
	at(&res, res.Windows[1].From+1.5, func(s *ReloadSample) { s.OriginAccepted, s.MetricsCreated = s.OriginAccepted+1, s.MetricsCreated+1 })
	if got := status(res); got != "PASS PASS PASS PASS" {
		t.Errorf("one connection in each window: %s", got)
	}
}

// A failure just after the reload window still counts in it (the clients'
// tally lags); the restart's, two seconds later, does not.
func TestReloadWindowCounts(t *testing.T) {
	res := reloadSeries(t)
	rl := res.Windows[1]
	for i := range res.Samples {
		switch t := res.Samples[i].T; {
		case t > res.Windows[2].From+0.5:
			res.Samples[i].Failed = 3 // the restart's
		case t > rl.To:
			res.Samples[i].Failed = 1
		}
	}
	res.measure()
	w := res.window(WindowReloads)
	if w.Failed != 1 || w.OriginCreated != 0 || w.Answered != 40*int64(rl.To-rl.From+clientLag) {
		t.Errorf("reload window %+v: want 1 failure, no connection, %v s of answers", w, rl.To-rl.From+clientLag)
	}
	if rs := res.window(WindowRestart); rs.OriginCreated != 8 || rs.OriginPeak != 8 || rs.Failed != 2 {
		t.Errorf("restart window %+v: want 8 created at 8/s and 2 failures", rs)
	}
}

// The file a reload rewrites parses, and each change is the one it says.
func TestReloadConfigs(t *testing.T) {
	o := defaults(t)
	st := o.reloadStep()
	eps := make([]string, o.Endpoints)
	for i := range eps {
		eps[i] = fmt.Sprintf("127.0.0.1:%d", 20000+i)
	}
	file := firstReloadFile()
	for i := 0; i <= DefaultReloads; i++ {
		var change string
		if i > 0 {
			file, change = file.next(i)
		}
		cfg, err := config.Parse(file.config(st, "reload", eps), "reload.yaml")
		if err != nil {
			t.Fatalf("after reload %d (%s): %v", i, change, err)
		}
		oc := cfg.Origins[0]
		// Reloads 1, 4, 7, … add a route; 2, 5, 8, … move the cap; 3, 6,
		// 9, … move the fleet's size.
		routes, caps, sizes := (i+2)/3, (i+1)/3, i/3
		if len(cfg.Routes) != 1+routes || oc.Protocol != config.ProtocolH2C || oc.Pool.Prewarm != 1 || cfg.Loops != o.Loops {
			t.Errorf("after reload %d (%s): %d routes, %+v", i, change, len(cfg.Routes), oc.Pool)
		}
		if want := map[bool]int{true: capLow, false: capHigh}[caps%2 == 1]; oc.Pool.MaxConnections != want {
			t.Errorf("after reload %d: max_connections %d, want %d", i, oc.Pool.MaxConnections, want)
		}
		if want := 1 + sizes%2; cfg.Fleet.Size != want || cfg.Fleet.Instance != 0 {
			t.Errorf("after reload %d: fleet %+v, want instance 0 of %d", i, cfg.Fleet, want)
		}
	}
}
