package serve

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/controlplane"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/testcert"
	"github.com/corput/corput/internal/tlsfiles"
)

// fleet.tls reaches the fleet client: a gateway whose certificate names
// its node id gets its position from a control plane that requires mTLS
// and the certificate's identity.
func TestFleetPositionOverMTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := testcert.NewCA("corput-xds")
	if err != nil {
		t.Fatal(err)
	}
	caFile, _, err := ca.WriteFiles(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	cpCert, cpKey, err := ca.IssueFiles(dir, "control-plane", x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	gwCert, gwKey, err := ca.IssueFiles(dir, "gateway", x509.ExtKeyUsageClientAuth, "gw-a")
	if err != nil {
		t.Fatal(err)
	}
	source := filepath.Join(dir, "origins.yaml")
	if err := os.WriteFile(source, []byte("origins: [{name: a, endpoints: [{address: 127.0.0.1:1}]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cp, err := controlplane.Start(controlplane.Options{Listen: "127.0.0.1:0", StatePath: filepath.Join(dir, "state.json"), Source: source,
		Debounce: -1, TLS: &tlsfiles.Files{CA: caFile, Cert: cpCert, Key: cpKey}, FleetIdentity: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
fleet: {server: %q, node_id: gw-a, tls: {ca: %s, cert: %s, key: %s}}
routes: [{path_prefix: /, origin: a}]
origins: [{name: a, endpoints: [{address: 127.0.0.1:1}]}]
`, cp.Addr(), caFile, gwCert, gwKey)), "corput.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := followFleet(ctx, cfg, discovery.FleetInputs{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-f.done }()
	fl, err := f.first(ctx)
	if err != nil || fl.Instance != 0 || fl.Size != 1 {
		t.Fatalf("position %+v, err %v; want 0 of 1 over mTLS", fl, err)
	}
}
