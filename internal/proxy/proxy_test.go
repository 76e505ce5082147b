package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/goleak"
	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/accesslog"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/proxy"
	"github.com/corput/corput/internal/proxy/proxytest"
	"github.com/corput/corput/internal/route"
	"github.com/corput/corput/internal/slo"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/tracing"
	"github.com/corput/corput/internal/tracing/receiver"
	"github.com/corput/corput/internal/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// client is a serving path's side of one request, as simple as one can
// be: the request is its method, target, host, fields and body, sent as
// they are; the answer is kept.
type client struct {
	method, target, host string
	header               http.Header
	body                 string

	s       *proxy.Stream
	head    exchange.Head
	fields  http.Header
	cookie  string // the stream's Set-Cookie value when the head was written
	got     bytes.Buffer
	ended   bool
	gone    chan struct{} // closed: the client left
	mu      sync.Mutex
	watched io.Closer
}

func newClient(method, target string) *client {
	return &client{method: method, target: target, host: "example.com", header: http.Header{}, fields: http.Header{}, gone: make(chan struct{})}
}

func (c *client) inbound() *proxy.Inbound {
	path, _, _ := strings.Cut(c.target, "?")
	return &proxy.Inbound{
		Method: c.method, Host: c.host, Path: path, Target: c.target, Proto: "HTTP/1.1",
		Client: "192.0.2.7:5555", Head: forward.HeaderFields(c.header), Peer: forward.Peer{IP: "192.0.2.7", Proto: "http"},
	}
}

func (c *client) Request(o *cluster.Origin, s *proxy.Stream) *exchange.Request {
	r := &exchange.Request{Method: c.method, Target: c.target, Host: c.host, Scheme: "http", Trace: s.Tr, MaxHead: o.MaxResponseHead()}
	for k, vv := range c.header {
		if s.Tr != nil && tracing.IsTraceField([]byte(k)) {
			continue // each attempt sends its own
		}
		for _, v := range vv {
			r.Fields = append(r.Fields, hpack.HeaderField{Name: k, Value: v})
		}
	}
	if c.body != "" {
		r.Body, r.Length = strings.NewReader(c.body), int64(len(c.body))
	}
	return r
}

func (c *client) WriteHead(h *exchange.Head) error {
	c.head = *h
	for _, f := range h.Fields {
		c.fields.Add(f.Name, f.Value)
	}
	c.cookie = string(c.s.Cookie)
	return nil
}

func (c *client) Write(p []byte) (int, error) { return c.got.Write(p) }
func (c *client) Flush() error                { return nil }
func (c *client) End(_ []hpack.HeaderField, n int64) error {
	c.ended, c.s.Sent = true, n
	return nil
}
func (c *client) Abort(n int64)   { c.s.Sent = n }
func (c *client) RawChunks() bool { return false }

func (c *client) Watch(up io.Closer) {
	c.mu.Lock()
	c.watched = up
	c.mu.Unlock()
	select {
	case <-c.gone:
		up.Close()
	default:
	}
}

func (c *client) Unwatch() bool {
	c.mu.Lock()
	c.watched = nil
	c.mu.Unlock()
	select {
	case <-c.gone:
		return true
	default:
		return false
	}
}

// leave is the client going away while its exchange waits.
func (c *client) leave() {
	close(c.gone)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watched != nil {
		c.watched.Close()
	}
}

func (c *client) Upgrade(*exchange.Head, io.ReadWriteCloser) int { return 0 }

// serve serves c's request through h, on a fresh stream.
func serve(h *proxy.Handler, c *client) int {
	return serveCtx(context.Background(), h, c)
}

func serveCtx(ctx context.Context, h *proxy.Handler, c *client) int {
	c.s = new(proxy.Stream)
	in := c.inbound()
	return h.Serve(ctx, c.s, in, h.Route(route.Request{Method: in.Method, Host: in.Host, Path: in.Path}), c, false)
}

// hello is an origin that answers every request "hello from PATH".
func hello(t *testing.T) string {
	return proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
}

// downRig is a one-loop handler whose only route, host down.example, goes
// to an origin that refuses connections and does not retry.
func downRig(t *testing.T) *proxytest.Rig {
	dead := proxytest.Dead(t)
	return proxytest.New(t, proxytest.Config{
		Origins: []proxytest.Origin{{Name: "down", Endpoints: []string{dead}, Edit: func(oc *config.Origin) { oc.Retry.On = nil }}},
		Routes:  []route.Route{{Host: "down.example", Origin: "down"}},
		Loops:   1,
	})
}

