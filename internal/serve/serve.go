package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/dashboard"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/gateway"
	"github.com/corput/corput/internal/telemetry"
	"github.com/corput/corput/internal/watch"
)

// Options are `corput serve`'s flags.
type Options struct {
	Config string // the config file (--config); required

	// Instance and Size are --fleet-instance and --fleet-size; nil when
	// the flag is not given.
	Instance, Size *int

	// Admin is --admin: the admin address, over admin.listen, at start
	// and on every reload; "" keeps the file's.
	Admin string

	Watch         bool          // --watch: reload when a file the config names changes
	WatchDebounce time.Duration // --watch-debounce

	Logger      *slog.Logger // required
	Diagnostics io.Writer    // where an invalid config's diagnostics are printed
}

// configError marks an error in the input the operator fixes.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// refusal is err marked as a configError (nil stays nil).
func refusal(err error) error {
	if err == nil {
		return nil
	}
	return configError{err}
}

// IsConfigError reports whether err is a refusal to start for input the
// operator fixes: an invalid config, a flag or variable against it,
// sockets handed over that corput cannot use. `corput serve` exits 2 on
// one and 1 on any other error.
func IsConfigError(err error) bool {
	var ce configError
	return errors.As(err, &ce)
}

// server is one Run: its inputs and what it started.
type server struct {
	o   Options
	log *slog.Logger
	cfg *config.Config        // as loaded at start
	in  discovery.FleetInputs // the flags, environment and hostname
	cpf *cpFleet              // the control plane of fleet.server, when it places the gateway
}

// Run serves the gateway of o.Config until ctx ends or SIGTERM or SIGINT
// arrives, then drains it and returns nil. It returns an error when the
// gateway does not start (IsConfigError tells the operator's from the
// others). SIGHUP, POST /admin/reload and (with o.Watch) a changed file
// reload the configuration in place (docs/gateway.md, "Reload"); SIGUSR1
// reopens the access log.
func Run(ctx context.Context, o Options) error {
	// SIGHUP and SIGUSR1 end a Go process that does not listen for them:
	// heard from here on, so that one arriving during start-up (the file
	// is being read anyway) is dropped instead of killing the process.
	early := make(chan os.Signal, 1)
	signal.Notify(early, syscall.SIGHUP, syscall.SIGUSR1)
	defer signal.Stop(early)
	s, err := load(o)
	if err != nil {
		return err
	}
	// The signal handler goes in before the listeners open (and before a
	// wait for the control plane), so a SIGTERM that arrives during
	// start-up still drains instead of killing.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer func() {
		stop()
		if s.cpf != nil {
			<-s.cpf.done
		}
	}()
	lns, err := s.place(ctx)
	if errors.Is(err, errNoPosition) {
		s.log.Info("shutting down", "err", err)
		return nil
	} else if err != nil {
		return err
	}
	metrics, dash := newDashboard()
	defer dash.Close()
	g, err := gateway.New(s.cfg, gateway.Options{Logger: s.log, Metrics: metrics, Dashboard: dash, Load: s.reload, Listeners: lns})
	if err != nil {
		return refusal(err)
	}
	defer reopenOnSIGUSR1(g, s.log)()
	w, rewatch, err := s.watcher(g)
	if err != nil {
		g.Close()
		return refusal(fmt.Errorf("--watch: %w", err))
	}
	defer reloadOnSIGHUP(g, s.log, rewatch)()
	if err := g.Start(); err != nil {
		g.Close()
		return err
	}
	defer s.follow(ctx, g, w)()
	s.drainAtEnd(ctx, stop, g)
	return nil
}

// load reads o's config, refusing an invalid one, and gathers the
// inputs of the fleet position.
func load(o Options) (*server, error) {
	cfg, ok := config.Check(o.Config, o.Diagnostics)
	if !ok {
		return nil, configError{errors.New("refusing an invalid config (see corput check)")}
	}
	if procs, set := scaleProcs(os.LookupEnv); set {
		o.Logger.Info("processors", "gomaxprocs", procs, "per_cpu", procsPerCPU)
	}
	s := &server{o: o, log: o.Logger, cfg: cfg,
		in: discovery.FleetInputs{LookupEnv: os.LookupEnv, FlagInstance: o.Instance, FlagSize: o.Size}}
	s.in.Hostname, _ = os.Hostname()
	if o.Admin != "" {
		cfg.Admin.Listen = o.Admin
	}
	return s, nil
}

// place takes the sockets handed over, if any, and places s.cfg in its
// fleet: from s.in, or from the control plane of fleet.server once it
// gives a position (errNoPosition when ctx ends first).
func (s *server) place(ctx context.Context) (gateway.Listeners, error) {
	lns, err := activatedListeners(os.Getenv, os.Unsetenv, os.Getpid())
	if err != nil {
		return lns, configError{err}
	}
	if lns.Listen != nil || lns.Admin != nil {
		s.log.Info("socket activation: serving the sockets handed over", "listen", addrOf(lns.Listen), "admin", addrOf(lns.Admin))
	}
	var fleet discovery.Fleet
	if s.cfg.Fleet.Server != "" {
		if s.cpf, err = followFleet(ctx, s.cfg, s.in, s.log); err != nil {
			return lns, configError{err}
		}
		if fleet, err = s.cpf.await(ctx, s.cfg, &lns); err != nil {
			return lns, err
		}
	} else if fleet, err = placeInFleet(s.cfg, s.in); err != nil {
		return lns, configError{err}
	}
	s.log.Info("fleet position", "instance", fleet.Instance, "instance_from", fleet.InstanceFrom,
		"size", fleet.Size, "size_from", fleet.SizeFrom)
	return lns, nil
}

