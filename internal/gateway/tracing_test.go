package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/corput/corput/internal/config"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/tracing/receiver"
	"github.com/corput/corput/internal/waitfor"
)

// seen records the traceparent and tracestate each request reached the
// origin with, by X-Req.
type seen struct {
	mu     sync.Mutex
	parent map[string]string
	state  map[string]string
}

func traceOrigin(t *testing.T) (*backend, *seen) {
	s := &seen{parent: map[string]string{}, state: map[string]string{}}
	b := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.parent[r.Header.Get("X-Req")] = strings.Join(r.Header.Values("Traceparent"), "|")
		s.state[r.Header.Get("X-Req")] = strings.Join(r.Header.Values("Tracestate"), "|")
		s.mu.Unlock()
	}))
	return b, s
}

func (s *seen) get(id string) (parent, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parent[id], s.state[id]
}

// tracedGet sends GET / with X-Req: id and the given extra headers, and
// wants a 200.
func tracedGet(t *testing.T, c *http.Client, addr, id string, h map[string]string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Header.Set("X-Req", id)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s, want 200", id, resp.StatusCode, resp.Header.Get("X-Corput-Error"))
	}
}

// flush shuts g down gracefully, so that its last spans are exported.
func flush(t *testing.T, g *Gateway) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

const (
	clientTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientParent = "00-" + clientTrace + "-00f067aa0ba902b7-01"
)

// TestTracingRetriedRequestShowsBothAttempts: a real OTLP receiver (gRPC
// and HTTP), both serving paths. Round robin over a refusing endpoint and
// a live one: a request that meets the refusing one first is retried, and
// its trace is one server span with two client spans as children — the
// first ending in connect_failed, the second delivered — and the
// traceparent that reached the origin is the second client span's.
func TestTracingRetriedRequestShowsBothAttempts(t *testing.T) {
	rc, err := receiver.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for _, p := range requestPaths {
		for _, proto := range []string{"grpc", "http"} {
			t.Run(p.name+"/"+proto, func(t *testing.T) {
				addr := rc.GRPCAddr()
				if proto == "http" {
					addr = rc.HTTPAddr()
				}
				live, origin := traceOrigin(t)
				top := p.top + fmt.Sprintf("tracing: {endpoint: %q, protocol: %s, sample_ratio: 1.0, headers: {X-Api-Key: k-%s}}\n", addr, proto, p.name)
				g := startGateway(t, top+withEndpoints(cfgText(1, unsentKeys), deadAddr(t), live.addr), nil, Options{Seed: 1})
				c := downstream(t, dsH1, nil)
				ids := []string{p.name + proto + "-0", p.name + proto + "-1", p.name + proto + "-2", p.name + proto + "-3"}
				for _, id := range ids {
					tracedGet(t, c, g.Addr(), id, nil)
				}
				flush(t, g)
				checkRetriedTraces(t, rc.Spans(), origin, ids, proto)
				var keyed bool
				for _, h := range rc.Headers() {
					keyed = keyed || strings.Join(h["x-api-key"], ",") == "k-"+p.name
				}
				if !keyed {
					t.Errorf("no export carried tracing.headers' X-Api-Key")
				}
			})
		}
	}
}