// TestGatewaysOwnAnswers: what the gateway answers itself — the reason's
// status, its fields, its body and length (the length alone to HEAD) —
// and the one count of each request.
func TestGatewaysOwnAnswers(t *testing.T) {
	r := downRig(t)
	for _, tc := range []struct {
		name, method, host string
		refuse             forward.Reason
		status             int
		reason             string
		retryAfter         bool
		class              string
	}{
		{"no route", "GET", "example.com", forward.None, 404, "no_route", false, "4xx"},
		{"no route, HEAD", "HEAD", "example.com", forward.None, 404, "no_route", false, "4xx"},
		{"refused by the serving path", "GET", "down.example", forward.BadRequest, 400, "bad_request", false, "4xx"},
		{"the origin refuses connections", "GET", "down.example", forward.None, 502, "connect_failed", false, "5xx"},
		{"the origin refuses connections, HEAD", "HEAD", "down.example", forward.None, 502, "connect_failed", false, "5xx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := r.Served(tc.class)
			c := newClient(tc.method, "/x")
			c.host = tc.host
			c.s = new(proxy.Stream)
			in := c.inbound()
			rt := r.Route(route.Request{Method: in.Method, Host: in.Host, Path: in.Path})
			rt.Refuse = tc.refuse
			status := r.Serve(context.Background(), c.s, in, rt, c, false)
			body := fmt.Sprintf("%s: %s\n", http.StatusText(tc.status), tc.reason)
			if status != tc.status || c.head.Status != tc.status {
				t.Fatalf("status %d (head %d), want %d", status, c.head.Status, tc.status)
			}
			if got := c.fields.Get("X-Corput-Error"); got != tc.reason {
				t.Fatalf("X-Corput-Error %q, want %q", got, tc.reason)
			}
			if got := c.fields.Get("Retry-After"); (got == "1") != tc.retryAfter {
				t.Fatalf("Retry-After %q", got)
			}
			if c.head.Length != int64(len(body)) {
				t.Fatalf("length %d, want %d", c.head.Length, len(body))
			}
			wantBody, framing := body, exchange.Length
			if tc.method == "HEAD" {
				wantBody, framing = "", exchange.None
			}
			if c.got.String() != wantBody || c.head.Framing != framing || !c.ended {
				t.Fatalf("body %q framing %v ended %v, want %q %v", c.got.String(), c.head.Framing, c.ended, wantBody, framing)
			}
			if c.s.Sent != int64(len(wantBody)) {
				t.Fatalf("Sent %d, want %d", c.s.Sent, len(wantBody))
			}
			if got := r.Served(tc.class); got != before+1 {
				t.Fatalf("%d requests counted %s, want %d", got, tc.class, before+1)
			}
		})
	}
}

