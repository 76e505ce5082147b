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
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/rest"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/telemetry"
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
	Listen string // the ADS (gRPC) address; required
	Admin  string // the admin HTTP address; "" for none
	// StatePath is the state file, or "kubernetes:NAMESPACE/NAME"
	// (StateKubernetesPrefix): the state in ConfigMaps of that namespace
	// whose names start with NAME, written by the replica that holds the
	// Lease NAME there; required.
	StatePath string

	// Exactly one way to know the membership: a source file (Source
	// without Relay; its origins list endpoints or name Kubernetes
	// Services), an upstream ADS server (Relay, with the clusters from
	// Clusters and/or Source), or the writer's state file (Follow).
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
	// The Kubernetes API (for Services in the source, or a state in the
	// API): Kube when set (tests), else the Kubeconfig file, else the
	// pod's service account.
	Kube       *rest.Config
	Kubeconfig string
	// With the state in the Kubernetes API: the Lease's timing (0 =
	// DefaultLeaseDuration, DefaultLeaseRetry), this replica's identity
	// in it ("" = the host name), the fleet port (FleetListen: the leader
	// assigns fleet positions on it, the others forward it to the leader)
	// and the address the other replicas reach it at ("" = FleetListen's
	// own address, which must then be a specific one).
	LeaseDuration time.Duration
	LeaseRetry    time.Duration
	ID            string
	FleetListen   string
	Advertise     string

	Debounce       time.Duration // < 0: none; 0 = DefaultDebounce
	FollowInterval time.Duration // 0 = DefaultFollowInterval
	// FleetGrace is how long the writer holds a gateway's fleet position
	// after its last fleet stream closed; 0 = DefaultFleetGrace.
	FleetGrace time.Duration
	Clock      clock.Clock  // the debounce's, fleet grace's and Lease's clock; nil = clock.Real()
	Logger     *slog.Logger // nil = slog.Default()
}

// ControlPlane is a running `corput control-plane`: the ADS server, its
// writer (or follower) and sources, and the admin listener.
type ControlPlane struct {
	opts     Options
	metrics  *Metrics
	server   *Server
	follow   *follower   // nil for a writer of a state file
	relay    *relay      // nil unless relaying
	kube     *kubeClient // nil without the Kubernetes API
	source   *kubeSource // nil unless the source names Services
	kubeRole *kubeRole   // nil unless the state is in the Kubernetes API
	log      *slog.Logger

	roleMu sync.Mutex // guards following
	writer *writer    // nil for a follower (a state file's, or a replica without the Lease)
	fleet  *fleet     // nil for a follower
	specs  []Origin   // the source file's origins as applied last

	grpcLis   net.Listener
	fleetPort *fleetPort // nil unless FleetListen
	admin     *http.Server
	adminLis  net.Listener
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closed    sync.Once
}

