// Package gateway is corput's request path: it accepts downstream
// connections, places every request on a loop, routes it to an origin, and
// forwards it through that loop's subset, balancer and connection pools
// (docs/gateway.md).
//
// A loop is a shard of the gateway: its pools and picker state, not a
// thread. Each request (each HTTP/2 stream) is placed on a loop of its own,
// round robin, so every loop takes an equal share whatever the number of
// downstream connections; it then uses only that loop's picker and pools,
// so a request on loop A never touches loop B's connections (the Zuul
// insight, docs/spec.md). Per-origin state that
// must be shared — endpoint health, in-flight counts, Peak-EWMA latency — lives
// in the balancer's per-origin objects and is updated atomically.
//
// The request path takes no lock: the router is immutable, each loop's pool
// map is replaced whole on membership changes and read with one atomic load,
// pickers are immutable snapshots, and metric children are bound at start.
// Membership changes (Apply) are serialised per origin.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corput/corput/internal/accept"
	"github.com/corput/corput/internal/accesslog"
	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/edgetls"
	"github.com/corput/corput/internal/fastpath"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/httpserve"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/proxy"
	"github.com/corput/corput/internal/proxyproto"
	"github.com/corput/corput/internal/replay"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/slo"
	"github.com/corput/corput/internal/telemetry"
)

// Options are the gateway's injected parts; the zero value serves.
type Options struct {
	Clock   clock.Clock        // nil: the wall clock
	Seed    uint64             // seeds balancers and pool jitter
	Logger  *slog.Logger       // nil: slog.Default()
	Metrics *telemetry.Metrics // nil: a fresh registry
	// Dialers replaces the upstream dialer of the named origins (the lab
	// and tests count or shape connections with it).
	Dialers map[string]pool.Dialer
	// Dashboard is served at the admin listener's "/"; nil serves none.
	Dashboard http.Handler
	// Trace, when set, hears every attempt of every request as it ends
	// (forward.Policy.Trace, with the origin's name): tests compare the
	// gateway's decisions with the lab's through it.
	Trace func(origin, endpoint string, s forward.Step, r forward.Reason)
	// SameJitter gives every pool the same random stream, so pools that
	// lose an origin together retry it together: the no-jitter baseline
	// of the deploy drill (internal/drill). Never set it to serve.
	SameJitter bool
	// Load reads the configuration again for a reload (SIGHUP, POST
	// /admin/reload, --watch): corput serve passes config.Load of its
	// file with the fleet position it resolved. nil: reloads are refused.
	Load func() (*config.Config, error)
	// Listeners are listening sockets handed over (systemd socket
	// activation, LISTEN_FDS): Start serves them instead of binding
	// listen and admin. Either may be nil.
	Listeners Listeners
	// SLOClock, when set, is the clock of the SLO guard's and the
	// workload-mix monitor's windows and of the webhook's backoff, while
	// latencies are measured on Clock: a test drives minutes of the
	// guard's time over real sockets in seconds. nil: Clock.
	SLOClock clock.Clock
	// AccessLog, when set, is the access log instead of the one the
	// access_log block opens (tests give one with a writer of their own);
	// the gateway closes it on Shutdown.
	AccessLog *accesslog.Log
}

// Listeners are sockets the gateway serves instead of binding its own.
type Listeners struct {
	Listen, Admin net.Listener
}

