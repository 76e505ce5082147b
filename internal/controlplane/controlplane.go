package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/tlsfiles"
	"github.com/corput/corput/internal/watch"
)

// DefaultFollowInterval is how often a follower reads the state file.
const DefaultFollowInterval = time.Second

// DefaultRelayNodeID is the node id a relaying control plane presents to
// its upstream server.
const DefaultRelayNodeID = "corput-control-plane"

// Options configure a control plane (the flags of `corput control-plane`).
type Options struct {
	Listen    string // the ADS (gRPC) address; required
	Admin     string // the admin HTTP address; "" for none
	StatePath string // the state file; required

	// Exactly one way to know the membership: a source file (Source
	// without Relay), an upstream ADS server (Relay, with the clusters
	// from Clusters and/or Source), or the writer's state (Follow).
	Source      string
	Relay       string
	RelayNodeID string   // "" = DefaultRelayNodeID
	Clusters    []string // relay mode: clusters to relay, with the default sizing
	Follow      bool

	// TLS serves ADS over TLS: Cert and Key are the server's, and a CA
	// bundle requires client certificates it verifies (mTLS). The files
	// are read again at every handshake. nil: plaintext.
	TLS *tlsfiles.Files
	// FleetIdentity refuses a fleet subscription whose node id is not an
	// identity (a DNS or URI SAN) of the stream's client certificate; it
	// needs TLS with a CA bundle.
	FleetIdentity bool
	// RelayTLS dials Relay over TLS with these files (CA, server name,
	// client certificate); nil: plaintext.
	RelayTLS *tlsfiles.Files

	Debounce       time.Duration // < 0: none; 0 = DefaultDebounce
	FollowInterval time.Duration // 0 = DefaultFollowInterval
	// FleetGrace is how long the writer holds a gateway's fleet position
	// after its last fleet stream closed; 0 = DefaultFleetGrace.
	FleetGrace time.Duration
	Clock      clock.Clock  // the debounce's and fleet grace's clock; nil = clock.Real()
	Logger     *slog.Logger // nil = slog.Default()
}

// ControlPlane is a running `corput control-plane`: the ADS server, its
// writer (or follower) and sources, and the admin listener.
type ControlPlane struct {
	opts    Options
	metrics *Metrics
	server  *Server
	writer  *writer   // nil for a follower
	fleet   *fleet    // nil for a follower
	follow  *follower // nil for the writer
	relay   *relay    // nil unless relaying
	log     *slog.Logger

	grpcLis  net.Listener
	admin    *http.Server
	adminLis net.Listener
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	closed   sync.Once
}

// validate checks the options' combination.
func (o *Options) validate() error {
	var errs []error
	if o.Listen == "" {
		errs = append(errs, errors.New("--listen ADDR is required"))
	}
	if o.StatePath == "" {
		errs = append(errs, errors.New("--state FILE is required"))
	}
	switch {
	case o.Follow && (o.Source != "" || o.Relay != "" || len(o.Clusters) > 0):
		errs = append(errs, errors.New("--follow serves the writer's state: it takes no --source, --relay or --clusters"))
	case o.Follow:
	case o.Relay == "" && o.Source == "":
		errs = append(errs, errors.New("name the membership: --source FILE, --relay ADDR (with --clusters or --source), or --follow"))
	case o.Relay == "" && len(o.Clusters) > 0:
		errs = append(errs, errors.New("--clusters names the clusters to relay: it needs --relay ADDR"))
	case o.Relay != "" && o.Source == "" && len(o.Clusters) == 0:
		errs = append(errs, errors.New("--relay needs the clusters to relay: --clusters a,b or a --source file of origins"))
	}
	if o.FleetGrace < 0 {
		errs = append(errs, fmt.Errorf("--fleet-grace %v: must be > 0", o.FleetGrace))
	}
	if o.Relay != "" {
		if _, _, err := net.SplitHostPort(o.Relay); err != nil {
			errs = append(errs, fmt.Errorf("--relay %q is not host:port", o.Relay))
		}
	} else if o.RelayTLS != nil {
		errs = append(errs, errors.New("--relay-tls-* dial the --relay server over TLS: they need --relay ADDR"))
	}
	if o.TLS != nil && (o.TLS.Cert == "" || o.TLS.Key == "") {
		errs = append(errs, errors.New("TLS needs the server's certificate and key: set --tls-cert and --tls-key (--tls-client-ca alone asks for client certificates over a TLS listener)"))
	}
	if o.FleetIdentity && (o.TLS == nil || o.TLS.CA == "") {
		errs = append(errs, errors.New("--fleet-require-identity checks node ids against client certificates: it needs mTLS (--tls-cert, --tls-key and --tls-client-ca)"))
	}
	for _, c := range o.Clusters {
		if err := checkName(c); err != nil {
			errs = append(errs, fmt.Errorf("--clusters: %w", err))
		}
	}
	return errors.Join(errs...)
}