// TestGatewaysOwnAnswersToGRPCClients: a gRPC request (by its
// Content-Type, gRPC-Web excluded) the gateway answers itself gets gRPC's
// trailers-only answer — 200, no body, grpc-status and grpc-message from
// the reason, X-Corput-Error and Retry-After as the plain answer has them —
// and is counted under the reason's status.
func TestGatewaysOwnAnswersToGRPCClients(t *testing.T) {
	r := downRig(t)
	for _, tc := range []struct {
		name, host, contentType string
		status                  int
		grpcStatus              string
		reason                  string
		class                   string
	}{
		{"no route", "example.com", "application/grpc", 404, "12", "no_route", "4xx"},
		{"no route, +proto", "example.com", "application/grpc+proto", 404, "12", "no_route", "4xx"},
		{"connect failed", "down.example", "application/grpc", 502, "14", "connect_failed", "5xx"},
		{"gRPC-Web gets the plain answer", "example.com", "application/grpc-web+proto", 404, "", "no_route", "4xx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := r.Served(tc.class)
			c := newClient("POST", "/grpc.testing.TestService/EmptyCall")
			c.host = tc.host
			c.header.Set("Content-Type", tc.contentType)
			status := serve(r.Handler, c)
			if status != tc.status {
				t.Fatalf("Serve returned %d, want the reason's %d", status, tc.status)
			}
			if got := c.fields.Get("X-Corput-Error"); got != tc.reason {
				t.Fatalf("X-Corput-Error %q, want %q", got, tc.reason)
			}
			if got := r.Served(tc.class); got != before+1 {
				t.Fatalf("%d requests counted %s, want %d", got, tc.class, before+1)
			}
			if tc.grpcStatus == "" {
				if c.head.Status != tc.status || c.fields.Get("Grpc-Status") != "" {
					t.Fatalf("head %d grpc-status %q, want the plain %d", c.head.Status, c.fields.Get("Grpc-Status"), tc.status)
				}
				return
			}
			if c.head.Status != 200 || c.head.Length != 0 || c.head.Framing != exchange.Length || c.got.Len() != 0 || !c.ended {
				t.Fatalf("head %d length %d framing %v body %q ended %v; want 200, no body", c.head.Status, c.head.Length, c.head.Framing, c.got.String(), c.ended)
			}
			want := http.StatusText(tc.status) + ": " + tc.reason
			if c.fields.Get("Content-Type") != "application/grpc" || c.fields.Get("Grpc-Status") != tc.grpcStatus || c.fields.Get("Grpc-Message") != want {
				t.Fatalf("fields %v; want application/grpc, grpc-status %s, grpc-message %q", c.fields, tc.grpcStatus, want)
			}
		})
	}
}

// TestAdmissionShedsLowPriority: once the SLO guard is on, a request on a
// route of priority low is answered 503 slo_shed without an attempt; one
// on another route goes through.
func TestAdmissionShedsLowPriority(t *testing.T) {
	sloClk := clock.NewFake(time.Unix(1000, 0))
	mix := &workload.Mix{Classes: []workload.Class{
		{Name: "light", Percent: 70, Latency: 15 * time.Millisecond, SLO: &workload.Budget{P99: 10 * time.Millisecond}},
		{Name: "heavy", Percent: 30, Latency: 140 * time.Millisecond},
	}}
	r := proxytest.New(t, proxytest.Config{
		Origins:  []proxytest.Origin{{Name: "app", Endpoints: []string{hello(t)}}},
		Routes:   []route.Route{{PathPrefix: "/batch", Origin: "app", Low: true, Class: 0, Cost: 1}, {Origin: "app", Class: 0, Cost: 1}},
		Workload: mix, SLOClock: sloClk,
	})
	o := r.Origins["app"]
	light := cluster.Kind{Class: 0, Cost: 1}
	for range slo.MinSamples {
		o.Served(light, time.Now().Add(-time.Second)) // far over the 10 ms budget
	}
	sloClk.Advance(slo.EnterAfter * slo.Tick)
	c := newClient("GET", "/batch/1")
	if status := serve(r.Handler, c); status != 503 || c.fields.Get("X-Corput-Error") != "slo_shed" || c.fields.Get("Retry-After") != "1" {
		t.Fatalf("a low-priority request: %d %v, want 503 slo_shed", status, c.fields)
	}
	c = newClient("GET", "/api")
	if status := serve(r.Handler, c); status != 200 || c.got.String() != "hello from /api" {
		t.Fatalf("a normal request: %d %q, want the origin's answer", status, c.got.String())
	}
}

