package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corput/corput/internal/accept"
	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/edgetls"
	"github.com/corput/corput/internal/edit"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/proxy"
	"github.com/corput/corput/internal/replay"
	"github.com/corput/corput/internal/route"
	"github.com/corput/corput/internal/tracing"
	"github.com/corput/corput/internal/version"
	"github.com/corput/corput/internal/workload"
)

// A reload applies a new configuration in place (docs/gateway.md,
// "Reload"). It is checked whole first — the same diagnostics as
// `corput check`, then every origin prepared (TLS files read, settings
// validated, new origins built) — and refused whole when anything fails:
// the running configuration stays. Then it is applied as a diff:
//
//   - the routes and the X-Forwarded-* rules swap atomically;
//   - an origin whose settings did not change keeps everything: pools and
//     their connections, picker state, estimates, ejections, slow-start
//     clocks, subsets;
//   - a changed origin is reconfigured in place (cluster.Origin.Prepare):
//     static endpoints through the membership delta path, pool and
//     balancer settings in place, a new dialer for new connections;
//   - a new origin is built (its pools pre-warm); a removed one drains;
//   - the downstream TLS policy is built again from its files
//     (certificates, client CAs, OCSP responses, ticket keys;
//     internal/edgetls), and new handshakes use it.
//
// A new fleet position (fleet.size, fleet.instance) re-subsets every origin
// in place, as a membership change does: a loop whose subset did not
// change keeps its pools, one that did opens pools only for the endpoints
// it gained and drains the ones it lost (cluster.Origin.Prepare).
//
// Requests in flight finish on what they started with. What cannot change
// in place is refused with a message saying a restart is needed: loops,
// the downstream listener's settings but
// trusted_proxies, turning TLS on or off, the access log, the admin token
// file, and moving
// admin between loopback and not. A changed listen or admin address opens
// the new listener before the old one closes.

// state is the configuration in force: one immutable value, swapped by a
// reload (setState). Requests read its table (package proxy).
type state struct {
	cfg     *config.Config
	origins map[string]*cluster.Origin // the table's
	list    []*cluster.Origin          // in config order
	table   *proxy.Table
	// shadowOnly are the origins only mirrors go to (some route's
	// mirror.origin, no route's origin or split target): they do not hold
	// readiness back.
	shadowOnly map[string]bool
	rs         routing                 // how route builds the routes
	splits     map[string]*route.Split // the routes' splits, by route name
}

// tracer is the tracing in force, nil when it is off.
func (st *state) tracer() *tracing.Tracer { return st.table.Tracer }

// setFleetGauges shows the fleet position in force in corput_fleet_instance
// and corput_fleet_size.
func (g *Gateway) setFleetGauges(fl config.Fleet) {
	g.metrics.FleetInstance.Set(float64(fl.Instance))
	g.metrics.FleetSize.Set(float64(fl.Size))
}

// fleet is the fleet position in force.
func (st *state) fleet() config.Fleet { return fleetOf(st.cfg) }

// fleetOf is cfg's fleet position; a configuration built without one
// (size 0) is a lone gateway.
func fleetOf(cfg *config.Config) config.Fleet {
	fl := cfg.Fleet
	fl.Size = max(fl.Size, 1)
	return fl
}

func newState(cfg *config.Config, list []*cluster.Origin, tracer *tracing.Tracer, replays *replay.Cap, rs routing) *state {
	var classes *workload.Classifier
	if cfg.Workload != nil {
		classes = workload.NewClassifier(*cfg.Workload)
	}
	origins := map[string]*cluster.Origin{}
	st := &state{cfg: cfg, origins: origins, rs: rs, table: &proxy.Table{
		Classes: classes, Origins: origins, Replays: replays,
		Forwarding: forward.Forwarding{Trusted: cfg.Downstream.TrustedProxies, Underscores: cfg.Downstream.UnderscoreHeaders, Forwarded: cfg.Downstream.Forwarded},
		Tracer:     tracer,
		RequestID:  edit.NewRequestID(cfg.Downstream.RequestID, nil),
	}}
	for _, o := range list {
		st.add(o)
	}
	st.route()
	return st
}

