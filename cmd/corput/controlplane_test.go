package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corput/corput/internal/testlog"
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