// TestTableRoute: a route's class beats the workload's match rules, which
// classify a request whose route names none; no class costs 1.
func TestTableRoute(t *testing.T) {
	cost := 4.0
	mix := &workload.Mix{Classes: []workload.Class{
		{Name: "light", Percent: 70, Latency: 15 * time.Millisecond},
		{Name: "heavy", Percent: 30, Latency: 140 * time.Millisecond, Cost: &cost, Match: &workload.Match{Methods: []string{"POST"}, PathPrefix: "/pay"}},
	}}
	r := proxytest.New(t, proxytest.Config{
		Origins:  []proxytest.Origin{{Name: "app", Endpoints: []string{proxytest.Dead(t)}}},
		Routes:   []route.Route{{Host: "api.example", PathPrefix: "/light", Origin: "app", Class: 0, Cost: 1, Low: true}, {Host: "api.example", Origin: "app"}},
		Workload: mix,
	})
	for _, tc := range []struct {
		method, host, path string
		ok                 bool
		kind               cluster.Kind
	}{
		{"GET", "api.example", "/light/a", true, cluster.Kind{Class: 0, Cost: 1, Low: true}},
		{"POST", "api.example", "/pay/1", true, cluster.Kind{Class: 1, Cost: 4}},
		{"GET", "api.example", "/pay/1", true, cluster.Kind{Class: -1, Cost: 1}},
		{"GET", "other.example", "/", false, cluster.Kind{}},
	} {
		rt := r.Route(route.Request{Method: tc.method, Host: tc.host, Path: tc.path})
		if rt.OK != tc.ok || rt.Kind != tc.kind || rt.Table != r.Table() || (tc.ok && rt.Origin != r.Origins["app"]) {
			t.Errorf("%s %s%s: ok %v kind %+v origin %v, want %v %+v", tc.method, tc.host, tc.path, rt.OK, rt.Kind, rt.Origin, tc.ok, tc.kind)
		}
	}
	next := *r.Table()
	next.Router = route.NewRouter(nil)
	r.Publish(&next)
	if rt := r.Route(route.Request{Method: "GET", Host: "api.example", Path: "/"}); rt.OK || rt.Table != &next {
		t.Fatal("a published table is not the one in force")
	}
}

// TestDeliveredAnswers: the origin's answer is relayed and counted by its
// class, whatever the loop.
func TestDeliveredAnswers(t *testing.T) {
	o := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/missing" {
			w.WriteHeader(404)
		}
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), b)
	}))
	r := proxytest.New(t, proxytest.Config{Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{o}}}, Loops: 3})
	for i, tc := range []struct {
		method, target, body string
		status               int
		class                string
	}{
		{"GET", "/a?b=c", "", 200, "2xx"},
		{"POST", "/p", "data", 200, "2xx"},
		{"GET", "/missing", "", 404, "4xx"},
	} {
		before := r.Served(tc.class)
		c := newClient(tc.method, tc.target)
		c.body = tc.body
		status := serve(r.Handler, c)
		want := fmt.Sprintf("%s %s %s", tc.method, tc.target, tc.body)
		if status != tc.status || c.got.String() != want || c.s.Sent != int64(len(want)) {
			t.Fatalf("%d: %d %q sent %d, want %d %q", i, status, c.got.String(), c.s.Sent, tc.status, want)
		}
		if r.Served(tc.class) != before+1 {
			t.Fatalf("%d: not counted as %s", i, tc.class)
		}
	}
	d := r.Origins["app"].Driver()
	for l := range d.Loops() {
		if d.InFlight(l) != 0 {
			t.Fatalf("loop %d: %d requests still in flight", l, d.InFlight(l))
		}
	}
}

// roundRobin picks every endpoint of the origin in turn, from every loop:
// of two requests on one loop, at least one meets the first endpoint first.
func roundRobin(oc *config.Origin) {
	oc.Balancer.Policy = config.PolicyRoundRobin
	oc.Subset.Algorithm = config.SubsetNone
}

// TestAttemptsGoAgain: the attempts loop's steps — a refused connection
// and an origin's 503 go again on the other endpoint and the second
// attempt's answer is delivered; the access log says how many attempts
// were made and where the last went.
func TestAttemptsGoAgain(t *testing.T) {
	live := hello(t)
	busy := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
	}))
	for _, tc := range []struct {
		name  string
		first string
	}{
		{"connect refused", proxytest.Dead(t)},
		{"503", busy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged testlog.Buffer
			alog := accesslog.New(&logged, accesslog.Options{Format: accesslog.JSON})
			r := proxytest.New(t, proxytest.Config{
				Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{tc.first, live}, Edit: roundRobin}},
				Loops:   1, Log: alog,
			})
			for range 2 {
				c := newClient("GET", "/r")
				if status := serve(r.Handler, c); status != 200 || c.got.String() != "hello from /r" {
					t.Fatalf("%d %q, want the live endpoint's answer", status, c.got.String())
				}
			}
			alog.Close()
			lines := records(t, logged.String())
			if len(lines) != 2 {
				t.Fatalf("%d access-log lines for 2 requests", len(lines))
			}
			retried := 0
			for _, l := range lines {
				if l["endpoint"] != live || l["status"] != 200.0 || l["origin"] != "app" || l["error"] != "" {
					t.Fatalf("line %v: want delivered by %s", l, live)
				}
				if l["attempts"] == 2.0 {
					retried++
				}
			}
			if retried == 0 {
				t.Fatalf("no request made two attempts: round robin sends one to %s first", tc.first)
			}
		})
	}
}

