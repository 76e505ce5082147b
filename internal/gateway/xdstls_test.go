package gateway

import (
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/controlplane"
	"github.com/corput/corput/internal/testcert"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/tlsfiles"
	"github.com/corput/corput/internal/waitfor"
)

// A gateway follows `corput control-plane` over mTLS from its
// discovery.tls block, and serves. A reload that leaves the block as it
// was restarts no membership source (the block is compared by content,
// not by pointer), even when the certificate files were rotated
// meanwhile: they are read again at the next connection. A reload that
// changes the block restarts the sources, which follow again.
func TestGatewayFollowsTheControlPlaneOverMTLS(t *testing.T) {
	srvs := fastOrigins(t, 3)
	dir := t.TempDir()
	ca, err := testcert.NewCA("corput-xds")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(base string, use x509.ExtKeyUsage) (string, string) {
		t.Helper()
		cert, key, err := ca.IssueFiles(dir, base, use)
		if err != nil {
			t.Fatal(err)
		}
		return cert, key
	}
	caFile, _, err := ca.WriteFiles(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	cpCert, cpKey := issue("control-plane", x509.ExtKeyUsageServerAuth)
	gwCert, gwKey := issue("gateway", x509.ExtKeyUsageClientAuth)
	source := filepath.Join(dir, "origins.yaml")
	text := "origins:\n  - name: app\n    endpoints:\n"
	for _, s := range srvs {
		text += fmt.Sprintf("      - {address: %q, zone: z1}\n", s.Addr())
	}
	writeFileAtomic(t, source, text)
	cp, err := controlplane.Start(controlplane.Options{Listen: "127.0.0.1:0", StatePath: filepath.Join(dir, "state.json"), Source: source,
		Debounce: -1, TLS: &tlsfiles.Files{CA: caFile, Cert: cpCert, Key: cpKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Close)

	gwConfig := func(serverName string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    discovery:
      type: xds
      server: %q
      cluster: app
      node_id: gw-0
      tls: {ca: %s, cert: %s, key: %s, server_name: %s}
    debounce: 0s
`, cp.Addr(), caFile, gwCert, gwKey, serverName)
	}
	logger, logs := testlog.New(slog.LevelInfo)
	g := runGateway(t, gwConfig("localhost"), Options{Logger: logger})
	waitReady(t, g)
	c, closeIdle := client()
	defer closeIdle()
	getOK(t, c, g, 10)
	if !holds(g, addrsOfServers(srvs)) {
		t.Fatalf("the gateway holds %v, want the control plane's three endpoints", endpointAddrs(adminOrigin(t, g)))
	}

	reload := func(serverName string) {
		t.Helper()
		cfg, err := config.Parse([]byte(gwConfig(serverName)), "test.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Reload(cfg); err != nil {
			t.Fatal(err)
		}
	}
	issue("gateway", x509.ExtKeyUsageClientAuth) // rotated in place
	reload("localhost")
	getOK(t, c, g, 10)
	if strings.Contains(logs.String(), "membership sources restarted") {
		t.Fatalf("a reload with the same discovery.tls restarted the membership sources:\n%s", logs)
	}

	reload("127.0.0.1") // another name the control plane's certificate carries
	waitfor.Until(t, "the sources to restart on the changed tls block", func() bool {
		return strings.Contains(logs.String(), "membership sources restarted")
	})
	waitfor.Until(t, "the restarted source to follow the control plane", func() bool { return adminOrigin(t, g).SourceError == "" })
	getOK(t, c, g, 10)
	if !holds(g, addrsOfServers(srvs)) {
		t.Fatalf("after the restart the gateway holds %v, want the same three endpoints", endpointAddrs(adminOrigin(t, g)))
	}
}
