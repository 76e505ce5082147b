package tracing

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/tracing/receiver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// seeded is an id source with a fixed seed.
func seeded(seed uint64) ids {
	s := ids{seeded: true}
	s.pcg.Seed(seed, seed^0x9e3779b97f4a7c15)
	return s
}

// TestRatioAgreesWithTheSDK: over 200 000 seeded trace ids, corput's rule
// samples each id exactly when the SDK's TraceIDRatioBased does, and the
// share sampled is the ratio within 5 standard deviations of a binomial
// draw (5·√(r(1−r)/n): ±0.0011 at r = 0.5, ±0.00022 at 0.01); ids right at
// the bound agree too.
func TestRatioAgreesWithTheSDK(t *testing.T) {
	const n = 200_000
	for _, f := range []float64{0, 0.0001, 0.01, 0.1, 0.5, 0.999, 1} {
		t.Run(fmt.Sprint(f), func(t *testing.T) {
			ours, sdk := newRatio(f), sdktrace.TraceIDRatioBased(f)
			agree := func(id trace.TraceID) bool {
				want := sdk.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: id}).Decision == sdktrace.RecordAndSample
				if got := ours.sampled(id); got != want {
					t.Errorf("trace %s: sampled %v, the SDK's TraceIDRatioBased(%g) %v", id, got, f, want)
					return false
				}
				return want
			}
			src := seeded(uint64(f*1e6) + 1)
			sampled := 0
			for range n {
				if agree(src.traceID()) {
					sampled++
				}
			}
			share, tol := float64(sampled)/n, 5*math.Sqrt(f*(1-f)/n)
			if math.Abs(share-f) > tol {
				t.Errorf("sampled %d of %d (%.5f), want %g ± %.5f", sampled, n, share, f, tol)
			}
			bound := uint64(f * (1 << 63))
			for _, x := range []uint64{0, bound - 1, bound, bound + 1, math.MaxUint64 >> 1} {
				var id trace.TraceID
				id[0] = 1
				binary.BigEndian.PutUint64(id[8:], x<<1|1) // the low bit is shifted out
				agree(id)
			}
		})
	}
}

// TestRemoteParentAgreesWithTheSDK: corput's traceparent reader accepts
// and rejects what the SDK's W3C propagator does, and reads the same ids,
// flags and tracestate.
func TestRemoteParentAgreesWithTheSDK(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, c := range []struct{ parent, state string }{
		{"00-" + tid + "-" + sid + "-01", ""},
		{"00-" + tid + "-" + sid + "-00", "vendor=abc,other=x"},
		{"00-" + tid + "-" + sid + "-03", ""},
		{"00-" + tid + "-" + sid + "-02", ""},
		{"00-" + tid + "-" + sid + "-04", ""},     // a reserved flag in version 00
		{"00-" + tid + "-" + sid + "-01-", ""},    // an empty extra field: what the SDK accepts
		{"00-" + tid + "-" + sid + "-01-xyz", ""}, // version 00 has no more fields
		{"01-" + tid + "-" + sid + "-09-xyz", ""}, // a later version may have them
		{"01-" + tid + "-" + sid + "-01xyz", ""},  // flags of three characters
		{"ff-" + tid + "-" + sid + "-01", ""},     // ff is no version
		{"fe-" + tid + "-" + sid + "-01", "a=b"},  // the last one
		{"00-" + strings.ToUpper(tid) + "-" + sid + "-01", ""},
		{"00-00000000000000000000000000000000-" + sid + "-01", ""},
		{"00-" + tid + "-0000000000000000-01", ""},
		{"00-" + tid[:31] + "-" + sid + "-01", ""},
		{"00-" + tid + "-" + sid + "1-01", ""},
		{"00-" + tid + "-" + sid, ""},
		{"0-" + tid + "-" + sid + "-01", ""},
		{"", "a=b"},
		{"00-" + tid + "-" + sid + "-01", "not a list entry!"},
		{"00-" + tid + "-" + sid + "-0g", ""},
	} {
		h := http.Header{}
		if c.parent != "" {
			h.Set("Traceparent", c.parent)
		}
		if c.state != "" {
			h.Set("Tracestate", c.state)
		}
		want := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h)))
		got := remoteParent(forward.HeaderFields(h))
		if !got.Equal(want) || got.IsValid() != want.IsValid() {
			t.Errorf("traceparent %q, tracestate %q: read %v, the SDK %v", c.parent, c.state, got, want)
		}
	}
	// Several tracestate lines are one list (the SDK's header carrier
	// reads the first only).
	h := http.Header{"Traceparent": {"00-" + tid + "-" + sid + "-01"}, "Tracestate": {"a=1", "b=2"}}
	if got := remoteParent(forward.HeaderFields(h)).TraceState().String(); got != "a=1,b=2" {
		t.Errorf("tracestate over two lines read as %q, want a=1,b=2", got)
	}
}

// countingTracer counts the spans asked of the SDK.
type countingTracer struct {
	trace.Tracer
	n *atomic.Int64
}

