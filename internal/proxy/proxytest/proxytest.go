// Package proxytest builds the request flow of package proxy over real
// parts, for the tests of the serving paths (fastpath, httpserve) and of
// proxy itself: origins (package cluster, their pools dialling real
// sockets through upstream's dialer), a router, and a proxy.Handler
// counting into real metrics — what the gateway publishes, without its
// listeners and reloads. It also starts the loopback origins those tests
// send to.
//
// Invariants: everything New and the origin helpers start is stopped by
// the test's Cleanup; nothing here is used outside tests.
package proxytest

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/corput/corput/internal/accesslog"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/proxy"
	"github.com/corput/corput/internal/route"
	"github.com/corput/corput/internal/telemetry"
	"github.com/corput/corput/internal/tracing"
	"github.com/corput/corput/internal/tracing/receiver"
	"github.com/corput/corput/internal/workload"
)

// Origin is one origin of the rig: config.DefaultOrigin named Name over
// Endpoints (host:port), not pre-warmed, changed by Edit (nil: none).
type Origin struct {
	Name      string
	Endpoints []string
	Edit      func(*config.Origin)
}

// Config is what New builds.
type Config struct {
	Origins []Origin
	// Routes map requests to the origins; nil sends every request to the
	// first origin.
	Routes []route.Route
	// Loops is the number of loops (0: 2).
	Loops int
	// FastPath is downstream.fast_path: the fast path may serve the
	// origins (cluster.Origin.Fast).
	FastPath bool
	Log      *accesslog.Log  // nil: no access log
	Tracer   *tracing.Tracer // nil: tracing off
	Trusted  []netip.Prefix  // downstream.trusted_proxies
	// Workload is the configuration's workload block (nil: none); its
	// SLO monitors tick on SLOClock (nil: the wall clock).
	Workload *workload.Mix
	SLOClock clock.Clock
}

// Rig is a proxy.Handler serving with a table of real origins.
type Rig struct {
	*proxy.Handler
	Origins map[string]*cluster.Origin
	Metrics *telemetry.Metrics
}

// New builds the rig cfg describes; its origins close when tb ends.
func New(tb testing.TB, cfg Config) *Rig {
	tb.Helper()
	loops := cfg.Loops
	if loops == 0 {
		loops = 2
	}
	r := &Rig{Origins: map[string]*cluster.Origin{}, Metrics: telemetry.New()}
	env := &cluster.Env{
		Clock: clock.Real(), Log: slog.New(slog.DiscardHandler), Metrics: r.Metrics, Loops: loops,
		Fleet: config.Fleet{Size: 1}, Seed: 1, FastPath: cfg.FastPath, Workload: cfg.Workload, SLOClock: cfg.SLOClock,
	}
	for _, spec := range cfg.Origins {
		oc := config.DefaultOrigin()
		oc.Name = spec.Name
		oc.Pool.Prewarm = 0
		for _, a := range spec.Endpoints {
			oc.Endpoints = append(oc.Endpoints, config.Endpoint{Address: a, Weight: 1})
		}
		if spec.Edit != nil {
			spec.Edit(&oc)
		}
		o, err := cluster.New(&oc, env)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(o.Close)
		r.Origins[spec.Name] = o
	}
	routes := cfg.Routes
	if routes == nil && len(cfg.Origins) > 0 {
		routes = []route.Route{{Origin: cfg.Origins[0].Name}}
	}
	var classes *workload.Classifier
	if cfg.Workload != nil {
		classes = workload.NewClassifier(*cfg.Workload)
	}
	var served [5]prometheus.Counter
	for i, c := range telemetry.CodeClasses {
		served[i] = r.Metrics.DownstreamRequests.WithLabelValues(c)
	}
	r.Handler = proxy.NewHandler(&proxy.Table{
		Router: route.NewRouter(routes), Classes: classes, Origins: r.Origins,
		Forwarding: forward.Forwarding{Trusted: cfg.Trusted}, Tracer: cfg.Tracer,
	}, served, cfg.Log)
	return r
}

// Served is how many requests the handler counted with a status of class
// ("2xx", "4xx", ...).
func (r *Rig) Served(class string) int {
	return int(testutil.ToFloat64(r.Metrics.DownstreamRequests.WithLabelValues(class)))
}

// WaitServed waits until n requests are counted with a status of class:
// a serving path counts a request once its answer is written, which its
// client may have read by then. It fails tb after 10 s, or when more are
// counted.
func (r *Rig) WaitServed(tb testing.TB, class string, n int) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for got := r.Served(class); got != n; got = r.Served(class) {
		if got > n || time.Now().After(deadline) {
			tb.Fatalf("%d requests counted %s, want %d", got, class, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Serve starts an HTTP/1.1 and h2c (prior knowledge) origin on loopback
// serving h, and returns its host:port.
func Serve(tb testing.TB, h http.Handler) string {
	tb.Helper()
	s := httptest.NewUnstartedServer(h)
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	tb.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// ServeRaw starts an origin on loopback that serves each connection with
// serve (the connection is closed after it), and returns its host:port.
func ServeRaw(tb testing.TB, serve func(net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	return ln.Addr().String()
}

// Dead is a loopback address nothing listens on: a dial is refused.
func Dead(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Thinker is an origin that never answers: each request waits until it
// is cancelled (its client, or the gateway, gave up).
type Thinker struct {
	Addr string
	// Arrived is closed when the first request has reached the origin,
	// Cancelled when that request has been cancelled.
	Arrived, Cancelled chan struct{}
}

// Think starts a Thinker on loopback.
func Think(tb testing.TB) *Thinker {
	tb.Helper()
	th := &Thinker{Arrived: make(chan struct{}), Cancelled: make(chan struct{})}
	var first sync.Once
	th.Addr = Serve(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mine := false
		first.Do(func() { mine = true; close(th.Arrived) })
		<-r.Context().Done()
		if mine {
			close(th.Cancelled)
		}
	}))
	return th
}

// Tracer is a Tracer that samples every request, exporting over gRPC to
// a receiver on loopback; both stop when tb ends. Shut the Tracer down to
// flush its spans before reading the receiver's.
func Tracer(tb testing.TB) (*tracing.Tracer, *receiver.Receiver) {
	tb.Helper()
	rc, err := receiver.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(rc.Close)
	tr, err := tracing.New(&config.Tracing{Endpoint: rc.GRPCAddr(), Protocol: config.TracingGRPC, SampleRatio: 1}, tracing.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tr.Shutdown(context.Background()) })
	return tr, rc
}
