package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/gateway"
)

func init() {
	register(command{name: "serve", summary: "run the gateway", run: runServe})
}

// runServe is `corput serve --config FILE [--fleet-instance N --fleet-size G]`.
// It refuses an invalid config exactly as `corput check` reports it (exit
// 2), serves until SIGTERM or SIGINT, then drains and exits 0.
func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("corput serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "the config `FILE`")
	instance := fs.Int("fleet-instance", 0, "this gateway's position in the fleet (overrides CORPUT_FLEET_INSTANCE and fleet.instance)")
	size := fs.Int("fleet-size", 0, "gateways in the fleet (overrides CORPUT_FLEET_SIZE and fleet.size)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
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
	in := discovery.FleetInputs{LookupEnv: os.LookupEnv}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "fleet-instance":
			in.FlagInstance = instance
		case "fleet-size":
			in.FlagSize = size
		}
	})
	if cfg.Fleet.Size > 1 || cfg.Fleet.Instance > 0 {
		in.ConfigInstance, in.ConfigSize = &cfg.Fleet.Instance, &cfg.Fleet.Size
	}
	in.Hostname, _ = os.Hostname()
	fleet, err := discovery.ResolveFleet(in)
	if err != nil {
		fmt.Fprintln(stderr, "corput serve:", err)
		return 2
	}
	cfg.Fleet = config.Fleet{Instance: fleet.Instance, Size: fleet.Size}
	log.Info("fleet position", "instance", fleet.Instance, "instance_from", fleet.InstanceFrom,
		"size", fleet.Size, "size_from", fleet.SizeFrom)

	metrics, dash := newDashboard()
	defer dash.Close()
	g, err := gateway.New(cfg, gateway.Options{Logger: log, Metrics: metrics, Dashboard: dash})
	if err != nil {
		fmt.Fprintln(stderr, "corput serve:", err)
		return 2
	}
	// The signal handler goes in before the listeners open, so a SIGTERM
	// that arrives during start-up still drains instead of killing.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := g.Start(); err != nil {
		fmt.Fprintln(stderr, "corput serve:", err)
		g.Close()
		return 1
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