func (c countingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	c.n.Add(1)
	return c.Tracer.Start(ctx, name, opts...)
}

// newTestTracer is a Tracer exporting to a real receiver on loopback (gRPC),
// the spans it asks of the SDK counted in *starts.
func newTestTracer(t testing.TB, ratio float64) (tr *Tracer, rc *receiver.Receiver, starts *atomic.Int64, dropped prometheus.Counter) {
	t.Helper()
	rc, err := receiver.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	dropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"})
	tr, err = New(&config.Tracing{Endpoint: rc.GRPCAddr(), Protocol: config.TracingGRPC, SampleRatio: ratio}, Options{Dropped: dropped})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tr.Shutdown(ctx)
	})
	starts = new(atomic.Int64)
	tr.tracer = countingTracer{Tracer: tr.tracer, n: starts}
	return tr, rc, starts, dropped
}

// head parses a fast path request head with the given extra field lines.
func head(t testing.TB, fields string) *h1.Head {
	t.Helper()
	h := new(h1.Head)
	raw := []byte("GET /x HTTP/1.1\r\nHost: gw.test:8080\r\nUser-Agent: t\r\n" + fields + "\r\n")
	if _, res := h1.ParseRequest(raw, h); res != h1.Complete {
		t.Fatalf("the test's head does not parse: %v", res)
	}
	return h
}

// exchange is one request's spans as the fast path drives them: Begin, two
// attempts (the first failing), their trace context fields, End. It
// returns each attempt's traceparent, in parents.
type exchange struct {
	tr      *Tracer
	h       forward.Prior
	trusted bool
	r       Request
	a       forward.Attempt
	parents [2][55]byte
	at      int
	set     func(string, []byte)
}

func newExchange(tr *Tracer, h forward.Prior, trusted bool) *exchange {
	e := &exchange{tr: tr, h: h, trusted: trusted}
	e.set = func(name string, v []byte) {
		if name == "Traceparent" {
			copy(e.parents[e.at][:], v)
		}
	}
	return e
}

func (e *exchange) run() {
	e.tr.Begin(&e.r, e.h, e.trusted, Inbound{Method: "GET", Path: "/x", Host: "gw.test:8080", Peer: "127.0.0.1:5000", Proto: "1.1"})
	for e.at = 0; e.at < 2; e.at++ {
		e.r.StartAttempt("app", 0, e.at+1, "127.0.0.1:9000")
		e.r.Acquired()
		e.r.Fields(e.set)
		e.r.EndAttempt(&e.a, []forward.Step{forward.Again, forward.Delivered}[e.at])
	}
	e.r.End(200, forward.None, "app", 0, 2)
}

// parsed reads a traceparent as the SDK's propagator does.
func parsed(t *testing.T, b [55]byte) trace.SpanContext {
	t.Helper()
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.HeaderCarrier(http.Header{"Traceparent": {string(b[:])}})))
	if !sc.IsValid() {
		t.Fatalf("traceparent %q does not parse", b[:])
	}
	return sc
}

// unsampledSeed is a seed whose next n trace ids ratio r does not sample.
func unsampledSeed(r ratio, n int) uint64 {
	for seed := uint64(1); ; seed++ {
		src, ok := seeded(seed), true
		for i := 0; i < n && ok; i++ {
			ok = !r.sampled(src.traceID())
			src.spanID() // a request's attempts draw span ids from the source too
			src.spanID()
		}
		if ok {
			return seed
		}
	}
}

// TestUnsampledRequestsTouchNoSDK: at sample_ratio 0.01, requests that
// are not sampled start no SDK span and allocate nothing (the fast path's
// tracing calls, two attempts each), and each attempt's traceparent parses
// with flags 00, one trace id per request and a span id per attempt.
func TestUnsampledRequestsTouchNoSDK(t *testing.T) {
	tr, _, starts, dropped := newTestTracer(t, 0.01)
	e := newExchange(tr, head(t, ""), false)
	const runs = 200
	e.r.ids = seeded(unsampledSeed(tr.ratio, runs+1)) // AllocsPerRun runs once more to warm up
	tids := make([]trace.TraceID, 0, 3)
	check := e.set
	e.set = func(name string, v []byte) {
		check(name, v)
		if e.at == 1 && len(tids) < 3 {
			tids = append(tids, e.r.TraceID())
		}
	}
	if allocs := testing.AllocsPerRun(runs, e.run); allocs != 0 {
		t.Errorf("an unsampled request: %v allocs, want 0", allocs)
	}
	if n := starts.Load(); n != 0 {
		t.Errorf("unsampled requests asked the SDK for %d spans, want 0", n)
	}
	if d := testutil.ToFloat64(dropped); d != 0 {
		t.Errorf("unsampled requests counted %v spans dropped, want 0", d)
	}
	first, second := parsed(t, e.parents[0]), parsed(t, e.parents[1])
	if first.IsSampled() || second.IsSampled() || first.TraceID() != second.TraceID() || first.SpanID() == second.SpanID() {
		t.Errorf("the attempts' traceparents %s and %s: want flags 00, one trace, two spans", e.parents[0][:], e.parents[1][:])
	}
	if tids[0] == tids[1] || tids[1] == tids[2] {
		t.Errorf("successive requests share a trace id: %v", tids)
	}
}

