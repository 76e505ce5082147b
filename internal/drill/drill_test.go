package drill

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/testbin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testbin.M(m)) }

var strict = flag.Bool("drill.strict", false, "fail on the known gaps too (see knownGaps)")

// knownGaps are checks the gateway does not keep yet, with the reason
// (docs/reliability.md, "Known gaps"). Tests log them; -drill.strict fails
// on them.
var knownGaps = map[string]string{}

// runShort runs a drill's short version and fails on any check that does
// not depend on the machine.
func runShort(t *testing.T, name string, o Options) *Result {
	t.Helper()
	r, err := Run(context.Background(), name, o)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r.Format(&out)
	for _, c := range r.Failed(false) {
		if why, known := knownGaps[name+"/"+c.Name]; known && !*strict {
			t.Logf("known gap %q: want %s, got %s (%s)", c.Name, c.Want, c.Got, why)
			continue
		}
		t.Errorf("check %q: want %s, got %s\n%s", c.Name, c.Want, c.Got, out.String())
	}
	if testing.Verbose() {
		t.Log("\n" + out.String())
	}
	return r
}

func TestCrash(t *testing.T) {
	for _, netHTTP := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast path", true: "net/http path"}[netHTTP], func(t *testing.T) {
			r := runShort(t, "crash", Options{Duration: 2 * time.Second, NetHTTP: netHTTP})
			if len(r.Faults) != 1 || r.Load.Sent == 0 {
				t.Fatalf("the crash did not happen under load: faults %v, %d sent", r.Faults, r.Load.Sent)
			}
			if want := servingPath(Options{NetHTTP: netHTTP}); r.Setup.Path != want {
				t.Fatalf("served on the %s, want the %s", r.Setup.Path, want)
			}
		})
	}
}

// TestCrashSmallFleet is the crash with four origins: losing one leaves
// 75% healthy, under the 80% panic threshold, so the dead endpoint stays in
// rotation; it fails at once and so looks cheapest to peak EWMA, and the
// retry budget cannot cover what it attracts (about 20% errors measured).
// A known gap: it runs with -drill.strict.
func TestCrashSmallFleet(t *testing.T) {
	if !*strict {
		t.Skip("known gap (docs/reliability.md): run with -drill.strict")
	}
	runShort(t, "crash", Options{Duration: 2 * time.Second, Origins: 4})
}

func TestBlackhole(t *testing.T) {
	r := runShort(t, "blackhole", Options{Duration: 2500 * time.Millisecond})
	if r.Load.Reasons["upstream_timeout"] == 0 {
		t.Fatalf("no request found the black hole: %v", r.Load.Reasons)
	}
}

func TestOverload(t *testing.T) {
	r := runShort(t, "overload", Options{Duration: 2 * time.Second})
	if r.Setup.Rate < 2.9*r.Setup.CapacityRPS {
		t.Fatalf("offered %.0f req/s against a capacity of %.0f: not 3×", r.Setup.Rate, r.Setup.CapacityRPS)
	}
}

func TestDeploy(t *testing.T) {
	r := runShort(t, "deploy", Options{Duration: 3 * time.Second})
	if d := r.Deploy; d == nil || d.Jitter.Reconnected == 0 || d.NoJitter.Reconnected == 0 {
		t.Fatalf("no reconnection measured: %+v", r.Deploy)
	}
}

func TestSoak(t *testing.T) {
	runShort(t, "soak", Options{Duration: 2 * time.Second, Rate: 80})
}

func TestRunRefusesUnknownDrillsAndNegativeOptions(t *testing.T) {
	if _, err := Run(context.Background(), "flood", Options{}); err == nil || !strings.Contains(err.Error(), "crash, blackhole") {
		t.Errorf("unknown drill: %v, want the list of drills", err)
	}
	if _, err := Run(context.Background(), "crash", Options{Rate: -1}); err == nil {
		t.Error("a negative rate was accepted")
	}
}

func TestPeakWithin(t *testing.T) {
	at := func(ms ...int) []time.Time {
		base := time.Unix(0, 0)
		var out []time.Time
		for _, m := range ms {
			out = append(out, base.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	for _, c := range []struct {
		ts   []time.Time
		want int
	}{
		{nil, 0},
		{at(5), 1},
		{at(0, 10, 19, 20, 21, 100), 4}, // 10, 19, 20, 21 within 20ms
		{at(100, 0, 50), 1},
	} {
		if got := peakWithin(c.ts, 20*time.Millisecond); got != c.want {
			t.Errorf("peakWithin(%v) = %d, want %d", c.ts, got, c.want)
		}
	}
}

func TestPoolOverrideReplacesKeysByName(t *testing.T) {
	s := fleetSpec{pool: []string{"max_connections: 2", "acquire_timeout: 1s"}, poolOverride: splitKeys(" acquire_timeout: 100ms, over_cap: reject ,")}
	got := strings.Join(s.poolKeys(), ", ")
	if want := "max_connections: 2, acquire_timeout: 100ms, over_cap: reject"; got != want {
		t.Fatalf("pool keys %q, want %q", got, want)
	}
}

func TestPercentilesNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	p := percentiles(d)
	if p.Count != 100 || p.P50 != 50 || p.P90 != 90 || p.P99 != 99 || p.Max != 100 {
		t.Fatalf("%+v", p)
	}
	if percentiles(nil).Count != 0 {
		t.Fatal("empty")
	}
}

// TestFDFlood runs the fdflood drill against the built corput binary: the
// gateway process runs out of descriptors, and serves again once the flood
// is gone, on the fast path and on the net/http path.
func TestFDFlood(t *testing.T) {
	bin := testbin.Corput(t)
	for _, netHTTP := range []bool{false, true} {
		name := "fast path"
		if netHTTP {
			name = "net/http path"
		}
		t.Run(name, func(t *testing.T) {
			r := runShort(t, "fdflood", Options{Duration: time.Second, Binary: bin, NetHTTP: netHTTP})
			if f := r.Flood; f == nil || f.AcceptErrors["fd_limit"] == 0 {
				t.Fatalf("the flood never reached the limit: %+v", f)
			}
		})
	}
}