// validate checks the options' combination.
func (o *Options) validate() error {
	var errs []error
	if o.Listen == "" {
		errs = append(errs, errors.New("--listen ADDR is required"))
	}
	if o.StatePath == "" {
		errs = append(errs, errors.New("--state FILE is required (or --state kubernetes:NAMESPACE/NAME)"))
	}
	_, _, kubeState, err := kubeStateRef(o.StatePath)
	errs = append(errs, err)
	switch {
	case o.Follow && kubeState:
		errs = append(errs, errors.New("--follow reads a state file; with the state in the Kubernetes API every replica follows it, and the one holding the Lease writes"))
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
	switch {
	case o.FleetListen != "" && !kubeState:
		errs = append(errs, errNoFleetPort)
	case kubeState && o.FleetListen == "":
		errs = append(errs, errors.New("--fleet-listen ADDR is required with the state in the Kubernetes API: the leader assigns fleet positions there, and the other replicas forward it to the leader"))
	}
	if o.Advertise != "" {
		if _, _, err := net.SplitHostPort(o.Advertise); err != nil {
			errs = append(errs, fmt.Errorf("--advertise %q is not host:port", o.Advertise))
		}
	}
	if o.LeaseDuration < 0 || (o.LeaseDuration > 0 && o.LeaseDuration%time.Second != 0) {
		errs = append(errs, fmt.Errorf("--lease-duration %v: a whole number of seconds ≥ 1s (the Lease holds seconds)", o.LeaseDuration))
	}
	if o.LeaseRetry < 0 || (o.LeaseRetry > 0 && o.LeaseRetry*3 > max(o.LeaseDuration, DefaultLeaseDuration)*2) {
		errs = append(errs, fmt.Errorf("--lease-retry %v: must be > 0 and below two thirds of --lease-duration", o.LeaseRetry))
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
	var missing []string
	for _, org := range out {
		for i := range org.Services {
			if org.Services[i].Namespace != "" {
				continue
			}
			if org.Services[i].Namespace = o.ownNamespace(); org.Services[i].Namespace == "" {
				missing = append(missing, fmt.Sprintf("%s: origin %s: services[%d].namespace: missing; name the Service's namespace "+
					"(the default, the control plane's own, is known only in a pod or with --state kubernetes:NAMESPACE/NAME)", o.Source, org.Name, i))
			}
		}
	}
	if len(missing) > 0 {
		return nil, errors.New(strings.Join(missing, "\n"))
	}
	return out, nil
}

// inClusterNamespace is where a pod reads its own namespace.
var inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ownNamespace is the control plane's namespace: the state's, when it is
// in the Kubernetes API, else the pod's; "" outside a cluster.
func (o *Options) ownNamespace() string {
	if ns, _, ok, err := kubeStateRef(o.StatePath); ok && err == nil {
		return ns
	}
	b, err := os.ReadFile(inClusterNamespace)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
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
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.LeaseRetry == 0 {
		opts.LeaseRetry = min(DefaultLeaseRetry, opts.LeaseDuration/4)
	}
	if opts.ID == "" {
		opts.ID, _ = os.Hostname()
	}
	c := &ControlPlane{opts: opts, metrics: NewMetrics(), log: opts.Logger}
	ns, name, kubeState, _ := kubeStateRef(opts.StatePath)
	var specs []Origin
	prefix := "f"
	if !opts.Follow {
		var err error
		if specs, err = opts.origins(); err != nil {
			return nil, configError{err}
		}
		c.specs = specs
	}
	if kubeState || slices.ContainsFunc(specs, func(o Origin) bool { return o.Services != nil }) {
		var err error
		if c.kube, err = newKubeClient(&opts, c.metrics, opts.Clock.Now); err != nil {
			return nil, err
		}
	}
	switch {
	case kubeState:
		// Every replica serves the same state; a prefix of its own keeps
		// a replica's version strings from meaning another's content.
		prefix = "k" + strconv.FormatInt(time.Now().UnixNano(), 36) + "."
	case !opts.Follow:
		fs, st, err := openFileStore(opts.StatePath, c.log)
		if err != nil {
			c.Close()
			return nil, err
		}
		if c.writer, err = openWriter(fs, st, opts.Debounce, opts.Clock, c.log, c.metrics); err != nil {
			c.Close()
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
	if c.writer != nil {
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
	if opts.Relay != "" {
		c.relay = &relay{addr: opts.Relay, node: opts.RelayNodeID, tls: opts.RelayTLS, log: c.log, offer: c.offerRelayed}
	}
	if c.kube != nil && slices.ContainsFunc(specs, func(o Origin) bool { return o.Services != nil }) {
		c.source = newKubeSource(c.kube, c.log, c.offer)
	}
	if kubeState {
		c.startKube(ctx, ns, name)
		c.applySources(ctx)
	} else {
		if err := c.writer.start(c.server, nil); err != nil {
			c.Close()
			return nil, err
		}
		c.applySources(ctx)
		c.writer.flush() // the first set applies at once
	}
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
	c.log.Info("control plane: serving", "listen", c.Addr(), "admin", c.AdminAddr(), "fleet_listen", c.FleetAddr(), "state", opts.StatePath,
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

// role returns the writer and fleet, both nil for a follower.
func (c *ControlPlane) role() (*writer, *fleet) {
	c.roleMu.Lock()
	defer c.roleMu.Unlock()
	return c.writer, c.fleet
}

// offer hands a membership from the Kubernetes source to the writer;
// a follower has none (it serves the writer's state, and its source
// keeps its caches warm for the day it leads).
func (c *ControlPlane) offer(name string, m membership, urgent bool) {
	if w, _ := c.role(); w != nil {
		w.offer(name, m, urgent)
	}
}

// offerRelayed hands a relayed membership to the writer, if this is one.
func (c *ControlPlane) offerRelayed(name string, eps []discovery.Endpoint) {
	if w, _ := c.role(); w != nil {
		w.offerMembers(name, eps)
	}
}

// startFleet restores the persisted fleet positions and has the server
// count fleet streams for them, before anything is served.
func (c *ControlPlane) startFleet() error {
	w, _ := c.role()
	f, err := newFleet(&fleet{
		clk: c.opts.Clock, grace: c.opts.FleetGrace, join: max(c.opts.Debounce, 0), log: c.log, metrics: c.metrics,
		persist: w.persistFleet, publish: c.server.publishFleet,
	}, w.snapshot().Fleet)
	if err != nil {
		return err
	}
	c.roleMu.Lock()
	c.fleet = f
	c.roleMu.Unlock()
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

// listen opens the gRPC, fleet and admin listeners: every socket the
// control plane serves is opened here.
func (c *ControlPlane) listen() error {
	lis, err := net.Listen("tcp", c.opts.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	c.grpcLis = lis
	if c.opts.FleetListen != "" {
		fl, err := net.Listen("tcp", c.opts.FleetListen)
		if err != nil {
			return fmt.Errorf("--fleet-listen: %w", err)
		}
		c.fleetPort = newFleetPort(fl, c.log)
		if c.opts.Advertise == "" {
			if ip := fl.Addr().(*net.TCPAddr).IP; ip.IsUnspecified() {
				return configError{fmt.Errorf("--fleet-listen %s binds every address: give --advertise HOST:PORT, the address the other replicas reach it at (in a pod: $(POD_IP):PORT)", c.opts.FleetListen)}
			}
			c.opts.Advertise = fl.Addr().String()
		}
	}
	if c.opts.Admin == "" {
		return nil
	}
	if c.adminLis, err = net.Listen("tcp", c.opts.Admin); err != nil {
		return fmt.Errorf("--admin: %w", err)
	}
	c.admin = &http.Server{Handler: c.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	return nil
}

// applySources hands the source file's origins to the writer (if this is
// one) and to the sources that follow them: the relay's subscription and
// the Kubernetes Services.
func (c *ControlPlane) applySources(ctx context.Context) {
	c.roleMu.Lock()
	specs, w := c.specs, c.writer
	c.roleMu.Unlock()
	if w != nil {
		w.setOrigins(specs)
	}
	if c.relay != nil {
		names := make([]string, len(specs))
		for i, o := range specs {
			names[i] = o.Name
		}
		c.relay.follow(ctx, names)
	}
	if c.source != nil {
		c.source.setOrigins(specs)
		if w != nil {
			c.source.reoffer()
		}
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
	c.roleMu.Lock()
	c.specs = specs
	c.roleMu.Unlock()
	c.applySources(ctx)
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

// FleetAddr is the fleet port's address, "" without one.
func (c *ControlPlane) FleetAddr() string {
	if c.fleetPort == nil {
		return ""
	}
	return c.fleetPort.lis.Addr().String()
}

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
	if w, _ := c.role(); w != nil {
		return w.ready()
	}
	return c.follow.ready()
}

// Leading reports whether this replica writes the state: a state file's
// writer, or the replica that holds the Lease.
func (c *ControlPlane) Leading() bool {
	w, _ := c.role()
	return w != nil
}

// State returns a copy of the state served: the writer's as last
// written, or a follower's as last read.
func (c *ControlPlane) State() *State {
	if w, _ := c.role(); w != nil {
		return w.snapshot()
	}
	return c.follow.snapshot()
}

// Fleet lists the fleet positions in instance order; nil for a follower,
// which assigns none.
func (c *ControlPlane) Fleet() []FleetMember {
	if _, f := c.role(); f != nil {
		return f.members()
	}
	return nil
}

// Close stops the sources, the election (releasing the Lease), the fleet,
// the writer (releasing the state file's lock), the ADS server (cutting
// every stream: gateways keep their last accepted assignment) and the
// admin listener.
func (c *ControlPlane) Close() {
	c.closed.Do(func() {
		if c.cancel != nil {
			c.cancel()
		}
		if c.relay != nil {
			c.relay.stop()
		}
		if c.source != nil {
			c.source.close()
		}
		// The election ends with ctx: it stops leading (closing the
		// leader's writer and fleet) before it releases the Lease.
		if c.kubeRole != nil {
			<-c.kubeRole.elected
		}
		if w, f := c.role(); f != nil || w != nil {
			if f != nil {
				f.close()
			}
			if w != nil {
				w.close()
			}
		}
		if c.server != nil {
			c.server.Stop()
		}
		if c.grpcLis != nil {
			c.grpcLis.Close()
		}
		if c.fleetPort != nil {
			c.fleetPort.close()
		}
		if c.admin != nil {
			c.admin.Close()
		} else if c.adminLis != nil {
			c.adminLis.Close()
		}
		c.wg.Wait()
		if c.kube != nil {
			c.kube.close()
		}
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
	telemetry.HandleProbesWithDetail(mux, nil, c.Ready, c.readyDetail) // alive while the process runs
	return mux
}

// readyDetail follows /readyz's first line: with the state in the
// Kubernetes API, the replica's role, and whether the API server answers
// (while it does not, the last good state is served and /readyz stays
// 200: the gateways are better served by it than by no control plane).
func (c *ControlPlane) readyDetail() string {
	var b strings.Builder
	if c.kubeRole != nil {
		if c.Leading() {
			b.WriteString("role: leader (holds the Lease; writes the state, assigns fleet positions)\n")
		} else {
			b.WriteString("role: follower (serves the state the leader writes; forwards the fleet port)\n")
		}
	}
	if c.kube != nil {
		b.WriteString(c.kube.health.detail())
	}
	return b.String()
}

// serveFleet lists the fleet positions as JSON: [{"node", "instance",
// "connected"}] in instance order. A follower assigns none: 404.
func (c *ControlPlane) serveFleet(w http.ResponseWriter, _ *http.Request) {
	_, f := c.role()
	if f == nil {
		writeText(w, http.StatusNotFound, "a follower assigns no fleet positions: ask the writer\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(f.members())
}

func writeText(w http.ResponseWriter, code int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(s))
}