// Gateway is a running corput gateway.
type Gateway struct {
	opts    Options
	clk     clock.Clock
	log     *slog.Logger
	metrics *telemetry.Metrics
	loops   int
	// adminToken is admin.token_file's token, read once by New ("" for
	// none); it is never logged.
	adminToken string

	// The configuration in force, replaced whole by a reload (reload.go),
	// and the requests' handler, which reads its table.
	state   atomic.Pointer[state]
	handler *proxy.Handler
	tlsCur  atomic.Pointer[edgetls.Policy]    // the downstream TLS policy in force: replaced by a reload
	ppCur   atomic.Pointer[proxyproto.Policy] // the PROXY protocol policy in force (nil: none): replaced by a reload
	rl      reloads                           // reloads' own bookkeeping
	alog    *accesslog.Log                    // nil: no access log
	// webhook posts scale-out events (workload.scale_out.webhook); nil
	// without one. Replaced by a reload that changes the address.
	webhook atomic.Pointer[slo.Notifier]

	// replays bounds all requests' replay buffers together
	// (limits.replay_buffers_bytes), across reloads.
	replays *replay.Cap
	// shadows runs the routes' mirrors (routes[].mirror); Shutdown cuts them.
	shadows *proxy.Shadows

	draining   atomic.Bool
	deaf       atomic.Bool           // a listener stopped accepting before Shutdown
	downstream [5]prometheus.Counter // by code class 1xx..5xx

	mu       sync.Mutex // guards following
	srv      server
	adminSrv *http.Server
	ln       *accept.Set // the downstream listener(s): a reload moves it to a new address
	adminLn  *accept.Set
	cur      [2]net.Listener // the listener of each set in use now (listenIdx, adminIdx)
	shed     []byte          // what the downstream listener answers at the descriptor limit
	serveErr chan error
	stopped  bool // Shutdown has run
	// the redirect_http listener and its server; nil without one
	redirectSrv *http.Server
	redirectLn  net.Listener
}

// New builds a gateway from a validated configuration. It opens no
// listener (see Start) but starts pre-warming upstream pools at once.
func New(cfg *config.Config, opts Options) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	adminToken, err := cfg.Admin.Token()
	if err != nil { // Validate read it a moment ago; it changed since
		return nil, fmt.Errorf("admin.token_file: %w", err)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = telemetry.New()
	}
	g := &Gateway{
		opts:    opts,
		clk:     opts.Clock,
		log:     opts.Logger,
		metrics: opts.Metrics,
		loops:   cfg.LoopCount(),

		adminToken: adminToken,
		replays:    newReplayCap(int64(cfg.Limits.ReplayBuffersBytes), opts.Metrics),
		shadows:    proxy.NewShadows(),
	}
	for i, c := range telemetry.CodeClasses {
		g.downstream[i] = g.metrics.DownstreamRequests.WithLabelValues(c)
	}
	if cfg.TLS != nil {
		p, err := edgetls.New(cfg.TLS, nil)
		if err != nil {
			return nil, err
		}
		g.tlsCur.Store(p)
	}
	alog, err := openAccessLog(cfg.AccessLog, opts)
	if err != nil {
		return nil, err
	}
	g.alog = alog
	g.setWebhook(cfg)
	tracer, err := g.newTracer(cfg.Tracing, fleetOf(cfg))
	if err != nil {
		g.alog.Close()
		return nil, err
	}
	st := newState(cfg, nil, tracer, g.replays, g.routing(nil))
	g.setEdges(st, nil)
	g.ppCur.Store(g.proxyPolicy(cfg))
	for i := range cfg.Origins {
		o, err := g.newOrigin(&cfg.Origins[i], cfg)
		if err != nil {
			for _, o := range st.list {
				o.Close()
			}
			g.alog.Close()
			tracer.Shutdown(context.Background())
			g.closeWebhook()
			return nil, err
		}
		st.add(o)
	}
	st.route()
	g.setMirrors(st, nil)
	g.handler = proxy.NewHandler(st.table, g.downstream, g.alog)
	g.setState(st)
	g.setFleetGauges(st.fleet())
	g.rl.init(g, cfg)
	g.metrics.OnScrape(g.refreshGauges)
	return g, nil
}