// route builds the table's router from the configuration's routes, once
// the state holds their origins: a route with its own retry rules
// (routes[].retry) gets its own policy on its origin (on each target's, for
// a split), and its counters are bound (bindRoute).
func (st *state) route() {
	cfg, classes := st.cfg, st.table.Classes
	st.splits = map[string]*route.Split{}
	defer func() { st.rs.prev = nil }() // the state before is not kept
	routes := make([]route.Route, len(cfg.Routes))
	for i, r := range cfg.Routes {
		routes[i] = route.Route{Host: r.Host, PathPrefix: r.PathPrefix, Origin: r.Origin, Low: r.Priority == config.PriorityLow, Index: i,
			MaxBody: int64(r.MaxRequestBodyBytes), Edit: edit.Compile(&r)}
		matchOf(&routes[i], &r)
		directOf(&routes[i], &r)
		if t := r.Timeouts; t != nil {
			routes[i].Timeouts = route.Timeouts{ResponseHeader: t.ResponseHeader, StreamIdle: t.StreamIdle, Request: t.Request, GRPCMax: t.GRPCMax}
		}
		if r.Retry != nil {
			routes[i].Timeouts.PerTry = r.Retry.PerTryTimeout // routes[].retry.per_try_timeout
		}
		if r.Class != "" && cfg.Workload != nil {
			if k, ok := cfg.Workload.Index(r.Class); ok {
				routes[i].Cost, routes[i].Class = classes.ClassCost(k), k
			}
		}
		if o := st.origins[r.Origin]; o != nil && r.Retry != nil {
			routes[i].Retry = o.RoutePolicy(*r.Retry)
		}
		st.bindRoute(&routes[i], i)
	}
	st.table.Router = route.NewRouter(routes)
}

// matchOf sets rt's path, methods, headers and query matches from r's,
// compiling its regular expressions: once a load, validated before.
func matchOf(rt *route.Route, r *config.Route) {
	rt.PathExact, rt.Methods = r.PathExact, r.Methods
	if r.PathRegex != "" {
		rt.PathRegex, _ = config.CompileMatch(r.PathRegex)
	}
	for _, h := range r.Headers {
		m := route.HeaderMatch{Name: strings.ToLower(h.Name), Value: h.Value}
		switch h.Type {
		case config.MatchPresent:
			m.Kind = route.Present
		case config.MatchAbsent:
			m.Kind = route.Absent
		case config.MatchRegex:
			m.Kind, m.Value = route.Regex, ""
			m.Regex, _ = config.CompileMatch(h.Value)
		}
		rt.Headers = append(rt.Headers, m)
	}
	for _, q := range r.Query {
		m := route.QueryMatch{Name: q.Name, Value: q.Value}
		if q.Type == config.MatchPresent {
			m.Kind = route.Present
		}
		rt.Query = append(rt.Query, m)
	}
}

func (st *state) add(o *cluster.Origin) {
	st.origins[o.Name()] = o
	st.list = append(st.list, o)
}

// reloads is the reload bookkeeping: the loaded configuration's identity,
// the last rejection, the metrics.
type reloads struct {
	mu        sync.Mutex // serialises reloads, and guards following
	loadedAt  time.Time
	hash      string
	file      string
	rejected  *Rejection
	ok, bad   prometheus.Counter
	lastOK    prometheus.Gauge
	restarted chan struct{}     // closed and replaced when discovery must restart
	retired   []*cluster.Origin // removed by a reload, draining: Shutdown closes them
	drains    sync.WaitGroup    // the retired origins' Drain calls
}

// Rejection is a refused reload: when, and its diagnostics (file:line:
// key: message).
type Rejection struct {
	At     time.Time `json:"at"`
	Errors []string  `json:"errors"`
}

func (r *reloads) init(g *Gateway, cfg *config.Config) {
	r.loadedAt, r.hash, r.file = g.clk.Now(), configHash(cfg), cfg.File()
	r.ok = g.metrics.ConfigReloads.WithLabelValues("ok")
	r.bad = g.metrics.ConfigReloads.WithLabelValues("rejected")
	r.lastOK = g.metrics.ConfigLastReloadSuccess
	r.lastOK.Set(float64(r.loadedAt.UnixNano()) / 1e9)
	r.restarted = make(chan struct{})
}