// addrOf is ln's address for the log ("" for none).
func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// reload is the gateway's Load: it reads the file again and places the
// gateway again, from the same flags, environment and hostname and the
// file's fleet block: a new fleet.size or fleet.instance in the file
// re-subsets in place, unless a flag or the environment gives that
// value. Placed by a control plane, it keeps the newest position the
// control plane gave.
func (s *server) reload() (*config.Config, error) {
	next, err := config.Load(s.o.Config)
	if err != nil {
		return nil, err
	}
	if s.cpf != nil && next.Fleet.Server != "" {
		s.cpf.place(next)
	} else if _, err := placeInFleet(next, s.in); err != nil {
		return nil, err
	}
	if s.o.Admin != "" {
		next.Admin.Listen = s.o.Admin
	}
	return next, nil
}

// newDashboard returns the registry the gateway is given and the live
// dashboard sampling it, served on the admin listener at / and
// /dashboard/. The caller closes the dashboard after the gateway shut
// down.
func newDashboard() (*telemetry.Metrics, *dashboard.Dashboard) {
	m := telemetry.New()
	return m, dashboard.New(dashboard.Options{Metrics: m})
}

// watcher is --watch's watcher of g's files (nil without --watch), and
// rewatch, which points it at the files of the configuration running
// after a reload (which may name others).
func (s *server) watcher(g *gateway.Gateway) (w *watch.Watcher, rewatch func(), err error) {
	rewatch = func() {
		if w != nil {
			if err := w.SetFiles(g.Running().Files()); err != nil {
				s.log.Warn("--watch: cannot watch the reloaded configuration's files", "err", err)
			}
		}
	}
	if !s.o.Watch {
		return nil, rewatch, nil
	}
	w, err = watch.New(s.cfg.Files(), watch.Options{Debounce: s.o.WatchDebounce, Logger: s.log, OnChange: func(changed []string) {
		s.log.Info("--watch: files changed; reloading", "files", changed)
		if g.ReloadFromSource() == nil {
			rewatch()
		}
	}})
	if err != nil {
		return nil, rewatch, err
	}
	return w, rewatch, nil
}

// follow runs, until ctx ends, the watcher w (when there is one) and the
// moves the control plane gives (when it places the gateway); the
// returned wait returns once both have ended.
func (s *server) follow(ctx context.Context, g *gateway.Gateway, w *watch.Watcher) (wait func()) {
	var wg sync.WaitGroup
	if w != nil {
		wg.Go(func() { _ = w.Run(ctx) })
		s.log.Info("--watch: reloading when these files change", "files", w.Files())
	}
	if s.cpf != nil {
		wg.Go(func() { s.cpf.apply(ctx, g.MoveInFleet) })
	}
	return wg.Wait
}

// drainAtEnd runs g's membership discovery until ctx ends, then drains
// g within shutdown.drain_timeout; stop stops hearing SIGTERM and SIGINT,
// so that a second one ends the process.
func (s *server) drainAtEnd(ctx context.Context, stop func(), g *gateway.Gateway) {
	disc := make(chan error, 1)
	go func() {
		err := g.RunDiscovery(ctx)
		if err != nil {
			s.log.Error("membership discovery stopped; serving the last known membership", "err", err)
		}
		disc <- err
	}()
	<-ctx.Done()
	stop()
	s.log.Info("shutting down: draining in-flight requests", "deadline", s.cfg.Shutdown.DrainTimeout)
	dctx, cancel := context.WithTimeout(context.Background(), s.cfg.Shutdown.DrainTimeout)
	defer cancel()
	err := g.Shutdown(dctx)
	<-disc
	if err != nil {
		s.log.Warn("shutdown", "err", err)
	}
}

// procsPerCPU is how many Go processors (Ps) `corput serve` runs per CPU
// it was given. The fast path reads and writes its sockets with raw
// syscalls (internal/sockio), which keep the goroutine's P through the
// kernel's part of the work — three quarters of a proxied request's CPU —
// where a plain syscall lets the runtime hand the P to another thread
// after 20 µs. With one P per CPU, a CPU whose thread is in the kernel, or
// was preempted there, leaves runnable goroutines waiting; a second P per
// CPU gives them a thread without the hand-off (measured in
// docs/performance.md, optimisation 12). Loops stay one per CPU
// (config.LoopCount). The GOMAXPROCS environment variable, when set, wins.
const procsPerCPU = 2

// scaleProcs raises GOMAXPROCS to procsPerCPU per CPU unless the
// environment sets it; it returns the new value and whether it changed it.
func scaleProcs(lookup func(string) (string, bool)) (int, bool) {
	if _, ok := lookup("GOMAXPROCS"); ok {
		return runtime.GOMAXPROCS(0), false
	}
	n := procsPerCPU * runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(n)
	return n, true
}