func checkRetriedTraces(t *testing.T, spans []receiver.Span, origin *seen, ids []string, proto string) {
	t.Helper()
	byTrace := map[string][]receiver.Span{}
	for _, s := range spans {
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	retried := 0
	for _, id := range ids {
		parent, _ := origin.get(id)
		f := strings.Split(parent, "-")
		if len(f) != 4 {
			t.Fatalf("%s reached the origin with traceparent %q", id, parent)
		}
		trace := byTrace[f[1]]
		var server receiver.Span
		var clients []receiver.Span
		for _, s := range trace {
			switch s.Kind {
			case tracepb.Span_SPAN_KIND_SERVER:
				server = s
			case tracepb.Span_SPAN_KIND_CLIENT:
				clients = append(clients, s)
			}
		}
		if server.SpanID == "" || server.ParentID != "" {
			t.Fatalf("%s: trace %s has no root server span: %+v", id, f[1], trace)
		}
		if server.Protocol != proto || server.Service != "corput" {
			t.Errorf("%s: server span came over %s from %q", id, server.Protocol, server.Service)
		}
		if server.Attrs["http.request.method"] != "GET" || server.Attrs["url.path"] != "/" || server.Attrs["http.response.status_code"] != "200" ||
			server.Attrs["corput.origin"] != "app" || server.Attrs["corput.attempts"] != fmt.Sprint(len(clients)) {
			t.Errorf("%s: server span attributes %v (%d client spans)", id, server.Attrs, len(clients))
		}
		last := clients[len(clients)-1]
		for i, cs := range clients {
			if cs.ParentID != server.SpanID {
				t.Errorf("%s: client span %d's parent is %s, want the server span %s", id, i, cs.ParentID, server.SpanID)
			}
			if cs.Attrs["corput.attempt"] == fmt.Sprint(len(clients)) {
				last = cs
			}
		}
		if last.SpanID != f[2] {
			t.Errorf("%s: the origin saw parent span %s, want the last attempt's client span %s", id, f[2], last.SpanID)
		}
		if last.Attrs["corput.outcome"] != "delivered" || last.Attrs["http.response.status_code"] != "200" || last.Attrs["corput.queue_wait_ms"] == "" {
			t.Errorf("%s: the delivering attempt's attributes %v", id, last.Attrs)
		}
		if len(clients) == 2 {
			retried++
			first := clients[0]
			if first.Attrs["corput.attempt"] == "2" {
				first = clients[1]
			}
			if first.Attrs["corput.reason"] != "connect_failed" || first.Attrs["corput.outcome"] != "again" || !first.Error ||
				first.Attrs["corput.endpoint"] == last.Attrs["corput.endpoint"] {
				t.Errorf("%s: the first attempt's span %+v, the second's endpoint %s", id, first, last.Attrs["corput.endpoint"])
			}
		}
	}
	if retried == 0 {
		t.Fatalf("no request met the refusing endpoint first: the test proves nothing (%d spans)", len(spans))
	}
}

// TestTraceparentTrustedOnlyFromTrustedProxies: a client's traceparent
// continues its trace only from a trusted proxy; from anyone else the
// request starts a new trace, and the origin never sees the client's. With
// tracing off the headers pass through unchanged.
func TestTraceparentTrustedOnlyFromTrustedProxies(t *testing.T) {
	rc, err := receiver.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	in := map[string]string{"Traceparent": clientParent, "Tracestate": "vendor=abc"}
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast_path=%v", fast), func(t *testing.T) {
			for _, c := range []struct {
				name, trusted string
				off           bool
				wantSameTrace bool
			}{
				{"trusted", ", trusted_proxies: [127.0.0.0/8]", false, true},
				{"untrusted", "", false, false},
				{"off", ", trusted_proxies: [127.0.0.0/8]", true, true},
			} {
				top := fmt.Sprintf("downstream: {fast_path: %v%s}\n", fast, c.trusted)
				if !c.off {
					top += fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: 0}\n", rc.GRPCAddr())
				}
				live, origin := traceOrigin(t)
				g := startGateway(t, top+withEndpoints(cfgText(1, ""), live.addr), nil, Options{})
				tracedGet(t, downstream(t, dsH1, nil), g.Addr(), c.name, in)
				parent, state := origin.get(c.name)
				f := strings.Split(parent, "-")
				switch {
				case c.off:
					if parent != clientParent || state != "vendor=abc" {
						t.Errorf("off: the origin saw %q %q, want the client's headers unchanged", parent, state)
					}
				case len(f) != 4:
					t.Errorf("%s: the origin saw traceparent %q", c.name, parent)
				case c.wantSameTrace:
					// sample_ratio 0: the trusted parent's sampled flag decides.
					if f[1] != clientTrace || f[2] == "00f067aa0ba902b7" || f[3] != "01" || state != "vendor=abc" {
						t.Errorf("trusted: the origin saw %q %q, want the client's trace continued (sampled, its tracestate kept) under a span of corput's", parent, state)
					}
				default:
					if f[1] == clientTrace || f[3] != "00" || state != "" {
						t.Errorf("untrusted: the origin saw %q %q, want a new unsampled trace and no tracestate", parent, state)
					}
				}
				g.Close()
			}
		})
	}
}

// TestTracingBlackholedReceiverNeverFailsRequests: with every request
// sampled and a receiver that accepts and never answers, requests all
// succeed and the spans that do not fit the queue are counted as dropped.
func TestTracingBlackholedReceiverNeverFailsRequests(t *testing.T) {
	bh, err := receiver.StartBlackhole()
	if err != nil {
		t.Fatal(err)
	}
	defer bh.Close()
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			live, _ := traceOrigin(t)
			top := p.top + fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: 1.0}\n", bh.Addr())
			// A long acquire_timeout: on a loaded machine (-race, the whole
			// suite at once) a 100 ms wait for a stream is not tracing's.
			g := startGateway(t, top+withEndpoints(cfgText(2, "    pool: {acquire_timeout: 5s}\n"), live.addr), nil, Options{})
			dropped := g.metrics.TracingSpansDropped
			before := testutil.ToFloat64(dropped)
			var failed atomic.Int64
			var why sync.Map // a failure's error or status → true
			var wg sync.WaitGroup
			const clients, each = 8, 200 // 3200 spans: past the queue and the batch in flight
			for i := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := downstream(t, dsH1, nil)
					for j := range each {
						req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s/?c=%d&r=%d", g.Addr(), i, j), nil)
						resp, err := c.Do(req)
						if err != nil {
							failed.Add(1)
							why.Store(err.Error(), true)
							continue
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							failed.Add(1)
							why.Store(fmt.Sprint(resp.StatusCode, " ", resp.Header.Get("X-Corput-Error")), true)
						}
					}
				}()
			}
			wg.Wait()
			if n := failed.Load(); n > 0 {
				var reasons []string
				why.Range(func(k, _ any) bool { reasons = append(reasons, k.(string)); return true })
				t.Errorf("%d of %d requests failed with the receiver blackholed: %q", n, clients*each, reasons)
			}
			waitfor.Until(t, "the exporter to reach the blackhole", func() bool { return bh.Accepted() > 0 })
			if got := testutil.ToFloat64(dropped) - before; got < 1 {
				t.Errorf("corput_tracing_spans_dropped_total rose by %v, want spans dropped (the queue holds %d)", got, 2048)
			}
		})
	}
}