// newOrigin builds the origin oc of cfg.
func (g *Gateway) newOrigin(oc *config.Origin, cfg *config.Config) (*cluster.Origin, error) {
	return cluster.New(oc, &cluster.Env{
		Clock: g.clk, Log: g.log, Metrics: g.metrics, Loops: g.loops, Fleet: fleetOf(cfg), Seed: g.opts.Seed,
		Dialer: g.opts.Dialers[oc.Name], FastPath: cfg.Downstream.FastPath,
		SameJitter: g.opts.SameJitter, Trace: g.opts.Trace,
		Workload: cfg.Workload, SLOClock: g.sloClock(), Notify: g.notify,
	})
}

// st is the configuration in force.
func (g *Gateway) st() *state { return g.state.Load() }

// setState puts st in force: requests that start from now on read its
// table.
func (g *Gateway) setState(st *state) {
	g.state.Store(st)
	g.handler.Publish(st.table)
}

// openAccessLog opens the access_log block's log (nil when there is none),
// or takes Options.AccessLog.
func openAccessLog(c *config.AccessLog, opts Options) (*accesslog.Log, error) {
	if opts.AccessLog != nil || c == nil {
		return opts.AccessLog, nil
	}
	format, err := accesslog.ParseFormat(string(c.Format))
	if err != nil {
		return nil, err
	}
	return accesslog.Open(c.Path, accesslog.Options{
		Format: format, Sample: c.Sample, Seed: rng.Mix64(opts.Seed),
		Dropped: opts.Metrics.AccessLogDropped, Logger: opts.Logger,
	})
}

// ReopenAccessLog opens the access log's file again (after a rotation
// renamed it: SIGUSR1) and returns its path; without a file it does
// nothing and returns "".
func (g *Gateway) ReopenAccessLog() (path string, err error) {
	return g.alog.Path(), g.alog.Reopen()
}

// FastPath reports whether the fast path serves the named origin's
// cleartext HTTP/1.1 requests (otherwise net/http's server does), to
// HTTP/1.1 and HTTP/2 connections alike.
func (g *Gateway) FastPath(originName string) bool {
	o, ok := g.st().origins[originName]
	return ok && o.Fast() && g.st().cfg.TLS == nil
}

// Loops returns the number of loops.
func (g *Gateway) Loops() int { return g.loops }

// Apply replaces an origin's membership (from discovery, after debounce).
func (g *Gateway) Apply(originName string, members []balance.Member) error {
	o, ok := g.st().origins[originName]
	if !ok {
		return fmt.Errorf("apply membership: unknown origin %q", originName)
	}
	return o.Apply(members)
}

// SetSourceError records a membership source's error (nil when it
// recovered) for /admin/origins.
func (g *Gateway) SetSourceError(originName string, err error) {
	if o, ok := g.st().origins[originName]; ok {
		o.SetSourceError(err)
	}
}

