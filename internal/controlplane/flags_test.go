package controlplane

import (
	"flag"
	"testing"

	"github.com/corput/corput/internal/tlsfiles"
)

// The TLS flags reach the options: the listener's files (nil without
// any), the identity check, and the relay's files (nil without any; the
// system roots with --relay-tls alone).
func TestControlPlaneTLSFlags(t *testing.T) {
	parse := func(args ...string) Options {
		t.Helper()
		var f Flags
		fs := flag.NewFlagSet("corput control-plane", flag.ContinueOnError)
		f.Bind(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		o, err := f.Options()
		if err != nil {
			t.Fatalf("%v refused: %v", args, err)
		}
		return o
	}
	if o := parse(); o.TLS != nil || o.RelayTLS != nil || o.FleetIdentity {
		t.Fatalf("no TLS flag: TLS %+v, relay TLS %+v, identity %v; want plaintext", o.TLS, o.RelayTLS, o.FleetIdentity)
	}
	o := parse("--tls-cert", "cp.pem", "--tls-key", "cp.key", "--tls-client-ca", "ca.pem", "--fleet-require-identity",
		"--relay-tls-ca", "up.pem", "--relay-tls-cert", "r.pem", "--relay-tls-key", "r.key", "--relay-tls-server-name", "istiod")
	if want := (tlsfiles.Files{CA: "ca.pem", Cert: "cp.pem", Key: "cp.key"}); o.TLS == nil || *o.TLS != want || !o.FleetIdentity {
		t.Errorf("listener TLS %+v identity %v, want %+v and true", o.TLS, o.FleetIdentity, want)
	}
	if want := (tlsfiles.Files{CA: "up.pem", Cert: "r.pem", Key: "r.key", ServerName: "istiod"}); o.RelayTLS == nil || *o.RelayTLS != want {
		t.Errorf("relay TLS %+v, want %+v", o.RelayTLS, want)
	}
	if o := parse("--relay-tls"); o.RelayTLS == nil || *o.RelayTLS != (tlsfiles.Files{}) {
		t.Errorf("--relay-tls alone: relay TLS %+v, want the system roots (no files)", o.RelayTLS)
	}
}
