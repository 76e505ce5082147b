//go:build browser

package dashboard

// The dashboard tested as a person would use it: Debian's chromium, driven
// headless by chromedp, opens a running gateway's admin page while load goes
// through the gateway, and the test reads the figures off the page.
//
//	apt-get install -y chromium
//	go test -tags browser ./internal/dashboard/ -run Browser -args -screenshot ../../docs/img/dashboard.png

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/corput/corput/internal/loadgen"
)

var (
	screenshot = flag.String("screenshot", "", "write the dashboard's screenshot to this `PNG` (default: the test's temp dir)")
	chromium   = flag.String("chromium", "/usr/bin/chromium", "the browser binary")
)

// figures is what the page shows, read from its DOM text.
type figures struct {
	Refreshes  string  `json:"refreshes"`
	Churn      string  `json:"churn"`
	Created    string  `json:"created"`
	Open       string  `json:"open"`
	RPS        string  `json:"rps"`
	Requests   string  `json:"requests"`
	Ejected    string  `json:"ejected"`
	Zone       string  `json:"zone"`
	Ready      string  `json:"ready"`
	RingDots   int     `json:"ringDots"`
	RingArcs   int     `json:"ringArcs"`
	Ejections  int     `json:"ejections"`
	ChurnLines int     `json:"churnLines"`
	ChurnSum   float64 `json:"churnSum"` // the churn line's values added up
	Rows       int     `json:"rows"`
	LoopLabels string  `json:"loopLabels"`
	LoopShares string  `json:"loopShares"`
}

const readFigures = `(() => {
  const t = id => (document.getElementById(id) || {}).textContent || "";
  return {
    refreshes: document.body.dataset.refreshes || "0",
    churn: t("stat-churn"), created: t("stat-created-total"), open: t("stat-open"),
    rps: t("stat-rps"), requests: t("stat-requests-total"), ejected: t("stat-ejected"),
    zone: t("stat-zone"), ready: t("ready"),
    ringDots: document.querySelectorAll("#ring-app g.ep").length,
    ringArcs: document.querySelectorAll("#ring-app path.arc").length,
    ejections: document.querySelectorAll("#ring-app .ejected-mark").length,
    churnLines: document.querySelectorAll("#chart-churn polyline.series").length,
    churnSum: Number((document.querySelector("#chart-churn polyline.series") || {dataset: {}}).dataset.sum || 0),
    rows: document.querySelectorAll("#origin-app tbody tr").length,
    loopLabels: [...document.querySelectorAll("#ring-app text")].map(e => e.textContent).filter(s => /^L/.test(s)).join(" "),
    loopShares: (document.querySelector("#origin-app .f-loops") || {}).textContent || "",
  };
})()`

// num reads a figure as the page prints it ("1,234", "12.5", "–").
func num(s string) float64 {
	v, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSuffix(s, " %"), ",", ""), 64)
	if err != nil {
		return -1
	}
	return v
}

// demoYAML is the screenshot's gateway: 12 endpoints in 4 subsets of 3,
// this gateway (0 of 2) using all four with its 4 loops; short idle timeouts
// make the Poisson bursts visible as churn.
const demoYAML = `
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 4
fleet: {instance: 0, size: 2}
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    endpoints: ENDPOINTS
    subset: {size: 3}
    pool: {prewarm: 1, idle_timeout: 2s}
    zone: {local: us-east-1a, local_percent: 85}
    outlier: {consecutive_5xx: 3, base_ejection_time: 60s, max_ejection_percent: 20}
`

func TestBrowserShowsFiguresChangingUnderLoad(t *testing.T) {
	if _, err := os.Stat(*chromium); err != nil {
		t.Fatalf("%s: %v (apt-get install -y chromium, or -chromium PATH)", *chromium, err)
	}
	f := startFleet(t, 12, 4, demoYAML, Options{Interval: 500 * time.Millisecond, Window: 45 * time.Second})

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(*chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1440, 1200))
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1440, 900), chromedp.Navigate(f.admin+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	read := func() figures {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[figures](readFigures))
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		return v
	}
	// waitFor polls the page until ok holds, and fails with the last read.
	waitFor := func(what string, d time.Duration, ok func(figures) bool) figures {
		t.Helper()
		var v figures
		for deadline := time.Now().Add(d); ; time.Sleep(250 * time.Millisecond) {
			if v = read(); ok(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s; page shows %+v", what, d, v)
			}
		}
	}

	idle := waitFor("first refresh with the ring", 15*time.Second, func(v figures) bool {
		return num(v.Refreshes) >= 2 && v.RingDots == 12 && num(v.Open) > 0
	})
	if v := idle; v.RingArcs != 4 || v.LoopLabels != "L0 L2 L1 L3" || v.Rows != 12 || v.Ready != "ready" || num(v.RPS) != 0 {
		t.Fatalf("idle page: %+v; want 4 arcs labelled with loops 0–3 in ring order, 12 rows, ready, no requests", v)
	}

	// Open-loop Poisson load with the seed's 70/30 mix for 12 s; a failed
	// test stops it early and waits for it.
	var (
		load    sync.WaitGroup
		loadErr error
	)
	lctx, stopLoad := context.WithCancel(context.Background())
	load.Add(1)
	go func() {
		defer load.Done()
		_, loadErr = loadgen.Run(lctx, loadgen.Options{Target: f.target, Rate: 120, Duration: 12 * time.Second, Seed: 7})
	}()
	defer load.Wait()
	defer stopLoad()

	busy := waitFor("figures moving under load", 20*time.Second, func(v figures) bool {
		return num(v.RPS) > 20 && num(v.Created) > num(idle.Created) && num(v.Ejected) == 1 && v.Ejections == 1
	})
	t.Logf("idle: %+v", idle)
	t.Logf("busy: %+v", busy)
	if num(busy.Requests) <= num(idle.Requests) || num(busy.Zone) <= 0 {
		t.Fatalf("requests %s → %s, zone-local %s: want growth and a local share", idle.Requests, busy.Requests, busy.Zone)
	}
	// A loop per request: under load every loop takes its share.
	var lo, hi float64
	if _, err := fmt.Sscanf(busy.LoopShares, "%f–%f× even", &lo, &hi); err != nil || lo <= 0 || hi >= 1.5 {
		t.Fatalf("loop shares %q under load: want every loop near an even share", busy.LoopShares)
	}
	load.Wait()
	if loadErr != nil {
		t.Fatalf("load: %v", loadErr)
	}

	// The churn line has drawn the connections the load made, on top of
	// the pre-warmed ones it showed when idle.
	after := waitFor("churn line drawn", 10*time.Second, func(v figures) bool {
		return v.ChurnLines == 1 && v.ChurnSum > idle.ChurnSum
	})
	t.Logf("after: %+v", after)

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1440 || b.Dy() < 900 {
		t.Fatalf("screenshot %v, want 1440 wide and the whole page", b)
	}
	path := *screenshot
	if path == "" {
		path = filepath.Join(t.TempDir(), "dashboard.png")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))
}