func records(t *testing.T, text string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestAccessLogLine: the access log's line of a request holds what the
// request was and how it ended, for the origin's answer and the gateway's
// own.
func TestAccessLogLine(t *testing.T) {
	var logged testlog.Buffer
	alog := accesslog.New(&logged, accesslog.Options{Format: accesslog.JSON})
	o := hello(t)
	r := proxytest.New(t, proxytest.Config{
		Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{o}}},
		Routes:  []route.Route{{PathPrefix: "/app", Origin: "app"}},
		Loops:   1, Log: alog,
	})
	c := newClient("GET", "/app/x?q=1")
	c.header.Set("Referer", "https://ref.example/")
	c.header.Set("User-Agent", "probe/1")
	serve(r.Handler, c)
	serve(r.Handler, newClient("HEAD", "/nowhere"))
	alog.Close()
	lines := records(t, logged.String())
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), logged.String())
	}
	want := []map[string]any{
		{"client": "192.0.2.7:5555", "method": "GET", "host": "example.com", "path": "/app/x", "query": "q=1", "proto": "HTTP/1.1",
			"status": 200.0, "bytes": float64(len("hello from /app/x")), "referer": "https://ref.example/", "user_agent": "probe/1",
			"origin": "app", "endpoint": o, "attempts": 1.0, "error": "", "loop": 0.0},
		{"method": "HEAD", "path": "/nowhere", "status": 404.0, "bytes": 0.0, "origin": "", "endpoint": "", "attempts": 0.0,
			"error": "no_route", "loop": -1.0},
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, lines[i][k], v)
			}
		}
	}
}

// TestClientLeaves: a client that leaves while the origin thinks ends its
// request as 499, with nothing answered; one whose context ends while it
// waits for a stream too.
func TestClientLeaves(t *testing.T) {
	o := proxytest.Think(t)
	r := proxytest.New(t, proxytest.Config{Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{o.Addr}}}})
	c := newClient("GET", "/think")
	go func() {
		<-o.Arrived
		c.leave()
	}()
	if status := serve(r.Handler, c); status != 499 || c.head.Status != 0 {
		t.Fatalf("status %d, head %d written; want 499 and nothing", status, c.head.Status)
	}
	if r.Served("4xx") != 1 {
		t.Fatal("the request is not counted as 4xx")
	}
	select {
	case <-o.Cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the origin's request was not cancelled")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c = newClient("GET", "/never")
	if status := serveCtx(ctx, r.Handler, c); status != 499 || c.head.Status != 0 {
		t.Fatalf("gone before a stream: %d, head %d", status, c.head.Status)
	}
}

// TestRequestTimeout: an origin slower than a time limit is answered 504
// upstream_timeout, and the access log names the limit that fired.
func TestRequestTimeout(t *testing.T) {
	for _, c := range []struct {
		limit string
		set   func(*config.Origin)
	}{
		{"request", func(oc *config.Origin) { oc.Timeouts.Request = 50 * time.Millisecond }},
		{"response_header", func(oc *config.Origin) { oc.Timeouts.ResponseHeader = 50 * time.Millisecond }},
		{"per_try", func(oc *config.Origin) { oc.Retry.PerTryTimeout = 50 * time.Millisecond }},
	} {
		t.Run(c.limit, func(t *testing.T) {
			var logged testlog.Buffer
			alog := accesslog.New(&logged, accesslog.Options{Format: accesslog.JSON})
			r := proxytest.New(t, proxytest.Config{Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{proxytest.Think(t).Addr},
				Edit: c.set}}, Log: alog})
			cl := newClient("GET", "/slow")
			if status := serve(r.Handler, cl); status != 504 || cl.fields.Get("X-Corput-Error") != "upstream_timeout" {
				t.Fatalf("%d %v, want 504 upstream_timeout", status, cl.fields)
			}
			alog.Close()
			lines := records(t, logged.String())
			if len(lines) != 1 || lines[0]["limit"] != c.limit || lines[0]["error"] != "upstream_timeout" {
				t.Fatalf("access log %v, want error upstream_timeout and limit %s", lines, c.limit)
			}
		})
	}
}

