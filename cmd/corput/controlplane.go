package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
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
		"usage: corput control-plane --state FILE|kubernetes:NAMESPACE/NAME (--source FILE | --relay ADDR [--clusters a,b] [--source FILE] | --follow) [--listen ADDR] [--admin ADDR] [--debounce D] [--fleet-grace D] [--fleet-listen ADDR [--advertise ADDR] [--lease-duration D] [--lease-retry D] [--id NAME]] [--kubeconfig FILE] [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE [--fleet-require-identity]]] [--relay-tls-* ...]",
		"",
		"Serves EDS (ADS over gRPC) with each endpoint's ring index and its origin's subset count in",
		`LbEndpoint.metadata.filter_metadata["corput"] (ring_index, ring_subsets), so that every gateway`,
		"places endpoints on one ring. The indices are persisted in --state; a restart changes none.",
		"The writer also assigns gateways dense fleet positions by node id. Origins in --source may name",
		"Kubernetes Services (their EndpointSlices give the membership), and --state kubernetes:NS/NAME keeps",
		"the state in ConfigMaps, written by the replica that holds the Lease NAME (docs/control-plane.md).")
	var f controlplane.Flags
	f.Bind(fs)
	level := logLevel(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	o, err := f.Options()
	if err != nil {
		fmt.Fprintf(stderr, "corput control-plane: %v\n", err)
		return 2
	}
	var ok bool
	if o.Logger, ok = newLogger("corput control-plane", *level, stderr); !ok {
		return 2
	}
	return exitCode("corput control-plane", controlplane.Run(ctx, o), controlplane.IsConfigError, stderr)
}
