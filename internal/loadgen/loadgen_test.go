package loadgen

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fastMix is the 70/30 mix with latencies short enough for tests.
func fastMix() workload.Mix {
	return workload.Mix{Classes: []workload.Class{
		{Name: "light", Percent: 70, Latency: time.Millisecond},
		{Name: "heavy", Percent: 30, Latency: 3 * time.Millisecond},
	}}
}

func startOrigin(t *testing.T, o origin.Options) *origin.Server {
	t.Helper()
	s, err := origin.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRunAgainstARealOrigin(t *testing.T) {
	mix := fastMix()
	srv := startOrigin(t, origin.Options{Classes: mix.Classes, ID: "o1"})
	const seed, rate, dur = 3, 200.0, 1500 * time.Millisecond
	progress := 0
	rep, err := Run(context.Background(), Options{
		Target: srv.URL(), Rate: rate, Duration: dur, Mix: mix, Seed: seed,
		Progress: func(Progress) { progress++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	n := rep.Requests
	// The schedule is fixed by the seed: at most the arrivals due by the
	// end (plus the one in flight at the deadline) are sent.
	due := int64(0)
	for _, a := range arrivals(rate, seed, 1000) {
		if a <= dur {
			due++
		}
	}
	if n > due+1 || n < due/2 {
		t.Fatalf("sent %d requests, %d were due", n, due)
	}
	if rep.Answered != n || rep.SuccessRatio != 1 || rep.StatusCodes["200"] != n || len(rep.StatusCodes) != 1 {
		t.Fatalf("report %+v", rep)
	}
	// The class sequence replays from the seed, and the origin counted
	// exactly what the report says it sent.
	draws := rng.New(rng.Mix64(seed))
	wantHeavy := int64(0)
	for range n {
		if mix.Pick(draws.Float64()).Name == "heavy" {
			wantHeavy++
		}
	}
	st := srv.Stats()
	byName := map[string]ClassReport{}
	for _, c := range rep.Classes {
		byName[c.Name] = c
	}
	light, heavy := byName["light"], byName["heavy"]
	if heavy.Requests != wantHeavy || light.Requests != n-wantHeavy {
		t.Fatalf("heavy %d light %d, seed replay says heavy %d of %d", heavy.Requests, light.Requests, wantHeavy, n)
	}
	if st.Requests["heavy"].OK != heavy.Requests || st.Requests["light"].OK != light.Requests || st.Total().Total() != n {
		t.Fatalf("origin counted %+v, report says light %d heavy %d", st.Requests, light.Requests, heavy.Requests)
	}
	if rep.Origins["o1"] != n {
		t.Fatalf("origins %v, want o1=%d", rep.Origins, n)
	}
	for _, c := range []struct {
		name string
		l    Latency
		min  float64
	}{{"light", light.Latency, 1}, {"heavy", heavy.Latency, 3}, {"overall", *rep.Overall, 1}} {
		if c.l.P50 < c.min || c.l.P50 > c.l.P90 || c.l.P90 > c.l.P99 || c.l.P99 > c.l.Max {
			t.Errorf("%s latency %+v: want %vms ≤ p50 ≤ p90 ≤ p99 ≤ max", c.name, c.l, c.min)
		}
	}
	if rep.Overall.Count != int(n) || rep.Throughput <= 0 {
		t.Fatalf("overall %+v throughput %v", rep.Overall, rep.Throughput)
	}
	if progress == 0 {
		t.Error("a 1.5 s run never reported progress")
	}
	js, _ := json.Marshal(rep)
	for _, key := range []string{`"p50_ms"`, `"p90_ms"`, `"p99_ms"`, `"max_ms"`, `"success_ratio"`, `"status_codes"`} {
		if !bytes.Contains(js, []byte(key)) {
			t.Errorf("JSON report lacks %s", key)
		}
	}
	if bytes.Contains(js, []byte("mean")) || bytes.Contains(js, []byte("avg")) {
		t.Errorf("JSON report carries an average: %s", js)
	}
	var text bytes.Buffer
	rep.Format(&text)
	for _, want := range []string{"p99 ms", "light", "heavy", "overall", "origins o1="} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}

func TestUniformMixRefused(t *testing.T) {
	srv := startOrigin(t, origin.Options{})
	uniform, _ := workload.Load("uniform")
	_, err := Run(context.Background(), Options{Target: srv.URL(), Rate: 100, Duration: time.Second, Mix: uniform})
	if !errors.Is(err, workload.ErrNoSkew) || !strings.Contains(err.Error(), workload.CodeNoSkew) || !strings.Contains(err.Error(), "raw") {
		t.Fatalf("uniform mix: %v", err)
	}
	if got := srv.Stats().Connections.Accepted; got != 0 {
		t.Fatalf("a refused run opened %d connections", got)
	}
}

func TestRawClosedLoop(t *testing.T) {
	srv := startOrigin(t, origin.Options{Profile: "raw"})
	const conns = 4
	uniform, _ := workload.Load("uniform")
	rep, err := Run(context.Background(), Options{Target: srv.URL() + "/ping", Raw: true, Duration: 300 * time.Millisecond, Connections: conns, Mix: uniform})
	if err != nil {
		t.Fatal(err)
	}
	st := srv.Stats()
	if !rep.Raw || !strings.Contains(rep.Note, "not evidence") || rep.Overall != nil || rep.Classes != nil {
		t.Fatalf("raw report must carry throughput only and its label: %+v", rep)
	}
	if rep.Requests == 0 || rep.Throughput <= 0 || st.Requests[origin.RawClass].OK != rep.Requests {
		t.Fatalf("raw: report %d requests, origin %d", rep.Requests, st.Requests[origin.RawClass].OK)
	}
	if st.Concurrency.Max > conns || st.Connections.Accepted > conns {
		t.Fatalf("closed loop over %d connections: origin saw %d concurrent, %d connections", conns, st.Concurrency.Max, st.Connections.Accepted)
	}
	var text bytes.Buffer
	rep.Format(&text)
	if !strings.HasPrefix(text.String(), "RAW THROUGHPUT TEST") || strings.Contains(text.String(), "p99") {
		t.Fatalf("raw text report:\n%s", text.String())
	}
}

func TestFailuresAreCountedNotHidden(t *testing.T) {
	failing := startOrigin(t, origin.Options{Classes: fastMix().Classes, ErrorRate: 1})
	rep, err := Run(context.Background(), Options{Target: failing.URL(), Rate: 200, Duration: 200 * time.Millisecond, Mix: fastMix()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests == 0 || rep.SuccessRatio != 0 || rep.StatusCodes["500"] != rep.Requests || rep.Overall.Count != int(rep.Requests) {
		t.Fatalf("always-500 origin: %+v", rep)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	rep, err = Run(context.Background(), Options{Target: closed, Rate: 200, Duration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests == 0 || rep.Answered != 0 || rep.StatusCodes["0"] != rep.Requests || len(rep.Errors) == 0 || rep.Overall.Count != 0 {
		t.Fatalf("refused connections: %+v", rep)
	}
	for msg := range rep.Errors {
		if strings.Contains(msg, closed) || !strings.Contains(msg, "refused") {
			t.Errorf("error kind %q: want the cause, without the URL", msg)
		}
	}
}

func TestH2CAndTLS(t *testing.T) {
	h2c := startOrigin(t, origin.Options{Proto: origin.H2C, Classes: fastMix().Classes})
	rep, err := Run(context.Background(), Options{Target: h2c.URL(), Proto: "h2c", Rate: 200, Duration: 200 * time.Millisecond, Mix: fastMix()})
	if err != nil || rep.Requests == 0 || rep.SuccessRatio != 1 || h2c.Stats().Total().OK != rep.Requests {
		t.Fatalf("h2c: %+v %v", rep, err)
	}
	// Go's transport may dial a second connection when requests start
	// before the first is ready (a starved CPU makes that likely), so the
	// bound is a few connections for dozens of requests, not exactly one.
	if got := h2c.Stats().Connections.Accepted; got > 3 {
		t.Fatalf("h2c multiplexes: %d connections for %d requests, want at most 3", got, rep.Requests)
	}

	tlsSrv := startOrigin(t, origin.Options{Proto: origin.TLS, Classes: fastMix().Classes})
	rep, err = Run(context.Background(), Options{Target: tlsSrv.URL(), Proto: "h2", TLS: &tls.Config{RootCAs: tlsSrv.CertPool()}, Rate: 200, Duration: 200 * time.Millisecond})
	if err != nil || rep.Requests == 0 || rep.SuccessRatio != 1 {
		t.Fatalf("TLS h2: %+v %v", rep, err)
	}
}

func TestCanceledRunReturnsPartialReport(t *testing.T) {
	srv := startOrigin(t, origin.Options{Classes: fastMix().Classes})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := Run(ctx, Options{Target: srv.URL(), Rate: 100, Duration: time.Hour, Mix: fastMix()})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if rep.Requests != srv.Stats().Total().Total() {
		t.Fatalf("partial report %d requests, origin saw %d", rep.Requests, srv.Stats().Total().Total())
	}
}

func TestOptionsChecked(t *testing.T) {
	for name, o := range map[string]Options{
		"target":   {Target: "127.0.0.1:80", Rate: 1, Duration: time.Second},
		"scheme":   {Target: "ftp://x", Rate: 1, Duration: time.Second},
		"duration": {Target: "http://x", Rate: 1},
		"rate":     {Target: "http://x", Duration: time.Second},
		"negative": {Target: "http://x", Rate: -1, Duration: time.Second, Raw: true},
		"proto":    {Target: "http://x", Rate: 1, Duration: time.Second, Proto: "h3"},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%s: accepted %+v", name, o)
		}
	}
}

func TestLatencyPercentiles(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if l := latencyOf(d); l != (Latency{Count: 100, P50: 50, P90: 90, P99: 99, Max: 100}) {
		t.Fatalf("1..100 ms: %+v", l)
	}
	if l := latencyOf([]time.Duration{7 * time.Millisecond}); l != (Latency{Count: 1, P50: 7, P90: 7, P99: 7, Max: 7}) {
		t.Fatalf("one sample: %+v", l)
	}
	if l := latencyOf(nil); l != (Latency{}) {
		t.Fatalf("no samples: %+v", l)
	}
}

func TestFlags(t *testing.T) {
	parse := func(args ...string) (Options, error) {
		fs := flag.NewFlagSet("load", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := BindFlags(fs)
		if err := fs.Parse(args); err != nil {
			return Options{}, err
		}
		return f.Options()
	}
	o, err := parse("--target", "http://h", "--rate", "300", "--duration", "12s", "--seed", "9")
	if err != nil || o.Rate != 300 || o.Duration != 12*time.Second || o.Seed != 9 || len(o.Mix.Classes) != 2 {
		t.Fatalf("%+v %v", o, err)
	}
	if _, err := parse("--workload", "nope"); err == nil {
		t.Fatal("unknown workload accepted")
	}
	if o, err := parse("--raw", "--workload", "nope"); err != nil || !o.Raw {
		t.Fatalf("--raw ignores the workload: %v", err)
	}
	if _, err := parse("--ca", "/nonexistent.pem"); err == nil {
		t.Fatal("missing CA file accepted")
	}
}