// TestStickyCookie: a sticky origin that sets a cookie gives a request
// without one its Set-Cookie with the origin's answer, and none with the
// gateway's own.
func TestStickyCookie(t *testing.T) {
	sticky := func(oc *config.Origin) {
		oc.Balancer.Policy, oc.Balancer.HashOn = config.PolicyMaglev, "cookie sid"
		oc.Balancer.Cookie = &config.StickyCookie{}
		oc.Retry.On = nil
	}
	r := proxytest.New(t, proxytest.Config{
		Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{hello(t)}, Edit: sticky}, {Name: "down", Endpoints: []string{proxytest.Dead(t)}, Edit: sticky}},
		Routes:  []route.Route{{Host: "down.example", Origin: "down"}, {Origin: "app"}},
	})
	c := newClient("GET", "/")
	if serve(r.Handler, c); !strings.HasPrefix(c.cookie, "sid=") || !strings.HasSuffix(c.cookie, "; Path=/; HttpOnly") {
		t.Fatalf("the answer's cookie %q, want a new sid", c.cookie)
	}
	c = newClient("GET", "/")
	c.header.Set("Cookie", "sid=0123456789abcdef")
	if serve(r.Handler, c); c.cookie != "" {
		t.Fatalf("a request with its cookie got another: %q", c.cookie)
	}
	c = newClient("GET", "/")
	c.host = "down.example"
	if status := serve(r.Handler, c); status != 502 || c.cookie != "" {
		t.Fatalf("the gateway's own answer: %d with cookie %q, want 502 without", status, c.cookie)
	}
}

// TestTracedRequest: a traced request is one server span and a client
// span per attempt, children of it; the origin sees the delivering
// attempt's span as its parent; a client that is not a trusted proxy
// starts a new trace whatever traceparent it sends.
func TestTracedRequest(t *testing.T) {
	tr, rc := proxytest.Tracer(t)
	var mu sync.Mutex
	var parents []string
	live := proxytest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		parents = append(parents, r.Header.Get("Traceparent"))
		mu.Unlock()
	}))
	r := proxytest.New(t, proxytest.Config{
		Origins: []proxytest.Origin{{Name: "app", Endpoints: []string{proxytest.Dead(t), live}, Edit: roundRobin}},
		Loops:   1, Tracer: tr,
	})
	for range 2 {
		c := newClient("GET", "/t")
		c.header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		if status := serve(r.Handler, c); status != 200 {
			t.Fatalf("status %d", status)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	byTrace := map[string][]receiver.Span{}
	for _, s := range rc.Spans() {
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	if len(byTrace) != 2 || len(parents) != 2 {
		t.Fatalf("%d traces, %d requests at the origin; want 2 and 2", len(byTrace), len(parents))
	}
	retried := 0
	for _, p := range parents {
		f := strings.Split(p, "-")
		if len(f) != 4 || f[1] == "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Fatalf("the origin saw traceparent %q: not the gateway's", p)
		}
		var server receiver.Span
		var clients []receiver.Span
		for _, s := range byTrace[f[1]] {
			if s.Kind == v1.Span_SPAN_KIND_SERVER {
				server = s
			} else {
				clients = append(clients, s)
			}
		}
		if server.SpanID == "" || server.Attrs["corput.origin"] != "app" || server.Attrs["corput.attempts"] != fmt.Sprint(len(clients)) ||
			server.Attrs["http.response.status_code"] != "200" {
			t.Fatalf("server span %+v with %d client spans", server, len(clients))
		}
		var delivering string
		for _, cs := range clients {
			if cs.ParentID != server.SpanID {
				t.Fatalf("client span %+v is not the server span's child", cs)
			}
			switch cs.Attrs["corput.outcome"] {
			case "delivered":
				delivering = cs.SpanID
			case "again":
				if cs.Attrs["corput.reason"] != "connect_failed" || !cs.Error {
					t.Fatalf("the failed attempt's span %+v", cs)
				}
			}
		}
		if delivering != f[2] {
			t.Fatalf("the origin's parent span is %s, want the delivering attempt's %s", f[2], delivering)
		}
		if len(clients) == 2 {
			retried++
		}
	}
	if retried == 0 {
		t.Fatal("no trace shows two attempts: round robin sends one request to the refusing endpoint first")
	}
}