// exported waits until request id's server span has reached rc. A
// request's server span ends after its response reached the client, and
// a Tracer retired before that never exports it: a test that retires the
// Tracer of a request it just made waits for the batch timer to send it.
func exported(t *testing.T, rc *receiver.Receiver, origin *seen, id string) {
	t.Helper()
	parent, _ := origin.get(id)
	waitfor.Until(t, "request "+id+"'s server span to reach the receiver", func() bool {
		for _, s := range rc.Spans() {
			if s.Kind == tracepb.Span_SPAN_KIND_SERVER && strings.Contains(parent, s.TraceID) {
				return true
			}
		}
		return false
	})
}

// TestAFleetMoveRenamesTheTracesInstance: spans carry the gateway's
// fleet instance as service.instance.id; a reload that moves the instance
// replaces the Tracer (the id is the resource's, fixed per Tracer), and
// the next request's spans carry the new one.
func TestAFleetMoveRenamesTheTracesInstance(t *testing.T) {
	rc, err := receiver.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	live, origin := traceOrigin(t)
	text := func(instance int) string {
		return fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: 1.0}\nfleet: {instance: %d, size: 2}\n", rc.GRPCAddr(), instance) +
			withEndpoints(cfgText(1, ""), live.addr)
	}
	g := startGateway(t, text(0), nil, Options{})
	c := downstream(t, dsH1, nil)
	first := g.st().tracer()
	tracedGet(t, c, g.Addr(), "a", nil)
	exported(t, rc, origin, "a")
	cfg, err := config.Parse([]byte(text(1)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if g.st().tracer() == first {
		t.Fatal("a reload that moved the fleet instance kept the Tracer")
	}
	tracedGet(t, c, g.Addr(), "b", nil)
	exported(t, rc, origin, "b")
	checkServerSpans(t, rc, origin, "service.instance.id", func(s receiver.Span) string { return s.Instance }, map[string]string{"a": "0", "b": "1"})
}

// checkServerSpans checks what of each request's server span (by the
// request id the origin saw) reached rc: want maps request ids to it.
func checkServerSpans(t *testing.T, rc *receiver.Receiver, origin *seen, what string, of func(receiver.Span) string, want map[string]string) {
	t.Helper()
	got := map[string]string{} // trace id → what of its server span
	for _, s := range rc.Spans() {
		if s.Kind == tracepb.Span_SPAN_KIND_SERVER {
			got[s.TraceID] = of(s)
		}
	}
	for id, w := range want {
		parent, _ := origin.get(id)
		if f := strings.Split(parent, "-"); len(f) != 4 || got[f[1]] != w {
			t.Errorf("request %s (traceparent %q): its server span's %s is %q, want %q", id, parent, what, got[strings.Split(parent+"--", "-")[1]], w)
		}
	}
}

// TestReloadSwapsTheTracer: a reload that changes the tracing block sends
// new requests' spans to the new receiver (another protocol here), and one
// that removes it lets traceparent through unchanged again; a reload that
// keeps the block keeps the Tracer.
func TestReloadSwapsTheTracer(t *testing.T) {
	rc, err := receiver.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	live, origin := traceOrigin(t)
	text := func(tracing string) string {
		return tracing + withEndpoints(cfgText(1, ""), live.addr)
	}
	grpcBlock := fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: 1.0}\n", rc.GRPCAddr())
	g := startGateway(t, text(grpcBlock), nil, Options{})
	reload := func(tracing string) {
		reloadText(t, g, text(tracing))
	}
	c := downstream(t, dsH1, nil)
	first := g.st().tracer()
	tracedGet(t, c, g.Addr(), "a", nil)
	reload(grpcBlock)
	if g.st().tracer() != first {
		t.Errorf("a reload with the same tracing block replaced the Tracer")
	}
	exported(t, rc, origin, "a")
	reload(fmt.Sprintf("tracing: {endpoint: %q, protocol: http, sample_ratio: 1.0}\n", rc.HTTPAddr()))
	tracedGet(t, c, g.Addr(), "b", nil)
	exported(t, rc, origin, "b")
	reload("")
	tracedGet(t, c, g.Addr(), "c", map[string]string{"Traceparent": clientParent})
	flush(t, g)
	checkServerSpans(t, rc, origin, "protocol", func(s receiver.Span) string { return s.Protocol }, map[string]string{"a": "grpc", "b": "http"})
	if parent, _ := origin.get("c"); parent != clientParent {
		t.Errorf("with tracing reloaded off, the origin saw %q, want the client's %q", parent, clientParent)
	}
}
