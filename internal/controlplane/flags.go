package controlplane

import (
	"flag"
	"fmt"
	"strings"

	"github.com/corput/corput/internal/tlsfiles"
)

// Flags are `corput control-plane`'s flags: the Options they give, and the
// ones that need a step before they are Options. Bind defines them on a
// flag set; Options turns the parsed values into Options.
type Flags struct {
	o        Options
	clusters string
	tls      tlsfiles.Files // --tls-cert, --tls-key, --tls-client-ca
	relayTLS tlsfiles.Files // --relay-tls-*
	relayOn  bool           // --relay-tls
}

// Bind defines the flags on fs.
func (f *Flags) Bind(fs *flag.FlagSet) {
	o := &f.o
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:18000", "the ADS (gRPC) `ADDR` gateways connect to (their discovery.server)")
	fs.StringVar(&o.Admin, "admin", "127.0.0.1:9902", "the admin `ADDR`: /healthz, /readyz, /metrics (empty: none)")
	fs.StringVar(&o.StatePath, "state", "", "the state `FILE`: the persisted indices (required; created on the first start); kubernetes:NAMESPACE/NAME keeps it in ConfigMaps NAME-* of NAMESPACE, written by the replica holding the Lease NAME")
	fs.StringVar(&o.Source, "source", "", "a watched YAML or JSON `FILE` of origins (name, subset sizing, endpoints); in relay mode, origins without endpoints")
	fs.StringVar(&o.Relay, "relay", "", "an upstream ADS server's `ADDR`: relay its EDS for the clusters named, with indices added")
	fs.StringVar(&o.RelayNodeID, "relay-node-id", DefaultRelayNodeID, "the node `ID` presented to the --relay server")
	fs.StringVar(&f.clusters, "clusters", "", "with --relay: comma-separated `NAMES` of the clusters to relay (default sizing)")
	fs.BoolVar(&o.Follow, "follow", false, "serve the state file another (writer) control plane persists, read-only")
	fs.DurationVar(&o.FollowInterval, "follow-interval", DefaultFollowInterval, "with --follow: how often the state file is read")
	fs.DurationVar(&o.Debounce, "debounce", DefaultDebounce, "how long membership must be quiet before a change is published (0: at once)")
	fs.DurationVar(&o.FleetGrace, "fleet-grace", DefaultFleetGrace, "how long a gateway's fleet position is held after its last stream closed (> 0)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "the Kubernetes API's kubeconfig `FILE` (default: the pod's service account)")
	fs.StringVar(&o.FleetListen, "fleet-listen", "", "with --state kubernetes:…: the fleet-position `ADDR` (gateways' fleet.server): the leader serves it, the other replicas forward it to the leader")
	fs.StringVar(&o.Advertise, "advertise", "", "with --fleet-listen: the `ADDR` the other replicas reach this one's fleet port at (in a pod: $(POD_IP):PORT)")
	fs.DurationVar(&o.LeaseDuration, "lease-duration", DefaultLeaseDuration, "with --state kubernetes:…: how long the Lease holds without a renewal before another replica takes it (whole seconds)")
	fs.DurationVar(&o.LeaseRetry, "lease-retry", DefaultLeaseRetry, "with --state kubernetes:…: how often the leader renews the Lease")
	fs.StringVar(&o.ID, "id", "", "with --state kubernetes:…: this replica's identity in the Lease (default: the host name, a pod's name)")
	fs.StringVar(&f.tls.Cert, "tls-cert", "", "serve ADS over TLS with this PEM certificate `FILE` (with --tls-key; read again at every handshake)")
	fs.StringVar(&f.tls.Key, "tls-key", "", "the PEM private key `FILE` of --tls-cert")
	fs.StringVar(&f.tls.CA, "tls-client-ca", "", "require client certificates signed by a CA of this PEM bundle `FILE` (mTLS)")
	fs.BoolVar(&o.FleetIdentity, "fleet-require-identity", false, "refuse a fleet subscription whose node id is not a DNS or URI SAN of its client certificate (needs --tls-client-ca)")
	fs.BoolVar(&f.relayOn, "relay-tls", false, "dial --relay over TLS, verified against the system roots (implied by any --relay-tls-* flag)")
	fs.StringVar(&f.relayTLS.CA, "relay-tls-ca", "", "dial --relay over TLS, verified against this PEM CA bundle `FILE`")
	fs.StringVar(&f.relayTLS.Cert, "relay-tls-cert", "", "a client certificate PEM `FILE` for mTLS to --relay (with --relay-tls-key)")
	fs.StringVar(&f.relayTLS.Key, "relay-tls-key", "", "the PEM private key `FILE` of --relay-tls-cert")
	fs.StringVar(&f.relayTLS.ServerName, "relay-tls-server-name", "", "the `NAME` verified in --relay's certificate (default: its host)")
}

// Options are the parsed flags as Options (without a Logger); an error
// names the flag a value is refused for.
func (f *Flags) Options() (Options, error) {
	o := f.o
	if o.Debounce == 0 {
		o.Debounce = -1 // 0 on the command line: no window
	}
	if o.FleetGrace <= 0 {
		return o, fmt.Errorf("--fleet-grace %v: must be > 0", o.FleetGrace)
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
	return o, nil
}
