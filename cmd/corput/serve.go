package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/gateway"
	"github.com/corput/corput/internal/watch"
)

// addrOf is ln's address for the log ("" for none).
func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

func init() {
	register(command{name: "serve", summary: "run the gateway", run: runServe})
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

// runServe is `corput serve --config FILE [--fleet-instance N --fleet-size G]
// [--watch]`. It refuses an invalid config exactly as `corput check`
// reports it (exit 2), serves until SIGTERM or SIGINT, then drains and
// exits 0. SIGHUP, POST /admin/reload and (with --watch) a changed file
// reload the configuration in place (docs/gateway.md, "Reload"); SIGUSR1
// reopens the access log. Sockets handed over by systemd socket
// activation (LISTEN_FDS) are served instead of binding new ones.
func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("corput serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "the config `FILE`")
	instance := fs.Int("fleet-instance", 0, "this gateway's position in the fleet (overrides CORPUT_FLEET_INSTANCE and fleet.instance)")
	size := fs.Int("fleet-size", 0, "gateways in the fleet (overrides CORPUT_FLEET_SIZE and fleet.size)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	adminAddr := fs.String("admin", "", "the admin listener's `ADDR` (overrides admin.listen: two instances sharing one socket need an admin each)")
	watchFiles := fs.Bool("watch", false, "reload when the config file or a file it names (certificates, keys, CAs) changes")
	debounce := fs.Duration("watch-debounce", watch.DefaultDebounce, "with --watch: how long a burst of file events must be quiet before it is one reload")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	// SIGHUP and SIGUSR1 end a Go process that does not listen for them:
	// heard from here on, so that one arriving during start-up (the file
	// is being read anyway) is dropped instead of killing the process.
	early := make(chan os.Signal, 1)
	signal.Notify(early, syscall.SIGHUP, syscall.SIGUSR1)
	defer signal.Stop(early)
	if *path == "" {
		fmt.Fprintln(stderr, "corput serve: --config FILE is required")
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "corput serve: --log-level %q: use debug, info, warn or error\n", *level)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))

	cfg, ok := loadConfig(*path, stderr)
	if !ok {
		fmt.Fprintln(stderr, "corput serve: refusing an invalid config (see corput check)")
		return 2
	}
	if procs, set := scaleProcs(os.LookupEnv); set {
		log.Info("processors", "gomaxprocs", procs, "per_cpu", procsPerCPU)
	}
	in := discovery.FleetInputs{LookupEnv: os.LookupEnv}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "fleet-instance":
			in.FlagInstance = instance
		case "fleet-size":
			in.FlagSize = size
		}
	})
	in.Hostname, _ = os.Hostname()
	// The signal handler goes in before the listeners open (and before a
	// wait for the control plane), so a SIGTERM that arrives during
	// start-up still drains instead of killing.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	var cpf *cpFleet // the control plane of fleet.server, when it places the gateway
	defer func() {
		stop()
		if cpf != nil {
			<-cpf.done
		}
	}()
	if *adminAddr != "" {
		cfg.Admin.Listen = *adminAddr
	}
	lns, err := activatedListeners(os.Getenv, os.Unsetenv, os.Getpid())
	if err != nil {
		fmt.Fprintln(stderr, "corput serve:", err)
		return 2
	}
	if lns.Listen != nil || lns.Admin != nil {
		log.Info("socket activation: serving the sockets handed over", "listen", addrOf(lns.Listen), "admin", addrOf(lns.Admin))
	}
	var fleet discovery.Fleet
	if cfg.Fleet.Server != "" {
		if cpf, err = followFleet(ctx, cfg, in, log); err != nil {
			fmt.Fprintln(stderr, "corput serve:", err)
			return 2
		}
		if fleet, err = cpf.await(ctx, cfg, &lns); errors.Is(err, errNoPosition) {
			log.Info("shutting down", "err", err)
			return 0
		} else if err != nil {
			fmt.Fprintln(stderr, "corput serve:", err)
			return 1
		}
	} else if fleet, err = placeInFleet(cfg, in); err != nil {
		fmt.Fprintln(stderr, "corput serve:", err)
		return 2
	}
	log.Info("fleet position", "instance", fleet.Instance, "instance_from", fleet.InstanceFrom,
		"size", fleet.Size, "size_from", fleet.SizeFrom)

	// A reload reads the file again and places the gateway again, from
	// the same flags, environment and hostname and the file's fleet block:
	// a new fleet.size or fleet.instance in the file re-subsets in place,
	// unless a flag or the environment gives that value. Placed by a
	// control plane, it keeps the newest position the control plane gave.
	load := func() (*config.Config, error) {
		next, err := config.Load(*path)
		if err != nil {
			return nil, err
		}
		if cpf != nil && next.Fleet.Server != "" {
			cpf.place(next)
		} else if _, err := placeInFleet(next, in); err != nil {
			return nil, err
		}
		if *adminAddr != "" {
			next.Admin.Listen = *adminAddr
		}
		return next, nil
	}

	metrics, dash := newDashboard()
	defer dash.Close()
	g, err := gateway.New(cfg, gateway.Options{Logger: log, Metrics: metrics, Dashboard: dash, Load: load, Listeners: lns})
	if err != nil {
		fmt.Fprintln(stderr, "corput serve:", err)
		return 2
	}
	defer reopenOnSIGUSR1(g, log)()
	var w *watch.Watcher
	rewatch := func() { // a reload may name other files
		if w != nil {
			if err := w.SetFiles(g.Running().Files()); err != nil {
				log.Warn("--watch: cannot watch the reloaded configuration's files", "err", err)
			}
		}
	}
	if *watchFiles {
		w, err = watch.New(cfg.Files(), watch.Options{Debounce: *debounce, Logger: log, OnChange: func(changed []string) {
			log.Info("--watch: files changed; reloading", "files", changed)
			if g.ReloadFromSource() == nil {
				rewatch()
			}
		}})
		if err != nil {
			fmt.Fprintln(stderr, "corput serve: --watch:", err)
			g.Close()
			return 2
		}
	}
	defer reloadOnSIGHUP(g, log, rewatch)()
	if err := g.Start(); err != nil {
		fmt.Fprintln(stderr, "corput serve:", err)
		g.Close()
		return 1
	}
	if w != nil {
		watched := make(chan struct{})
		defer func() { <-watched }()
		go func() {
			defer close(watched)
			_ = w.Run(ctx)
		}()
		log.Info("--watch: reloading when these files change", "files", w.Files())
	}
	if cpf != nil {
		moves := make(chan struct{})
		defer func() { <-moves }()
		go func() {
			defer close(moves)
			cpf.apply(ctx, g.MoveInFleet)
		}()
	}
	disc := make(chan error, 1)
	go func() {
		err := g.RunDiscovery(ctx)
		if err != nil {
			log.Error("membership discovery stopped; serving the last known membership", "err", err)
		}
		disc <- err
	}()
	<-ctx.Done()
	stop()
	log.Info("shutting down: draining in-flight requests", "deadline", cfg.Shutdown.DrainTimeout)
	dctx, cancel := context.WithTimeout(context.Background(), cfg.Shutdown.DrainTimeout)
	defer cancel()
	err = g.Shutdown(dctx)
	<-disc
	if err != nil {
		log.Warn("shutdown", "err", err)
	}
	return 0
}

// placeInFleet resolves the gateway's fleet position from in and the
// keys of cfg's fleet block the file writes (one it leaves out gives
// nothing, so that `fleet: {size: 3}` leaves the instance to the
// environment or the hostname), and sets cfg.Fleet to it.
func placeInFleet(cfg *config.Config, in discovery.FleetInputs) (discovery.Fleet, error) {
	if cfg.Written("fleet.instance") {
		in.ConfigInstance = &cfg.Fleet.Instance
	}
	if cfg.Written("fleet.size") {
		in.ConfigSize = &cfg.Fleet.Size
	}
	fleet, err := discovery.ResolveFleet(in)
	if err != nil {
		return fleet, err
	}
	cfg.Fleet = config.Fleet{Instance: fleet.Instance, Size: fleet.Size}
	return fleet, nil
}
