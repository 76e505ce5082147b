package hotpath

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/gateway"
	"github.com/corput/corput/internal/tracing/receiver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tinyOrigin is an HTTP/1.1 origin on a raw socket: it answers every GET
// head with a fixed 200 "ok\n" and allocates nothing per request.
type tinyOrigin struct {
	ln       net.Listener
	accepted atomic.Int64
	requests atomic.Int64
	wg       sync.WaitGroup

	// record keeps each request's head in heads (a test's check; it
	// allocates).
	record atomic.Bool

	mu    sync.Mutex // guards following
	conns map[net.Conn]struct{}
	heads []string
}

var tinyResponse = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n")

func startTinyOrigin(tb testing.TB) *tinyOrigin {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	o := &tinyOrigin{ln: ln, conns: map[net.Conn]struct{}{}}
	o.wg.Add(1)
	go o.serve()
	tb.Cleanup(o.close)
	return o
}

func (o *tinyOrigin) serve() {
	defer o.wg.Done()
	for {
		c, err := o.ln.Accept()
		if err != nil {
			return
		}
		o.accepted.Add(1)
		o.mu.Lock()
		o.conns[c] = struct{}{}
		o.mu.Unlock()
		o.wg.Add(1)
		go o.serveConn(c)
	}
}

// serveConn answers each request head (bodies are not expected).
func (o *tinyOrigin) serveConn(c net.Conn) {
	defer o.wg.Done()
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	for {
		var head []byte
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if o.record.Load() {
				head = append(head, line...)
			}
			if len(line) <= 2 { // the empty line ending the head
				break
			}
		}
		if head != nil {
			o.mu.Lock()
			o.heads = append(o.heads, string(head))
			o.mu.Unlock()
		}
		o.requests.Add(1)
		if _, err := c.Write(tinyResponse); err != nil {
			return
		}
	}
}

func (o *tinyOrigin) close() {
	o.ln.Close()
	o.mu.Lock()
	for c := range o.conns {
		c.Close()
	}
	o.mu.Unlock()
	o.wg.Wait()
}

// startGateway runs a gateway with default settings (least_work, pools,
// framing guard, metrics) in front of origins.
func startGateway(tb testing.TB, loops int, origins ...*tinyOrigin) *gateway.Gateway {
	return startGatewayPath(tb, true, loops, origins...)
}

// paths are the two request paths: corput's fast path and net/http's
// (downstream.fast_path).
var paths = []struct {
	name string
	fast bool
}{{"fast", true}, {"nethttp", false}}

func startGatewayPath(tb testing.TB, fast bool, loops int, origins ...*tinyOrigin) *gateway.Gateway {
	tb.Helper()
	return startGatewayWith(tb, fast, loops, "", origins...)
}

// startGatewayWith is startGatewayPath with extra top-level config.
func startGatewayWith(tb testing.TB, fast bool, loops int, extra string, origins ...*tinyOrigin) *gateway.Gateway {
	tb.Helper()
	return startGatewayRoute(tb, fast, loops, "", extra, origins...)
}

// startGatewayRoute is startGatewayWith with extra keys of the route
// (", rate_limit: {...}").
func startGatewayRoute(tb testing.TB, fast bool, loops int, routeKeys, extra string, origins ...*tinyOrigin) *gateway.Gateway {
	tb.Helper()
	return startGatewayFull(tb, fast, loops, "", "origin: app"+routeKeys, extra, origins...)
}

// startGatewayFull is startGatewayRoute with extra downstream keys
// (", forwarded: true") and the route's keys after its path_prefix
// whole ("origin: app, ..." or "answer: {...}").
func startGatewayFull(tb testing.TB, fast bool, loops int, downstreamKeys, route, extra string, origins ...*tinyOrigin) *gateway.Gateway {
	tb.Helper()
	return startGatewayRoutes(tb, fast, loops, downstreamKeys, "[{path_prefix: /, "+route+"}]", extra, origins...)
}

