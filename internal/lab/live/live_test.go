package live

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"net"
	"os"

	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/testbin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testbin.M(m)) }

// small is a reduced fleet: 2 gateways × 2 loops × 8 endpoints, subsets
// of 2, so per-loop pools keep 32 connections and subsetting 8.
func small(t *testing.T, steps ...string) Options {
	return Options{
		Out: t.TempDir(), Seed: 7, Gateways: 2, Loops: 2, Endpoints: 8, SubsetSize: 2,
		Rate: 40, StepDuration: 3 * time.Second, Scenario: ScenarioSteps, Steps: steps,
	}
}

func readResults(t *testing.T, dir string) Results {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var res Results
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func byID(t *testing.T, res Results) map[string]StepResult {
	t.Helper()
	m := map[string]StepResult{}
	for _, s := range res.Steps {
		m[s.Step.ID] = s
	}
	return m
}

// checkCounts asserts what the configuration fixes, on both sides of the
// count, for every step that ran.
func checkCounts(t *testing.T, o Options, steps map[string]StepResult) {
	t.Helper()
	perLoop := o.Gateways * o.Loops * o.Endpoints
	subset := o.Gateways * o.Loops * o.SubsetSize
	for id, sr := range steps {
		s, last := sr.Summary, sr.Rest
		if s.LeftOpen != 0 {
			t.Errorf("step %s: %d connections still open at the origins after the gateways stopped", id, s.LeftOpen)
		}
		// At rest both sides agree exactly.
		if float64(last.OriginOpen) != last.MetricsOpen {
			t.Errorf("step %s: at the end %d open at the origins, %v by /metrics", id, last.OriginOpen, last.MetricsOpen)
		}
		if math.Abs(float64(s.OriginTotal)-s.MetricsTotal) > 1 {
			t.Errorf("step %s: %d connections accepted by the origins, %v created by /metrics", id, s.OriginTotal, s.MetricsTotal)
		}
		if bad := sr.Load.Requests - sr.Load.ok(); bad != 0 || sr.Load.Requests == 0 {
			t.Errorf("step %s: %d requests, %d not 2xx: %v %v", id, sr.Load.Requests, bad, sr.Load.StatusCodes, sr.Load.Errors)
		}
	}
	if sr, ok := steps[StepPerLoop]; ok {
		if sr.Summary.Floor != perLoop || sr.Summary.OriginStart != int64(perLoop) {
			t.Errorf("step 2: floor %d, pre-warmed %d at the origins; want G×K×N = %d", sr.Summary.Floor, sr.Summary.OriginStart, perLoop)
		}
		for _, x := range sr.Samples {
			// h1: a pool opens a second connection only while two
			// requests overlap on it, which is rare at this rate.
			if x.OriginOpen < int64(perLoop) || x.OriginOpen > int64(perLoop)*5/4 {
				t.Errorf("step 2 at %.1fs: %d open at the origins, want G×K×N = %d (+25%%)", x.T, x.OriginOpen, perLoop)
			}
		}
	}
	if sr, ok := steps[StepSubset]; ok {
		for _, x := range sr.Samples {
			// h2c with prewarm 1: exactly one connection per pool.
			if x.OriginOpen != int64(subset) || x.MetricsOpen != float64(subset) {
				t.Errorf("step 4 at %.1fs: %d open at the origins, %v by /metrics; want G×K×S = %d", x.T, x.OriginOpen, x.MetricsOpen, subset)
			}
		}
		if sr.Summary.OriginTotal != int64(subset) {
			t.Errorf("step 4: %d connections created, want only the %d pre-warmed ones", sr.Summary.OriginTotal, subset)
		}
	}
}

func TestInProcessSteps(t *testing.T) {
	t.Parallel()
	o := small(t, StepPerLoop, StepSubset, StepIdleEager, StepIdleTuned)
	o.InProcess = true
	var out bytes.Buffer
	o.Stdout = &out
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	res := readResults(t, o.Out)
	if res.Mode != "in-process" || len(res.Steps) != 4 {
		t.Fatalf("mode %q, %d steps", res.Mode, len(res.Steps))
	}
	steps := byID(t, res)
	checkCounts(t, o, steps)
	if a, b := steps[StepSubset].Summary.OriginOpen, steps[StepPerLoop].Summary.OriginOpen; a*2 > b {
		t.Errorf("subsetting keeps %v open, per-loop pools %v: want far fewer", a, b)
	}

	// Step 5: the same traffic; only the idle timeout differs. Eviction
	// inside the inter-request gap re-creates the churn.
	during := func(id string) int64 {
		s := steps[id].Summary
		return s.OriginTotal - s.OriginStart
	}
	pools := int64(steps[StepIdleTuned].Summary.Pools)
	// About one per pool; a machine stalled longer than the tuned timeout
	// (2 s here) can add a few.
	if during(StepIdleTuned) > 2*pools {
		t.Errorf("tuned idle timeout: %d connections created under load, want about one per pool (%d)", during(StepIdleTuned), pools)
	}
	if during(StepIdleEager) < 2*during(StepIdleTuned) {
		t.Errorf("aggressive idle timeout created %d connections under load, tuned %d: want the churn back", during(StepIdleEager), during(StepIdleTuned))
	}
	if steps[StepIdleEager].Summary.Closed["idle"] == 0 {
		t.Errorf("aggressive idle timeout: no idle closes in /metrics: %v", steps[StepIdleEager].Summary.Closed)
	}

	for _, f := range []string{ReportFile, "live-open.png", "live-created.png", "live-step4-open.png", "live-step5a-created.png"} {
		if st, err := os.Stat(filepath.Join(o.Out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, want := range []string{"Upstream connections", "created/s steady", "p99 ms"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}

// refused asserts that no child of this run still listens at addr. Ports
// are ephemeral: once a child has gone, another test's listener may bind
// the same port, so an address that still accepts is a failure only while
// a process running bin is left (or when that cannot be told).
func refused(t *testing.T, what, addr, bin string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return
	}
	c.Close()
	pids, known := running(bin)
	switch {
	case !known:
		t.Errorf("%s %s still accepts connections", what, addr)
	case len(pids) > 0:
		t.Errorf("%s %s still accepts connections, and processes %v still run %s", what, addr, pids, bin)
	default:
		t.Logf("%s %s accepts again, but no process runs %s: another listener took the port", what, addr, bin)
	}
}

// noChildren asserts that no process runs bin any more.
func noChildren(t *testing.T, bin string) {
	t.Helper()
	if pids, _ := running(bin); len(pids) > 0 {
		t.Errorf("processes %v still run %s", pids, bin)
	}
}

// running lists the processes whose executable is bin, from /proc; known
// is false where there is no /proc to read.
func running(bin string) (pids []int, known bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && strings.TrimSuffix(exe, " (deleted)") == bin {
			pids = append(pids, pid)
		}
	}
	return pids, true
}

// TestProcesses runs steps 0, 2 and 4 with real `corput origin` and
// `corput serve` children.
func TestProcesses(t *testing.T) {
	t.Parallel()
	o := small(t, StepPerRequest, StepPerLoop, StepSubset)
	o.Binary = testbin.Corput(t)
	o.StepDuration = 2 * time.Second
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	res := readResults(t, o.Out)
	if res.Mode != "processes" {
		t.Fatalf("mode %q", res.Mode)
	}
	steps := byID(t, res)
	checkCounts(t, o, steps)

	// Step 0: one connection per request, counted at both ends.
	s, l := steps[StepPerRequest].Summary, steps[StepPerRequest].Load
	if s.OriginStart != 0 || math.Abs(float64(s.OriginTotal-l.Requests)) > float64(l.Requests)/20+2 {
		t.Errorf("step 0: %d connections (%d before the load) for %d requests; want one per request", s.OriginTotal, s.OriginStart, l.Requests)
	}
	noChildren(t, o.Binary)
	for _, addr := range res.Origins {
		refused(t, "origin", addr, o.Binary)
	}
	for _, sr := range res.Steps {
		for _, addr := range sr.Gateways {
			refused(t, "gateway", addr, o.Binary)
		}
	}
}

// TestProcessesCancelled cancels a run in its first step: Run returns the
// context's error and every child is gone.
func TestProcessesCancelled(t *testing.T) {
	t.Parallel()
	o := small(t, StepPerLoop)
	o.Binary = testbin.Corput(t)
	o.StepDuration = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := Run(ctx, o)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v, want the context's deadline", err)
	}
	noChildren(t, o.Binary)
	logs, _ := filepath.Glob(filepath.Join(o.Out, "live-run", "*.log"))
	addrs := 0
	for _, path := range logs {
		text, _ := os.ReadFile(path)
		for _, re := range []*regexp.Regexp{originListening, gatewayServing} {
			if m := re.FindStringSubmatch(string(text)); m != nil {
				for _, a := range m[1:] {
					refused(t, filepath.Base(path), a, o.Binary)
					addrs++
				}
			}
		}
	}
	if want := o.Endpoints + 2*o.Gateways; addrs != want {
		t.Errorf("found %d listening addresses in the logs, want %d", addrs, want)
	}
}

var fullOut = flag.String("live.full", "", "run the full default live lab with a freshly built corput and write it to `DIR`")

// TestFullRun is the full-size run (about 2–3 minutes), only when asked:
//
//	go test ./internal/lab/live -run TestFullRun -live.full DIR -v -timeout 10m
func TestFullRun(t *testing.T) {
	if *fullOut == "" {
		t.Skip("pass -live.full DIR to run the full live lab")
	}
	o := Options{Out: *fullOut, Seed: 1, Binary: testbin.Corput(t), Stdout: os.Stdout}
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, Options{Gateways: DefaultGateways, Loops: DefaultLoops, Endpoints: DefaultEndpoints, SubsetSize: DefaultSubsetSize},
		byID(t, readResults(t, *fullOut)))
}

// TestRunningFindsThisProcess checks the leftover-child detector on a
// process known to run: this test binary.
func TestRunningFindsThisProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	pids, known := running(exe)
	if !known {
		t.Skip("no /proc")
	}
	if !slices.Contains(pids, os.Getpid()) {
		t.Errorf("running(%s) = %v, want it to include this process %d", exe, pids, os.Getpid())
	}
}
