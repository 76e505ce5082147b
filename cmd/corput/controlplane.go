package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/corput/corput/internal/controlplane"
	"github.com/corput/corput/internal/tlsfiles"
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
		"usage: corput control-plane --state FILE (--source FILE | --relay ADDR [--clusters a,b] [--source FILE] | --follow) [--listen ADDR] [--admin ADDR] [--debounce D] [--fleet-grace D] [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE [--fleet-require-identity]]] [--relay-tls-* ...]",
		"",
		"Serves EDS (ADS over gRPC) with each endpoint's ring index and its origin's subset count in",
		`LbEndpoint.metadata.filter_metadata["corput"] (ring_index, ring_subsets), so that every gateway`,
		"places endpoints on one ring. The indices are persisted in --state; a restart changes none.",
		"The writer also assigns gateways dense fleet positions by node id (docs/control-plane.md).")
	var f controlPlaneFlags
	f.bind(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	o, ok := f.options(stderr)
	if !ok {
		return 2
	}
	return exitCode("corput control-plane", controlplane.Run(ctx, o), controlplane.IsConfigError, stderr)
}

// controlPlaneFlags are `corput control-plane`'s flags: the options they
// give, and the ones that need a step before they are options.
type controlPlaneFlags struct {
	o        controlplane.Options
	clusters string
	level    *string
	tls      tlsfiles.Files // --tls-cert, --tls-key, --tls-client-ca
	relayTLS tlsfiles.Files // --relay-tls-*
	relayOn  bool           // --relay-tls
}

// bind defines the flags on fs.
func (f *controlPlaneFlags) bind(fs *flag.FlagSet) {
	o := &f.o
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:18000", "the ADS (gRPC) `ADDR` gateways connect to (their discovery.server)")
	fs.StringVar(&o.Admin, "admin", "127.0.0.1:9902", "the admin `ADDR`: /healthz, /readyz, /metrics (empty: none)")
	fs.StringVar(&o.StatePath, "state", "", "the state `FILE`: the persisted indices (required; created on the first start)")
	fs.StringVar(&o.Source, "source", "", "a watched YAML or JSON `FILE` of origins (name, subset sizing, endpoints); in relay mode, origins without endpoints")
	fs.StringVar(&o.Relay, "relay", "", "an upstream ADS server's `ADDR`: relay its EDS for the clusters named, with indices added")
	fs.StringVar(&o.RelayNodeID, "relay-node-id", controlplane.DefaultRelayNodeID, "the node `ID` presented to the --relay server")
	fs.StringVar(&f.clusters, "clusters", "", "with --relay: comma-separated `NAMES` of the clusters to relay (default sizing)")
	fs.BoolVar(&o.Follow, "follow", false, "serve the state file another (writer) control plane persists, read-only")
	fs.DurationVar(&o.FollowInterval, "follow-interval", controlplane.DefaultFollowInterval, "with --follow: how often the state file is read")
	fs.DurationVar(&o.Debounce, "debounce", controlplane.DefaultDebounce, "how long membership must be quiet before a change is published (0: at once)")
	fs.DurationVar(&o.FleetGrace, "fleet-grace", controlplane.DefaultFleetGrace, "how long a gateway's fleet position is held after its last stream closed (> 0)")
	fs.StringVar(&f.tls.Cert, "tls-cert", "", "serve ADS over TLS with this PEM certificate `FILE` (with --tls-key; read again at every handshake)")
	fs.StringVar(&f.tls.Key, "tls-key", "", "the PEM private key `FILE` of --tls-cert")
	fs.StringVar(&f.tls.CA, "tls-client-ca", "", "require client certificates signed by a CA of this PEM bundle `FILE` (mTLS)")
	fs.BoolVar(&o.FleetIdentity, "fleet-require-identity", false, "refuse a fleet subscription whose node id is not a DNS or URI SAN of its client certificate (needs --tls-client-ca)")
	fs.BoolVar(&f.relayOn, "relay-tls", false, "dial --relay over TLS, verified against the system roots (implied by any --relay-tls-* flag)")
	fs.StringVar(&f.relayTLS.CA, "relay-tls-ca", "", "dial --relay over TLS, verified against this PEM CA bundle `FILE`")
	fs.StringVar(&f.relayTLS.Cert, "relay-tls-cert", "", "a client certificate PEM `FILE` for mTLS to --relay (with --relay-tls-key)")
	fs.StringVar(&f.relayTLS.Key, "relay-tls-key", "", "the PEM private key `FILE` of --relay-tls-cert")
	fs.StringVar(&f.relayTLS.ServerName, "relay-tls-server-name", "", "the `NAME` verified in --relay's certificate (default: its host)")
	f.level = logLevel(fs)
}

// options are the parsed flags as options; a value the flags refuse is
// reported on stderr, and false.
func (f *controlPlaneFlags) options(stderr io.Writer) (controlplane.Options, bool) {
	o := f.o
	if o.Debounce == 0 {
		o.Debounce = -1 // 0 on the command line: no window
	}
	if o.FleetGrace <= 0 {
		fmt.Fprintf(stderr, "corput control-plane: --fleet-grace %v: must be > 0\n", o.FleetGrace)
		return o, false
	}
	for _, c := range strings.Split(f.clusters, ",") {
		if c = strings.TrimSpace(c); c != "" {
			o.Clusters = append(o.Clusters, c)
		}
	}
	if f.tls != (tlsfiles.Files{}) {
		o.TLS = &f.tls
	}
	if f.relayOn || f.relayTLS != (tlsfiles.Files{}) {
		o.RelayTLS = &f.relayTLS
	}
	var ok bool
	o.Logger, ok = newLogger("corput control-plane", *f.level, stderr)
	return o, ok
}