// startGatewayRoutes is startGatewayFull with the routes given whole
// ("[{path_prefix: /api/, origin: app, ...}]").
func startGatewayRoutes(tb testing.TB, fast bool, loops int, downstreamKeys, routes, extra string, origins ...*tinyOrigin) *gateway.Gateway {
	tb.Helper()
	var eps []string
	for _, o := range origins {
		eps = append(eps, fmt.Sprintf("{address: %q}", o.ln.Addr()))
	}
	text := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: %d
downstream: {fast_path: %v%s}
routes: %s
origins:
  - name: app
    protocol: h1
    endpoints: [%s]
%s`, loops, fast, downstreamKeys, routes, strings.Join(eps, ", "), extra)
	cfg, err := config.Parse([]byte(text), "hotpath.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	if err := g.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for !g.Ready() {
		if time.Now().After(deadline) {
			tb.Fatal("gateway not ready within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return g
}

// rawClient is one keep-alive downstream connection that sends GET / and
// reads a Content-Length response, allocating nothing per request.
type rawClient struct {
	c   net.Conn
	br  *bufio.Reader
	req []byte // the request sent: rawRequest unless set
}

var rawRequest = []byte("GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: hotpath\r\nAccept: */*\r\n\r\n")

func dial(addr string) (*rawClient, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &rawClient{c: c, br: bufio.NewReaderSize(c, 4096), req: rawRequest}, nil
}

var errStatus = errors.New("status is not 200")

// get does one request and returns the body length.
func (r *rawClient) get() (int, error) {
	if _, err := r.c.Write(r.req); err != nil {
		return 0, err
	}
	status, err := r.br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		return 0, fmt.Errorf("%w: %q", errStatus, status)
	}
	n := -1
	for {
		line, err := r.br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) <= 2 {
			break
		}
		if k, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			n, err = strconv.Atoi(string(bytes.TrimSpace(k)))
			if err != nil {
				return 0, err
			}
		}
	}
	if n < 0 {
		return 0, errors.New("response without Content-Length")
	}
	if _, err := r.br.Discard(n); err != nil {
		return 0, err
	}
	return n, nil
}

// TestTinyOriginThroughGateway: the benchmark's parts work — answers are
// the origin's, and sequential requests on one client connection reuse
// one upstream connection.
func TestTinyOriginThroughGateway(t *testing.T) {
	o := startTinyOrigin(t)
	g := startGateway(t, 1, o)
	c, err := dial(g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.c.Close()
	before := o.accepted.Load()
	for i := 0; i < 100; i++ {
		n, err := c.get()
		if err != nil || n != 3 {
			t.Fatalf("request %d: %d bytes, %v", i, n, err)
		}
	}
	if got := o.requests.Load(); got != 100 {
		t.Errorf("origin answered %d requests, want 100", got)
	}
	if opened := o.accepted.Load() - before; opened > 0 {
		t.Errorf("100 sequential requests opened %d new upstream connections beyond the pre-warmed one, want 0", opened)
	}
}

// BenchmarkSerial is one client connection, one request at a time: the
// latency of the proxy path, syscalls included. fast_access_log is the
// fast path with every request's line written to a file as JSON;
// fast_slo, with every request classified and recorded by the SLO guard.
// fast_sticky the fast path on a maglev origin keyed by a header (the key
// hashed in place, the table walked); fast_sticky_cookie keyed by a cookie
// the request lacks, so every response sets a new one. fast_rate_limit
// with a route rate limit keyed by client address and address rules.
func BenchmarkSerial(b *testing.B) {
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) { benchSerial(b, p.fast, "") })
	}
	for _, p := range paths {
		b.Run(p.name+"_tracing_1pct", func(b *testing.B) { benchSerial(b, p.fast, tracingBlock(b, 0.01)) })
	}
	// fast_slo: every request has a workload class with a budget, so the
	// SLO guard's window and the class mix record it.
	b.Run("fast_no_retry", func(b *testing.B) { benchSerial(b, true, noRetry) })
	b.Run("fast_replay_buffer", func(b *testing.B) { benchSerial(b, true, replayUnused) })
	b.Run("fast_slo", func(b *testing.B) {
		benchSerial(b, true, "workload:\n  classes:\n    - {name: light, percent: 70, latency: 15ms, match: {path_prefix: /}, slo: {p99: 20ms}}\n    - {name: heavy, percent: 30, latency: 140ms}\n")
	})
	// fast_health_check: the origin has active health checks; the
	// endpoint's live traffic makes its probes needless (skipped).
	b.Run("fast_health_check", func(b *testing.B) { benchSerial(b, true, healthCheck) })
	b.Run("fast_sticky", func(b *testing.B) {
		benchSerial(b, true, "    balancer: {policy: maglev, hash_on: \"header User-Agent\"}\n")
	})
	b.Run("fast_sticky_cookie", func(b *testing.B) {
		benchSerial(b, true, "    balancer: {policy: maglev, hash_on: \"cookie sid\", cookie: {ttl: 1h}}\n")
	})
	// fast_rate_limit: the route limited per client address, with room
	// for every request (the known key's bucket taken each time), and the
	// listener's and the route's address rules checked.
	b.Run("fast_rate_limit", func(b *testing.B) {
		benchSerialRoute(b, true, ", rate_limit: {requests_per_second: 1000000000, burst: 1000000000, key: client_address}, addresses: {allow: [127.0.0.0/8], deny: [10.0.0.0/8]}",
			"")
	})
	// fast_mirror_unsampled: the route mirrors to a shadow origin at a
	// share so small that no request is sampled: each draws its sample
	// and is not mirrored. fast_mirror_10pct mirrors one in ten (those
	// copy their head into a pooled job and start a goroutine).
	b.Run("fast_mirror_unsampled", func(b *testing.B) { benchMirror(b, "0.000001") })
	b.Run("fast_mirror_10pct", func(b *testing.B) { benchMirror(b, "10") })
	// fast_forwarded: downstream.forwarded adds Forwarded (RFC 7239)
	// beside X-Forwarded-*. fast_answer: the route answers itself
	// (routes[].answer), no origin touched.
	// fast_split: the route split 95/5 between app and a second origin
	// on another endpoint, sticky by a header.
	b.Run("fast_split", func(b *testing.B) {
		other := startTinyOrigin(b)
		benchSerialFull(b, true, "", `split: [{origin: app, weight: 95}, {origin: app2, weight: 5}], split_hash_on: "header X-Canary"`,
			fmt.Sprintf("  - name: app2\n    protocol: h1\n    endpoints: [{address: %q}]\n", other.ln.Addr()))
	})
	b.Run("fast_forwarded", func(b *testing.B) { benchSerialFull(b, true, ", forwarded: true", "origin: app", "") })
	b.Run("fast_answer", func(b *testing.B) {
		benchSerialFull(b, true, "", "answer: {status: 200, body: ok, headers: [{name: Cache-Control, value: no-store}]}", "")
	})
	// fast_edits: a route that strips its prefix (/api/items is sent as
	// /items) and edits 2 fields, one each way, one with a variable;
	// fast_edits_request_id adds a generated request id, sent upstream and
	// returned to the client.
	b.Run("fast_edits", func(b *testing.B) { benchEdits(b, "") })
	b.Run("fast_edits_request_id", func(b *testing.B) { benchEdits(b, ", request_id: {return_to_client: true}") })
	b.Run("fast_access_log", func(b *testing.B) {
		file := filepath.Join(b.TempDir(), "access.log")
		g := benchSerial(b, true, fmt.Sprintf("access_log: {path: %s, format: json, sample: 1.0}\n", file))
		g.Close() // writes the last lines
		data, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(bytes.Count(data, []byte("\n")))/float64(b.N), "lines/op") // 1: none dropped
	})
}

// benchMirror is benchSerial with the route mirrored to a second tiny
// origin at percent.
func benchMirror(b *testing.B, percent string) {
	shadow := startTinyOrigin(b)
	benchSerialRoute(b, true, ", mirror: {origin: shadow, percent: "+percent+"}",
		fmt.Sprintf("  - name: shadow\n    protocol: h1\n    endpoints: [{address: %q}]\n", shadow.ln.Addr()))
}

// TestEditBenchmarkEdits: fast_edits' route does what it claims — the
// origin receives /items with X-Route, the client gets X-Served-By and,
// with request_id, its X-Request-ID — so its 0 allocs/op covers the edits.
func TestEditBenchmarkEdits(t *testing.T) {
	for _, ds := range []string{"", ", request_id: {return_to_client: true}"} {
		o := startTinyOrigin(t)
		o.record.Store(true)
		g := startGatewayRoutes(t, true, 1, ds, editRoutes, "", o)
		c, err := net.Dial("tcp", g.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(editRequest)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		o.mu.Lock()
		head := o.heads[len(o.heads)-1]
		o.mu.Unlock()
		if !strings.HasPrefix(head, "GET /items HTTP/1.1\r\n") || !strings.Contains(head, "\r\nX-Route: any/api/\r\n") {
			t.Errorf("downstream%s: the origin got\n%s", ds, head)
		}
		if resp.Header.Get("X-Served-By") != "corput" || (ds != "") != (len(resp.Header.Get("X-Request-Id")) == 36) ||
			(ds != "") != strings.Contains(head, "\r\nX-Request-ID: "+resp.Header.Get("X-Request-Id")+"\r\n") {
			t.Errorf("downstream%s: the client got %v; the origin\n%s", ds, resp.Header, head)
		}
	}
}

// editRoutes is fast_edits' route.
const editRoutes = `[{path_prefix: /api/, origin: app, rewrite: {replace_prefix: /},
  request_headers: {set: [{name: X-Route, value: "%route%"}]}, response_headers: {add: [{name: X-Served-By, value: corput}]}}]`

var editRequest = []byte("GET /api/items HTTP/1.1\r\nHost: bench\r\nUser-Agent: hotpath\r\nAccept: */*\r\n\r\n")

func benchEdits(b *testing.B, downstreamKeys string) {
	g := startGatewayRoutes(b, true, 2, downstreamKeys, editRoutes, "", startTinyOrigin(b))
	serialLoop(b, g, editRequest)
}

func benchSerial(b *testing.B, fast bool, extra string) *gateway.Gateway {
	return benchSerialRoute(b, fast, "", extra)
}

func benchSerialRoute(b *testing.B, fast bool, routeKeys, extra string) *gateway.Gateway {
	return benchSerialFull(b, fast, "", "origin: app"+routeKeys, extra)
}

func benchSerialFull(b *testing.B, fast bool, downstreamKeys, route, extra string) *gateway.Gateway {
	g := startGatewayFull(b, fast, 2, downstreamKeys, route, extra, startTinyOrigin(b))
	serialLoop(b, g, nil)
	return g
}

// serialLoop is the serial benchmark's loop: b.N requests one after the
// other on one client connection to g, req each (rawRequest when nil),
// with allocations and cpu-µs/op reported.
func serialLoop(b *testing.B, g *gateway.Gateway, req []byte) {
	c, err := dial(g.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer c.c.Close()
	if req != nil {
		c.req = req
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		if _, err := c.get(); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
	b.StopTimer()
}

// cpuTime is the CPU time (user and system) the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-µs/op: process CPU time per request since since. On
// a shared machine it moves much less than ns/op, which counts waiting for
// a core too. It includes the test's client and origin, which cost the
// same in every run.
func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64(cpuTime()-since)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// BenchmarkParallel64 is 64 client connections (as wrk -c64) over two
// loops and four origins: throughput under contention. fast_tracing_1pct
// samples 1 % against a real receiver; fast_tracing_100pct_blackholed
// samples every request into a receiver that never answers (all shed once
// the queue is full).
func BenchmarkParallel64(b *testing.B) {
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) { benchParallel64(b, p.fast, "") })
	}
	for _, p := range paths {
		b.Run(p.name+"_tracing_1pct", func(b *testing.B) { benchParallel64(b, p.fast, tracingBlock(b, 0.01)) })
	}
	b.Run("fast_tracing_100pct_blackholed", func(b *testing.B) { benchParallel64(b, true, blackholedBlock(b)) })
	b.Run("fast_no_retry", func(b *testing.B) { benchParallel64(b, true, noRetry) })
	b.Run("fast_replay_buffer", func(b *testing.B) { benchParallel64(b, true, replayUnused) })
}

// noRetry turns retries off; replayUnused configures every retry key (a
// replay buffer, an idempotency header, backoff, 502 and 504) on requests
// that never use them: GETs without a body that succeed.
const (
	noRetry      = "    retry: {attempts: 0}\n"
	replayUnused = "    retry: {attempts: 2, on: [connect-failure, refused-stream, gateway-error], backoff: {base: 25ms, max: 250ms}, idempotency_header: Idempotency-Key, replay_buffer: 65536}\n"
)

func benchParallel64(b *testing.B, fast bool, extra string) {
	origins := []*tinyOrigin{startTinyOrigin(b), startTinyOrigin(b), startTinyOrigin(b), startTinyOrigin(b)}
	g := startGatewayWith(b, fast, 2, extra, origins...)
	var clients sync.Map
	b.SetParallelism(32) // 32 × GOMAXPROCS goroutines; 64 on two cores
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		c, err := dial(g.Addr())
		if err != nil {
			b.Error(err)
			return
		}
		clients.Store(c, nil)
		for pb.Next() {
			if _, err := c.get(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
	reportCPU(b, cpu)
	clients.Range(func(k, _ any) bool { k.(*rawClient).c.Close(); return true })
}

// tracingBlock is a tracing block exporting to a real OTLP receiver (gRPC)
// on loopback, sampling ratio of the new traces: the cost of tracing on.
func tracingBlock(b *testing.B, ratio float64) string {
	rc, err := receiver.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rc.Close)
	return fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: %g}\n", rc.GRPCAddr(), ratio)
}

// blackholedBlock is a tracing block sampling every request and exporting
// to a receiver that accepts and never answers: once the export queue is
// full, every request is shed (not recorded, counted as dropped).
func blackholedBlock(b *testing.B) string {
	bh, err := receiver.StartBlackhole()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bh.Close() })
	return fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: 1.0}\n", bh.Addr())
}