// Server returns the downstream *http.Server serving g: HTTP/1.1 and h2c
// in cleartext, HTTP/1.1 and h2 with TLS.
func (g *Gateway) newServer() *http.Server {
	d := g.st().cfg.Downstream
	hh := httpserve.New(g.handler)
	hh.BodyReadTimeout = d.BodyReadTimeout
	srv := &http.Server{
		Handler:           hh,
		ReadHeaderTimeout: d.ReadHeaderTimeout,
		IdleTimeout:       d.IdleTimeout,
		MaxHeaderBytes:    d.MaxHeaderBytes,
		ConnContext:       httpserve.ConnContext,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	if g.st().cfg.TLS == nil {
		protos.SetUnencryptedHTTP2(true)
	} else {
		protos.SetHTTP2(true)
	}
	srv.Protocols = &protos
	return srv
}

// Start opens the downstream and admin listeners and serves in the
// background. Use Addr and AdminAddr for the bound addresses (":0" works).
func (g *Gateway) Start() error {
	cfg := g.st().cfg
	ln, err := bind(cfg.Listen, g.opts.Listeners.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	aln, err := bind(cfg.Admin.Listen, g.opts.Listeners.Admin)
	if err != nil {
		ln.Close()
		return fmt.Errorf("admin: %w", err)
	}
	if err := g.startRedirect(); err != nil {
		ln.Close()
		aln.Close()
		return fmt.Errorf("redirect_http.listen: %w", err)
	}
	// The protected admin paths are served without a token only where
	// both the configured host and the bound address are loopback (a host
	// name that resolves to 127.0.1.1 is not taken on trust).
	access := adminAccess(cfg, aln, g.adminToken)
	fc := g.fastConfig()
	if cfg.TLS != nil {
		// Each handshake takes the policy in force then: certificates,
		// client CAs, ticket keys and the rest rotate with a reload.
		fc.TLS = edgetls.Listener(g.tlsCur.Load)
	}
	shed := forward.FDLimit.Raw()
	if fc.TLS != nil {
		shed = []byte{} // plaintext would be garbage to a TLS client: close at once
	}
	cur := [2]net.Listener{g.edgeListener(g.acceptor("listen", ln, shed)), g.acceptor("admin", aln, nil)}
	set, adminSet := accept.NewSet(cur[listenIdx]), accept.NewSet(cur[adminIdx])
	ln, aln = set, adminSet
	// hs.TLSConfig stays nil: net/http then sets up its HTTP/2 server for
	// the h2 *tls.Conn the fast path hands it, whatever the policy's ALPN
	// list is now or after a reload, and checks no tls.Config of ours.
	hs := g.newServer()
	var srv server = hs
	var serve func() error
	if fc.TLS == nil && !cfg.Downstream.FastPath {
		ln = httpserve.GuardListener(ln)
		serve = func() error { return hs.Serve(ln) }
	} else {
		// The fast path serves the listener, or (fast_path: false over
		// TLS) ends TLS and hands every connection on: either way every
		// HTTP/1.1 connection net/http gets is under the framing guard.
		fc.HandOffAll = !cfg.Downstream.FastPath
		fs := fastpath.New(fc, hs)
		srv, serve = fs, func() error { return fs.Serve(ln) }
	}
	admin := &http.Server{
		Handler:           telemetry.ProtectAdmin(telemetry.AdminHandler(g.metrics, g, g.opts.Dashboard), access),
		ReadHeaderTimeout: 10 * time.Second,
	}
	g.mu.Lock()
	g.srv, g.adminSrv, g.ln, g.adminLn, g.cur, g.shed = srv, admin, set, adminSet, cur, shed
	g.serveErr = make(chan error, 2)
	g.mu.Unlock()
	go func() { g.serveErr <- g.ended("listen", serve()) }()
	go func() { g.serveErr <- g.ended("admin", admin.Serve(aln)) }()
	fl := g.st().fleet()
	g.log.Info("corput serving", "listen", ln.Addr().String(), "admin", aln.Addr().String(), "admin_access", access.Mode(),
		"loops", g.loops, "fleet_instance", fl.Instance, "fleet_size", fl.Size)
	if access.RefusesProtected() {
		g.log.Warn("the admin listener is not on loopback and admin.token_file is not set: /admin/*, /debug/pprof/* and the dashboard answer 403; only /metrics, /healthz and /readyz are served",
			"admin", aln.Addr().String())
	}
	return nil
}

// Indexes of Gateway.cur.
const (
	listenIdx = iota
	adminIdx
)

// bind is the listener for addr: the one handed over when there is one,
// else a new one.
func bind(addr string, inherited net.Listener) (net.Listener, error) {
	if inherited != nil {
		return inherited, nil
	}
	return net.Listen("tcp", addr)
}

// adminAccess is the admin API's access rule for the admin listener ln.
func adminAccess(cfg *config.Config, ln net.Listener, token string) telemetry.AdminAccess {
	return telemetry.AdminAccess{Token: token, Loopback: cfg.Admin.Loopback() && telemetry.LoopbackAddr(ln.Addr())}
}

// fastConfig is what the fast path serves this gateway with.
func (g *Gateway) fastConfig() fastpath.Config {
	return fastpath.Config{Handler: g.handler, Downstream: g.st().cfg.Downstream}
}

// acceptor wraps a listener so that no transient accept error, running
// out of descriptors included, ever ends its serve loop; errors are
// counted in corput_accept_errors_total and logged once per burst, and
// shed (when not nil) answers clients at the descriptor limit.
func (g *Gateway) acceptor(name string, ln net.Listener, shed []byte) net.Listener {
	return accept.New(ln, accept.Options{
		Name: name, Logger: g.log, Shed: shed,
		Count: func(reason string) { g.metrics.AcceptErrors.WithLabelValues(reason).Inc() },
	})
}

// ended records a serve loop's return. Before Shutdown it means a
// listener stopped accepting for good: the gateway is then neither ready
// nor live (/readyz and /healthz fail, so an orchestrator restarts it),
// and the log says so at error level.
func (g *Gateway) ended(name string, err error) error {
	if !g.draining.Load() && !errors.Is(err, http.ErrServerClosed) {
		g.log.Error("listener stopped accepting; /readyz and /healthz now fail", "listener", name, "err", err)
		g.deaf.Store(true)
	}
	return err
}

// server is the downstream server: net/http's, or the fast path's.
type server interface {
	Shutdown(ctx context.Context) error
	Close() error
}

// Addr is the downstream listener's address.
func (g *Gateway) Addr() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln == nil {
		return ""
	}
	return g.ln.Addr().String()
}

// AdminAddr is the admin listener's address.
func (g *Gateway) AdminAddr() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.adminLn == nil {
		return ""
	}
	return g.adminLn.Addr().String()
}

