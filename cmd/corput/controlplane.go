package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"

	"github.com/corput/corput/internal/controlplane"
)

func init() {
	register(command{name: "control-plane", summary: "an xDS server that hands every gateway the same ring indices, and fleet positions by node id", run: runControlPlane})
}

// runControlPlane is `corput control-plane`: it serves until SIGTERM or
// SIGINT, then exits 0 (docs/control-plane.md).
func runControlPlane(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return controlPlaneMain(ctx, args, stdout, stderr)
}

// controlPlaneMain runs the control plane until ctx ends. Exit codes: 2
// for bad flags or input (an invalid source or state file), 1 when it
// cannot listen, lock or write its state.
func controlPlaneMain(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := flagSet("corput control-plane", stderr,
		"usage: corput control-plane --state FILE (--source FILE | --relay ADDR [--clusters a,b] [--source FILE] | --follow) [--listen ADDR] [--admin ADDR] [--debounce D] [--fleet-grace D]",
		"",
		"Serves EDS (ADS over gRPC) with each endpoint's ring index and its origin's subset count in",
		`LbEndpoint.metadata.filter_metadata["corput"] (ring_index, ring_subsets), so that every gateway`,
		"places endpoints on one ring. The indices are persisted in --state; a restart changes none.",
		"The writer also assigns gateways dense fleet positions by node id (docs/control-plane.md).")
	var o controlplane.Options
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:18000", "the ADS (gRPC) `ADDR` gateways connect to (their discovery.server)")
	fs.StringVar(&o.Admin, "admin", "127.0.0.1:9902", "the admin `ADDR`: /healthz, /readyz, /metrics (empty: none)")
	fs.StringVar(&o.StatePath, "state", "", "the state `FILE`: the persisted indices (required; created on the first start)")
	fs.StringVar(&o.Source, "source", "", "a watched YAML or JSON `FILE` of origins (name, subset sizing, endpoints); in relay mode, origins without endpoints")
	fs.StringVar(&o.Relay, "relay", "", "an upstream ADS server's `ADDR`: relay its EDS for the clusters named, with indices added")
	fs.StringVar(&o.RelayNodeID, "relay-node-id", controlplane.DefaultRelayNodeID, "the node `ID` presented to the --relay server")
	clusters := fs.String("clusters", "", "with --relay: comma-separated `NAMES` of the clusters to relay (default sizing)")
	fs.BoolVar(&o.Follow, "follow", false, "serve the state file another (writer) control plane persists, read-only")
	fs.DurationVar(&o.FollowInterval, "follow-interval", controlplane.DefaultFollowInterval, "with --follow: how often the state file is read")
	fs.DurationVar(&o.Debounce, "debounce", controlplane.DefaultDebounce, "how long membership must be quiet before a change is published (0: at once)")
	fs.DurationVar(&o.FleetGrace, "fleet-grace", controlplane.DefaultFleetGrace, "how long a gateway's fleet position is held after its last stream closed (> 0)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if o.Debounce == 0 {
		o.Debounce = -1 // 0 on the command line: no window
	}
	if o.FleetGrace <= 0 {
		fmt.Fprintf(stderr, "corput control-plane: --fleet-grace %v: must be > 0\n", o.FleetGrace)
		return 2
	}
	for _, c := range strings.Split(*clusters, ",") {
		if c = strings.TrimSpace(c); c != "" {
			o.Clusters = append(o.Clusters, c)
		}
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "corput control-plane: --log-level %q: use debug, info, warn or error\n", *level)
		return 2
	}
	o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	cp, err := controlplane.Start(o)
	if err != nil {
		fmt.Fprintln(stderr, "corput control-plane:", err)
		if controlplane.IsConfigError(err) {
			return 2
		}
		return 1
	}
	<-ctx.Done()
	o.Logger.Info("control plane: shutting down; gateways keep their last assignment")
	cp.Close()
	return 0
}