// configHash identifies a configuration: its file's bytes when it was read
// from one, else its printed value.
func configHash(cfg *config.Config) string {
	h := sha256.New()
	if b := cfg.Source(); b != nil {
		h.Write(b)
	} else {
		fmt.Fprintf(h, "%+v", *cfg)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Reload applies cfg, or refuses it whole and keeps the running one. The
// error lists every problem.
func (g *Gateway) Reload(cfg *config.Config) error {
	g.rl.mu.Lock()
	defer g.rl.mu.Unlock()
	err := g.reloadLocked(cfg)
	now := g.clk.Now()
	if err != nil {
		g.rl.bad.Inc()
		g.rl.rejected = &Rejection{At: now, Errors: errorLines(err)}
		for _, line := range g.rl.rejected.Errors {
			g.log.Error("reload refused; the running configuration stays", "file", cfg.File(), "error", line)
		}
		return err
	}
	g.rl.ok.Inc()
	g.rl.lastOK.Set(float64(now.UnixNano()) / 1e9)
	g.rl.loadedAt, g.rl.hash, g.rl.file = now, configHash(cfg), cfg.File()
	g.log.Info("configuration reloaded", "file", cfg.File(), "hash", g.rl.hash)
	return nil
}

// MoveInFleet applies a fleet position given by the control plane of
// fleet.server: the running configuration at instance of size, applied as a
// reload that changes only the position (every origin re-subset in place,
// only the loops whose subset changed opening or draining pools). The
// position in force already (the one the gateway started at, or a reload
// placed it at) is no reload at all. An error leaves the running position.
func (g *Gateway) MoveInFleet(instance, size int) error {
	g.rl.mu.Lock()
	defer g.rl.mu.Unlock()
	if fl := g.st().fleet(); fl.Instance == instance && fl.Size == size {
		return nil
	}
	cur := *g.st().cfg
	cur.Fleet.Instance, cur.Fleet.Size = instance, size
	if err := g.reloadLocked(&cur); err != nil {
		g.log.Error("fleet move refused; the running position stays", "instance", instance, "size", size, "err", err)
		return err
	}
	return nil
}

// Rejected records a reload refused before it reached Reload (the file did
// not parse or check), with its diagnostics.
func (g *Gateway) Rejected(err error) {
	g.rl.mu.Lock()
	defer g.rl.mu.Unlock()
	g.rl.bad.Inc()
	g.rl.rejected = &Rejection{At: g.clk.Now(), Errors: errorLines(err)}
	for _, line := range g.rl.rejected.Errors {
		g.log.Error("reload refused; the running configuration stays", "error", line)
	}
}

// errorLines splits err into its diagnostics, one per line.
func errorLines(err error) []string {
	var diags config.Diagnostics
	if errors.As(err, &diags) {
		var out []string
		for _, d := range diags.Errors() {
			out = append(out, d.String())
		}
		return out
	}
	return strings.Split(strings.TrimSpace(err.Error()), "\n")
}

func (g *Gateway) reloadLocked(cfg *config.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cur := g.st()
	if err := restartNeeded(cur.cfg, cfg, g); err != nil {
		return err
	}
	// Prepare: everything that can fail, touching nothing.
	tlsNext := g.tlsCur.Load()
	if cfg.TLS != nil {
		p, err := edgetls.New(cfg.TLS, tlsNext)
		if err != nil {
			return err
		}
		tlsNext = p
	}
	tracer, tracerChanged, err := g.nextTracer(cur, cfg)
	if err != nil {
		return err
	}
	moved, err := g.prepareListeners(cur.cfg, cfg)
	if err != nil {
		if tracerChanged {
			tracer.Shutdown(context.Background())
		}
		return err
	}
	var changes []*cluster.Change
	var built []*cluster.Origin
	abandon := func() {
		if tracerChanged {
			tracer.Shutdown(context.Background())
		}
		for _, o := range built {
			o.Close()
		}
		for _, ln := range moved {
			if ln != nil {
				ln.Close()
			}
		}
	}
	list := make([]*cluster.Origin, 0, len(cfg.Origins))
	fl := fleetOf(cfg)
	for i := range cfg.Origins {
		oc := &cfg.Origins[i]
		if o, ok := cur.origins[oc.Name]; ok {
			c, err := o.Prepare(oc, fl)
			if err != nil {
				abandon()
				return err
			}
			if c != nil {
				changes = append(changes, c)
			}
			list = append(list, o)
			continue
		}
		o, err := g.newOrigin(oc, cfg)
		if err != nil {
			abandon()
			return err
		}
		built = append(built, o)
		list = append(list, o)
	}
	// Commit: cannot fail but on a bug.
	var errs []error
	for _, c := range changes {
		errs = append(errs, c.Commit())
	}
	g.tlsCur.Store(tlsNext)
	g.setWebhook(cfg)
	for _, o := range list {
		o.SetWorkload(cfg.Workload)
	}
	g.replays.SetMax(int64(cfg.Limits.ReplayBuffersBytes))
	next := newState(cfg, list, tracer, g.replays, g.routing(cur))
	g.setEdges(next, cur)
	g.setMirrors(next, cur)
	g.ppCur.Store(g.proxyPolicy(cfg))
	g.setState(next)
	if fl, was := next.fleet(), cur.fleet(); fl != was {
		g.setFleetGauges(fl)
		g.log.Info("fleet position changed: every origin re-subset in place", "instance", fl.Instance, "size", fl.Size,
			"was_instance", was.Instance, "was_size", was.Size)
	}
	if tracerChanged {
		g.retireTracer(cur.tracer())
	}
	g.moveListeners(moved)
	for _, o := range cur.list {
		if !slices.Contains(list, o) {
			g.rl.retired = append(g.rl.retired, o)
			g.rl.drains.Add(1)
			go func() { // no new request reaches it; the ones in flight finish
				defer g.rl.drains.Done()
				o.Drain()
				g.rl.mu.Lock()
				g.rl.retired = slices.DeleteFunc(g.rl.retired, func(x *cluster.Origin) bool { return x == o })
				g.rl.mu.Unlock()
			}()
		}
	}
	if discoveryChanged(cur.cfg, cfg) {
		close(g.rl.restarted)
		g.rl.restarted = make(chan struct{})
	}
	return errors.Join(errs...)
}

// restartNeeded refuses what a reload cannot change in place.
func restartNeeded(a, b *config.Config, g *Gateway) error {
	var keys []string
	if b.LoopCount() != g.loops {
		keys = append(keys, fmt.Sprintf("loops (%d running, %d in the file)", g.loops, b.LoopCount()))
	}
	if a.Admin.TokenFile != b.Admin.TokenFile {
		keys = append(keys, "admin.token_file (read once, at start)")
	}
	if a.Admin.Loopback() != b.Admin.Loopback() {
		keys = append(keys, "admin.listen (between loopback and not: its access rule changes)")
	}
	da, db := a.Downstream, b.Downstream
	da.TrustedProxies, db.TrustedProxies = nil, nil
	da.UnderscoreHeaders, db.UnderscoreHeaders = "", ""
	da.Forwarded, db.Forwarded = false, false
	da.ProxyProtocol, db.ProxyProtocol = nil, nil
	da.Addresses, db.Addresses = config.Addresses{}, config.Addresses{}
	da.RequestID, db.RequestID = nil, nil // in the table: changed in place
	if !reflect.DeepEqual(da, db) {
		keys = append(keys, "downstream (all but trusted_proxies, underscore_headers, forwarded, proxy_protocol, addresses and request_id)")
	}
	if (a.RedirectHTTP == nil) != (b.RedirectHTTP == nil) || a.RedirectHTTP != nil && a.RedirectHTTP.Listen != b.RedirectHTTP.Listen {
		keys = append(keys, "redirect_http.listen (turned on, off or moved; its status and https_port change in place)")
	}
	if !reflect.DeepEqual(a.AccessLog, b.AccessLog) {
		keys = append(keys, "access_log")
	}
	if (a.TLS == nil) != (b.TLS == nil) {
		keys = append(keys, "tls (turned on or off)")
	}
	if a.Fleet.Server != b.Fleet.Server || a.Fleet.NodeID != b.Fleet.NodeID || !reflect.DeepEqual(a.Fleet.TLS, b.Fleet.TLS) {
		keys = append(keys, "fleet.server, fleet.node_id and fleet.tls (the position's stream is opened once, at start; its TLS files are read again at every connection)")
	}
	if len(keys) == 0 {
		return nil
	}
	return fmt.Errorf("reload: %s cannot change in place; restart corput serve to apply it (the running configuration stays)", strings.Join(keys, ", "))
}

// prepareListeners opens the new listen and admin addresses of a reload
// that changes them (nil where unchanged, or before Start): a reload that
// cannot bind one is refused.
func (g *Gateway) prepareListeners(a, b *config.Config) ([2]net.Listener, error) {
	var out [2]net.Listener
	g.mu.Lock()
	started := g.ln != nil && !g.stopped
	g.mu.Unlock()
	if !started {
		return out, nil
	}
	addrs := [2][2]string{listenIdx: {a.Listen, b.Listen}, adminIdx: {a.Admin.Listen, b.Admin.Listen}}
	keys := [2]string{listenIdx: "listen", adminIdx: "admin.listen"}
	for i, ab := range addrs {
		if ab[0] == ab[1] {
			continue
		}
		ln, err := net.Listen("tcp", ab[1])
		if err != nil {
			if out[0] != nil {
				out[0].Close()
			}
			return [2]net.Listener{}, fmt.Errorf("%s: %w", keys[i], err)
		}
		out[i] = ln
	}
	return out, nil
}

// moveListeners serves the listeners prepareListeners opened, then closes
// the ones they replace: the new address accepts before the old one stops,
// and connections the old one accepted carry on.
func (g *Gateway) moveListeners(moved [2]net.Listener) {
	g.mu.Lock()
	defer g.mu.Unlock()
	sets := [2]*accept.Set{listenIdx: g.ln, adminIdx: g.adminLn}
	names := [2]string{listenIdx: "listen", adminIdx: "admin"}
	shed := [2][]byte{listenIdx: g.shed}
	for i, ln := range moved {
		if ln == nil {
			continue
		}
		next := g.acceptor(names[i], ln, shed[i])
		if i == listenIdx {
			next = g.edgeListener(next)
		}
		sets[i].Add(next)
		sets[i].Retire(g.cur[i])
		g.log.Info("listener moved", "listener", names[i], "from", g.cur[i].Addr().String(), "to", ln.Addr().String())
		g.cur[i] = next
	}
}

// discoveryChanged reports whether the membership sources must restart:
// an origin with a file or xDS source was added, removed or changed.
func discoveryChanged(a, b *config.Config) bool {
	type source struct {
		discovery config.Discovery // its tls block compared by content
		debounce  time.Duration
		zone      string
	}
	sources := func(c *config.Config) map[string]source {
		out := map[string]source{}
		for _, o := range c.Origins {
			if o.Discovery.Type == config.DiscoveryFile || o.Discovery.Type == config.DiscoveryXDS {
				out[o.Name] = source{o.Discovery, o.Debounce, o.Zone.Local}
			}
		}
		return out
	}
	return !reflect.DeepEqual(sources(a), sources(b))
}

// Running is the configuration in force.
func (g *Gateway) Running() *config.Config { return g.st().cfg }

// ErrNoSource refuses a reload of a gateway that has no configuration
// file to read again (Options.Load is nil).
var ErrNoSource = errors.New("reload: this gateway was not started from a configuration file; nothing to read again")

// ReloadFromSource reads the configuration again (Options.Load) and
// applies it, or refuses it whole: the trigger of SIGHUP, POST
// /admin/reload and --watch.
func (g *Gateway) ReloadFromSource() error {
	if g.opts.Load == nil {
		return ErrNoSource
	}
	cfg, err := g.opts.Load()
	if err != nil {
		g.Rejected(err)
		return err
	}
	return g.Reload(cfg)
}

// ReloadResult is POST /admin/reload's answer.
type ReloadResult struct {
	Result string   `json:"result"` // "ok" or "rejected"
	Hash   string   `json:"hash,omitempty"`
	Errors []string `json:"errors,omitempty"` // file:line: key: message
}

// ReloadConfig implements telemetry.AdminSource: POST /admin/reload.
func (g *Gateway) ReloadConfig() (int, any) {
	err := g.ReloadFromSource()
	switch {
	case err == nil:
		g.rl.mu.Lock()
		defer g.rl.mu.Unlock()
		return http.StatusOK, ReloadResult{Result: "ok", Hash: g.rl.hash}
	case errors.Is(err, ErrNoSource):
		return http.StatusConflict, ReloadResult{Result: "rejected", Errors: []string{err.Error()}}
	}
	return http.StatusBadRequest, ReloadResult{Result: "rejected", Errors: errorLines(err)}
}

// discoveryRestart is closed when a reload changed the membership sources.
func (g *Gateway) discoveryRestart() <-chan struct{} {
	g.rl.mu.Lock()
	defer g.rl.mu.Unlock()
	return g.rl.restarted
}

// ConfigView is GET /admin/config: the running configuration (secrets
// redacted), its hash and load time, the last refused reload, and the
// build that runs it.
type ConfigView struct {
	File         string       `json:"file"`
	Hash         string       `json:"hash"`
	LoadedAt     time.Time    `json:"loaded_at"`
	Config       any          `json:"config"`
	LastRejected *Rejection   `json:"last_rejected,omitempty"`
	Version      version.Info `json:"version"`
}

// ConfigView implements telemetry.AdminSource: GET /admin/config.
func (g *Gateway) ConfigView() any {
	g.rl.mu.Lock()
	defer g.rl.mu.Unlock()
	return ConfigView{File: g.rl.file, Hash: g.rl.hash, LoadedAt: g.rl.loadedAt,
		Config: g.st().cfg.Redacted(), LastRejected: g.rl.rejected, Version: version.Get()}
}