// TestShedRequestsTouchNoSDK: at sample_ratio 1 with the export queue
// full, a request starts no SDK span and allocates nothing; each of its
// spans is counted as dropped, and its traceparents say sampled (01), in
// one trace. Once the queue has room, requests are recorded again.
func TestShedRequestsTouchNoSDK(t *testing.T) {
	tr, rc, starts, dropped := newTestTracer(t, 1)
	tr.q.n.Store(QueueSize)
	e := newExchange(tr, head(t, ""), false)
	const runs = 200
	if allocs := testing.AllocsPerRun(runs, e.run); allocs != 0 {
		t.Errorf("a shed request: %v allocs, want 0", allocs)
	}
	if n := starts.Load(); n != 0 {
		t.Errorf("shed requests asked the SDK for %d spans, want 0", n)
	}
	if d, want := testutil.ToFloat64(dropped), float64(3*(runs+1)); d != want {
		t.Errorf("%v spans counted dropped, want %v (a server and two client spans a request)", d, want)
	}
	first, second := parsed(t, e.parents[0]), parsed(t, e.parents[1])
	if !first.IsSampled() || !second.IsSampled() || first.TraceID() != second.TraceID() || first.SpanID() == second.SpanID() {
		t.Errorf("the attempts' traceparents %s and %s: want flags 01, one trace, two spans", e.parents[0][:], e.parents[1][:])
	}

	tr.q.n.Store(0)
	e.run()
	if n := starts.Load(); n != 3 {
		t.Errorf("with room in the queue a sampled request asked the SDK for %d spans, want 3", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{} // span id → parent id
	for _, s := range rc.Spans() {
		got[s.SpanID] = s.ParentID
	}
	sc := parsed(t, e.parents[1])
	server, ok := got[sc.SpanID().String()]
	if root, isSpan := got[server]; !ok || !isSpan || root != "" || !sc.IsSampled() {
		t.Errorf("the exported spans %v: want the origin's parent %s a child of the root server span", got, e.parents[1][:])
	}
}

// TestTrustedParentDecides: a trusted parent's sampled flag decides,
// whatever sample_ratio says — sampled at ratio 0 (recorded, its trace
// and tracestate continued), unsampled at ratio 1 (no SDK span) — and an
// untrusted one starts a new trace that ratio 0 does not sample.
func TestTrustedParentDecides(t *testing.T) {
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, c := range []struct {
		name    string
		ratio   float64
		flags   string
		trusted bool
		want    bool // sampled
	}{
		{"trusted sampled, ratio 0", 0, "01", true, true},
		{"trusted unsampled, ratio 1", 1, "00", true, false},
		{"untrusted sampled, ratio 0", 0, "01", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, _, starts, _ := newTestTracer(t, c.ratio)
			e := newExchange(tr, head(t, "Traceparent: 00-"+tid+"-00f067aa0ba902b7-"+c.flags+"\r\nTracestate: v=1\r\n"), c.trusted)
			var state string
			set := e.set
			e.set = func(name string, v []byte) {
				set(name, v)
				if name == "Tracestate" {
					state = string(v)
				}
			}
			e.run()
			sc := parsed(t, e.parents[1])
			if sc.IsSampled() != c.want || (sc.TraceID().String() == tid) != c.trusted {
				t.Errorf("the origin's traceparent %s: want sampled %v, the client's trace continued %v", e.parents[1][:], c.want, c.trusted)
			}
			if wantStarts := map[bool]int64{true: 3, false: 0}[c.want]; starts.Load() != wantStarts {
				t.Errorf("%d SDK spans, want %d", starts.Load(), wantStarts)
			}
			if (state == "v=1") != c.trusted {
				t.Errorf("tracestate upstream %q (trusted %v)", state, c.trusted)
			}
		})
	}
}

// BenchmarkRequest is one request's tracing calls on the fast path (Begin,
// two attempts with their trace context fields, End): unsampled (ratio 0,
// the path of 99 % of requests at the default 0.01), shed (ratio 1, the
// queue full: a blackholed receiver), and recorded (ratio 1, the queue's
// count emptied every op; spans exported to a receiver in this process).
func BenchmarkRequest(b *testing.B) {
	for _, c := range []struct {
		name  string
		ratio float64
		queue int64
	}{{"unsampled", 0, 0}, {"shed", 1, QueueSize}, {"recorded", 1, 0}} {
		b.Run(c.name, func(b *testing.B) {
			tr, _, _, _ := newTestTracer(b, c.ratio)
			e := newExchange(tr, head(b, ""), false)
			b.ReportAllocs()
			for b.Loop() {
				tr.q.n.Store(c.queue)
				e.run()
			}
		})
	}
}
