package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corput/corput/internal/controlplane"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/tlsfiles"
)

func TestControlPlaneExitCodes(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("origins:\n  - name: a\n    endpoints:\n      - {address: nope}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(dir, "damaged.json")
	if err := os.WriteFile(damaged, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("origins: [{name: a, endpoints: [{address: 127.0.0.1:1}]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"-h"}, 0, "usage: corput control-plane"},
		{"no state", []string{"--source", good}, 2, "--state FILE is required"},
		{"no membership", []string{"--state", state}, 2, "--source FILE, --relay ADDR"},
		{"follow and source", []string{"--state", state, "--follow", "--source", good}, 2, "--follow serves"},
		{"clusters without relay", []string{"--state", state, "--source", good, "--clusters", "a"}, 2, "needs --relay"},
		{"relay without clusters", []string{"--state", state, "--relay", "127.0.0.1:1"}, 2, "--relay needs the clusters"},
		{"bad flag", []string{"--stat", state}, 2, "flag provided but not defined"},
		{"zero fleet grace", []string{"--state", state, "--source", good, "--fleet-grace", "0s"}, 2, "--fleet-grace 0s: must be > 0"},
		{"negative fleet grace", []string{"--state", state, "--source", good, "--fleet-grace", "-1s"}, 2, "--fleet-grace -1s: must be > 0"},
		{"positional", []string{"--state", state, "extra"}, 2, `unexpected argument "extra"`},
		{"invalid source", []string{"--state", state, "--source", bad}, 2, "origins[0].endpoints[0]"},
		{"damaged state", []string{"--state", damaged, "--source", good}, 2, "fix or restore it"},
		{"client CA without a certificate", []string{"--state", state, "--source", good, "--tls-client-ca", good}, 2, "set --tls-cert and --tls-key"},
		{"identity without mTLS", []string{"--state", state, "--source", good, "--fleet-require-identity"}, 2, "--fleet-require-identity checks node ids"},
		{"relay TLS without a relay", []string{"--state", state, "--source", good, "--relay-tls"}, 2, "they need --relay ADDR"},
		{"TLS files that do not load", []string{"--state", state, "--source", good, "--tls-cert", good, "--tls-key", good}, 2, "do not load as a pair"},
		{"listener taken", []string{"--state", state, "--source", good, "--listen", taken.Addr().String(), "--admin", ""}, 1, "--listen"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var errw testlog.Buffer
			code := controlPlaneMain(context.Background(), c.args, io.Discard, &errw)
			if code != c.code || !strings.Contains(errw.String(), c.want) {
				t.Fatalf("exit %d, want %d with %q in:\n%s", code, c.code, c.want, errw.String())
			}
		})
	}
}

// The TLS flags reach the options: the listener's files (nil without
// any), the identity check, and the relay's files (nil without any; the
// system roots with --relay-tls alone).
func TestControlPlaneTLSFlags(t *testing.T) {
	parse := func(args ...string) controlplane.Options {
		t.Helper()
		var f controlPlaneFlags
		fs := flagSet("corput control-plane", io.Discard)
		f.bind(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		o, ok := f.options(io.Discard)
		if !ok {
			t.Fatalf("%v refused", args)
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