// origins reads the origins to serve: the source file's, and in relay
// mode the --clusters not in it, with the default sizing.
func (o *Options) origins() ([]Origin, error) {
	var out []Origin
	if o.Source != "" {
		var err error
		if out, err = ReadSource(o.Source, o.Relay == ""); err != nil {
			return nil, err
		}
	}
	for _, c := range o.Clusters {
		if !slices.ContainsFunc(out, func(x Origin) bool { return x.Name == c }) {
			z, _ := sizingOf(0, 0, 0)
			out = append(out, Origin{Name: c, Sizing: z})
		}
	}
	return out, nil
}

// Start opens the state, reads the sources and serves. An error in the
// input (flags, source file, state file) satisfies IsConfigError.
func Start(opts Options) (*ControlPlane, error) {
	if err := opts.validate(); err != nil {
		return nil, configError{err}
	}
	if opts.Debounce == 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.FollowInterval <= 0 {
		opts.FollowInterval = DefaultFollowInterval
	}
	if opts.FleetGrace == 0 {
		opts.FleetGrace = DefaultFleetGrace
	}
	if opts.RelayNodeID == "" {
		opts.RelayNodeID = DefaultRelayNodeID
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &ControlPlane{opts: opts, metrics: NewMetrics(), log: opts.Logger}
	var specs []Origin
	prefix := "f"
	if !opts.Follow {
		var err error
		if specs, err = opts.origins(); err != nil {
			return nil, configError{err}
		}
		if c.writer, err = openWriter(opts.StatePath, opts.Debounce, opts.Clock, c.log, c.metrics); err != nil {
			return nil, err
		}
		prefix = strconv.FormatUint(c.writer.state.Generation, 10) + "."
	}
	var serverOpts []grpc.ServerOption
	if opts.TLS != nil {
		files, err := tlsfiles.New(*opts.TLS, c.log)
		if err != nil {
			c.Close()
			return nil, configError{fmt.Errorf("--tls-cert, --tls-key, --tls-client-ca: %w", err)}
		}
		serverOpts = append(serverOpts, grpc.Creds(handshakes{credentials.NewTLS(files.Server()), c.metrics, c.log}))
	}
	if opts.RelayTLS != nil {
		if _, err := tlsfiles.New(*opts.RelayTLS, c.log); err != nil {
			c.Close()
			return nil, configError{fmt.Errorf("--relay-tls-*: %w", err)}
		}
	}
	c.server = NewServer(prefix, c.metrics, c.log, serverOpts...)
	c.server.identity = opts.FleetIdentity
	if !opts.Follow {
		if err := c.startFleet(); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.listen(); err != nil {
		c.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.goRun(func() { _ = c.server.Serve(c.grpcLis) })
	if c.admin != nil {
		c.goRun(func() { _ = c.admin.Serve(c.adminLis) })
	}
	if opts.Follow {
		c.follow = &follower{path: opts.StatePath, server: c.server, metrics: c.metrics, log: c.log}
		c.follow.load()
		c.goRun(func() { c.pollState(ctx) })
		c.log.Info("control plane: following the writer's state", "state", opts.StatePath, "listen", c.Addr())
		return c, nil
	}
	if err := c.writer.start(c.server); err != nil {
		c.Close()
		return nil, err
	}
	if opts.Relay != "" {
		c.relay = &relay{addr: opts.Relay, node: opts.RelayNodeID, tls: opts.RelayTLS, log: c.log, offer: c.writer.offerMembers}
	}
	c.apply(ctx, specs)
	c.writer.flush() // the first set applies at once
	if opts.Source != "" {
		w, err := watch.New([]string{opts.Source}, watch.Options{
			Debounce: min(watch.DefaultDebounce, max(opts.Debounce, 10*time.Millisecond)),
			Logger:   c.log,
			OnChange: func([]string) { c.reread(ctx) },
		})
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("--source: %w", err)
		}
		c.goRun(func() { _ = w.Run(ctx) })
	}
	c.log.Info("control plane: serving", "listen", c.Addr(), "admin", c.AdminAddr(), "state", opts.StatePath,
		"source", opts.Source, "relay", opts.Relay, "origins", len(specs), "debounce", opts.Debounce, "fleet_grace", opts.FleetGrace,
		"tls", opts.TLS != nil, "mtls", opts.TLS != nil && opts.TLS.CA != "", "fleet_require_identity", opts.FleetIdentity)
	c.warnPlaintext()
	return c, nil
}

// warnPlaintext warns of plaintext xDS off loopback: anyone who reaches
// the listener can read the membership and claim fleet positions, and a
// relay's upstream can be impersonated.
func (c *ControlPlane) warnPlaintext() {
	if c.opts.TLS == nil && !tlsfiles.Loopback(c.Addr()) {
		c.log.Warn("control plane: serving xDS in plaintext on a non-loopback address: anyone who reaches it can read the membership and claim a gateway's fleet position; set --tls-cert and --tls-key (and --tls-client-ca)",
			"listen", c.Addr())
	}
	if c.opts.Relay != "" && c.opts.RelayTLS == nil && !tlsfiles.Loopback(c.opts.Relay) {
		c.log.Warn("control plane: relaying from a non-loopback server in plaintext: anyone on the path can read or forge the membership; set --relay-tls-ca (or --relay-tls for the system roots)",
			"relay", c.opts.Relay)
	}
}

// startFleet restores the persisted fleet positions and has the server
// count fleet streams for them, before anything is served.
func (c *ControlPlane) startFleet() error {
	f, err := newFleet(&fleet{
		clk: c.opts.Clock, grace: c.opts.FleetGrace, join: max(c.opts.Debounce, 0), log: c.log, metrics: c.metrics,
		persist: c.writer.persistFleet, publish: c.server.publishFleet,
	}, c.writer.snapshot().Fleet)
	if err != nil {
		return err
	}
	c.fleet = f
	c.server.setFleet(f)
	return nil
}

func (c *ControlPlane) goRun(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// listen opens the gRPC and admin listeners.
func (c *ControlPlane) listen() error {
	lis, err := net.Listen("tcp", c.opts.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	c.grpcLis = lis
	if c.opts.Admin == "" {
		return nil
	}
	if c.adminLis, err = net.Listen("tcp", c.opts.Admin); err != nil {
		return fmt.Errorf("--admin: %w", err)
	}
	c.admin = &http.Server{Handler: c.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	return nil
}

// apply hands a set of origins to the writer, and in relay mode makes
// the upstream subscription follow their names.
func (c *ControlPlane) apply(ctx context.Context, specs []Origin) {
	c.writer.setOrigins(specs)
	if c.relay != nil {
		names := make([]string, len(specs))
		for i, o := range specs {
			names[i] = o.Name
		}
		c.relay.follow(ctx, names)
	}
}

// reread reads the source file again after a change; an invalid file
// keeps the origins and memberships applied last.
func (c *ControlPlane) reread(ctx context.Context) {
	specs, err := c.opts.origins()
	if err != nil {
		c.log.Warn("control plane: source file refused; serving the last good one", "err", err)
		return
	}
	c.log.Info("control plane: source file changed", "file", c.opts.Source, "origins", len(specs))
	c.apply(ctx, specs)
}

// pollState has a follower read the state file every FollowInterval.
func (c *ControlPlane) pollState(ctx context.Context) {
	t := time.NewTicker(c.opts.FollowInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.follow.load()
		}
	}
}

// Addr is the ADS address served.
func (c *ControlPlane) Addr() string { return c.grpcLis.Addr().String() }

// AdminAddr is the admin address served, "" without one.
func (c *ControlPlane) AdminAddr() string {
	if c.adminLis == nil {
		return ""
	}
	return c.adminLis.Addr().String()
}

// Metrics returns the control plane's metrics.
func (c *ControlPlane) Metrics() *Metrics { return c.metrics }

// Ready reports whether every origin to serve is published.
func (c *ControlPlane) Ready() bool {
	if c.follow != nil {
		return c.follow.ready()
	}
	return c.writer.ready()
}

// State returns a copy of the state served: the writer's as last
// written, or a follower's as last read.
func (c *ControlPlane) State() *State {
	if c.follow != nil {
		return c.follow.snapshot()
	}
	return c.writer.snapshot()
}

// Fleet lists the fleet positions in instance order; nil for a follower,
// which assigns none.
func (c *ControlPlane) Fleet() []FleetMember {
	if c.fleet == nil {
		return nil
	}
	return c.fleet.members()
}

// Close stops the sources, the fleet, the writer (releasing the state lock), the
// ADS server (cutting every stream: gateways keep their last accepted
// assignment) and the admin listener.
func (c *ControlPlane) Close() {
	c.closed.Do(func() {
		if c.cancel != nil {
			c.cancel()
		}
		if c.relay != nil {
			c.relay.stop()
		}
		if c.fleet != nil {
			c.fleet.close()
		}
		if c.writer != nil {
			c.writer.close()
		}
		if c.server != nil {
			c.server.Stop()
		}
		if c.grpcLis != nil {
			c.grpcLis.Close()
		}
		if c.admin != nil {
			c.admin.Close()
		} else if c.adminLis != nil {
			c.adminLis.Close()
		}
		c.wg.Wait()
	})
}

// relay follows the upstream server's EDS for the named clusters with
// corput's own xDS client (discovery.XDS): the usable endpoints of each
// cluster's lowest usable priority, which is the set a gateway would use,
// so the indices cover exactly the endpoints gateways place.
type relay struct {
	addr, node string
	tls        *tlsfiles.Files // nil: plaintext
	log        *slog.Logger
	offer      func(string, []discovery.Endpoint)

	mu     sync.Mutex // guards following
	names  []string
	cancel context.CancelFunc
	done   chan struct{}
}

// follow (re)subscribes when the set of names changes.
func (r *relay) follow(ctx context.Context, names []string) {
	names = slices.Sorted(slices.Values(names))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil && slices.Equal(names, r.names) {
		return
	}
	r.stopLocked()
	r.names = names
	if len(names) == 0 {
		return
	}
	clusters := make(map[string]string, len(names))
	for _, n := range names {
		clusters[n] = n
	}
	x, err := discovery.NewXDS(discovery.XDSConfig{Server: r.addr, NodeID: r.node, Clusters: clusters, TLS: r.tls, Logger: r.log.With("relay", r.addr)})
	if err != nil {
		r.log.Error("control plane: relay", "err", err)
		return
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	r.cancel, r.done = cancel, done
	go func() {
		defer close(done)
		_ = x.Run(rctx, func(u discovery.Update) { r.offer(u.Origin, u.Endpoints) })
	}()
	r.log.Info("control plane: relaying", "upstream", r.addr, "node", r.node, "clusters", slices.Collect(maps.Keys(clusters)))
}

func (r *relay) stopLocked() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
		r.cancel, r.done = nil, nil
	}
}

func (r *relay) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
}

// adminHandler serves /healthz, /readyz, /metrics and /admin/fleet.
func (c *ControlPlane) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/fleet", c.serveFleet)
	mux.Handle("GET /metrics", c.metrics.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeText(w, http.StatusOK, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !c.Ready() {
			writeText(w, http.StatusServiceUnavailable, "not ready\n")
			return
		}
		writeText(w, http.StatusOK, "ready\n")
	})
	return mux
}

// serveFleet lists the fleet positions as JSON: [{"node", "instance",
// "connected"}] in instance order. A follower assigns none: 404.
func (c *ControlPlane) serveFleet(w http.ResponseWriter, _ *http.Request) {
	if c.fleet == nil {
		writeText(w, http.StatusNotFound, "a follower assigns no fleet positions: ask the writer\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(c.fleet.members())
}

func writeText(w http.ResponseWriter, code int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(s))
}