// Shutdown stops the gateway gracefully: /readyz fails at once, the
// downstream listener stops accepting, in-flight requests finish until ctx
// ends, then pools close. The admin listener closes last.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.draining.Store(true)
	g.mu.Lock()
	srv, admin, errs := g.srv, g.adminSrv, g.serveErr
	collect := !g.stopped // the serve loops report once: a later Shutdown or Close must not wait for them
	g.stopped = true
	g.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Shutdown(ctx)
		if err != nil {
			srv.Close() // deadline passed: cut what is left
		}
	}
	g.closeRedirect()
	g.shadows.Close() // the last request's mirror handed off: cut the mirrors in flight
	g.closeOrigins()
	g.closeWebhook()
	err = errors.Join(err, g.alog.Close(), g.stopTracer(ctx)) // after the last request's line and span
	if admin != nil {
		aerr := admin.Shutdown(ctx)
		if aerr != nil {
			admin.Close()
		}
		err = errors.Join(err, aerr)
		for i := 0; collect && i < 2; i++ {
			if e := <-errs; e != nil && !errors.Is(e, http.ErrServerClosed) {
				err = errors.Join(err, e)
			}
		}
	}
	return err
}

// Close shuts down at once, cutting in-flight requests.
func (g *Gateway) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return g.Shutdown(ctx)
}

// closeOrigins closes every origin, those a reload removed included, and
// waits for the removed ones' drains to end.
func (g *Gateway) closeOrigins() {
	for _, o := range g.st().list {
		o.Close()
	}
	g.rl.mu.Lock()
	retired := g.rl.retired
	g.rl.mu.Unlock()
	for _, o := range retired {
		o.Close()
	}
	g.rl.drains.Wait()
}

// Live implements telemetry.AdminSource: every listener still accepts.
func (g *Gateway) Live() bool { return !g.deaf.Load() }

// Ready implements telemetry.AdminSource: config applied, pools pre-warmed,
// not draining, every listener accepting.
func (g *Gateway) Ready() bool {
	if g.draining.Load() || g.deaf.Load() {
		return false
	}
	st := g.st()
	for _, o := range st.list {
		if !o.Ready() && !st.shadowOnly[o.Name()] {
			return false
		}
	}
	return true
}
