package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/corput/corput/internal/tlsfiles"
)

// xdsOrigin is a config whose one origin follows server over xDS, with
// extra lines in its discovery block and top lines before it all.
func xdsOrigin(topLines, server, discoveryExtra string) string {
	return topLines + `
routes: [{origin: api}]
origins:
  - name: api
    discovery:
      type: xds
      server: ` + server + `
      cluster: api
` + indent(discoveryExtra, "      ") + "\n"
}

// The xDS tls blocks (discovery.tls, fleet.tls) resolve their paths
// against the config file's directory, load, and reach the xDS client as
// tlsfiles.Files; with them, nothing warns.
func TestXDSTLSResolvedAndLoaded(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "xds"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeCert(t, filepath.Join(dir, "xds"), "ca")
	writeCert(t, filepath.Join(dir, "xds"), "gw")
	cfgPath := filepath.Join(dir, "gw.yaml")
	write(t, cfgPath, xdsOrigin(
		"fleet: {server: cp.corput.svc:18000, tls: {ca: xds/ca.pem, cert: xds/gw.pem, key: xds/gw.key, server_name: cp}}",
		"cp.corput.svc:18000", "tls: {ca: xds/ca.pem, cert: xds/gw.pem, key: xds/gw.key}"))
	cfg, err := Load(cfgPath)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if w := cfg.Warnings(); len(w) != 0 {
		t.Fatalf("warnings over TLS: %v", w)
	}
	x := filepath.Join(dir, "xds")
	want := &tlsfiles.Files{CA: filepath.Join(x, "ca.pem"), Cert: filepath.Join(x, "gw.pem"), Key: filepath.Join(x, "gw.key")}
	if got := cfg.Origins[0].Discovery.TLS.Files(); !reflect.DeepEqual(got, want) {
		t.Errorf("discovery.tls = %+v, want %+v", got, want)
	}
	want.ServerName = "cp"
	if got := cfg.Fleet.TLS.Files(); !reflect.DeepEqual(got, want) {
		t.Errorf("fleet.tls = %+v, want %+v", got, want)
	}
	if (*XDSTLS)(nil).Files() != nil {
		t.Error("no tls block must be plaintext (nil files)")
	}
	for _, f := range cfg.Files() {
		if strings.HasPrefix(f, x) {
			t.Errorf("Files() lists %s: the xDS clients read their TLS files per connection, a reload is not needed", f)
		}
	}
}

// Plaintext xDS to a server off loopback is a warning (corput check
// prints it; the config is valid), for discovery.server and fleet.server
// alike; to loopback it is not.
func TestPlaintextXDSOffLoopbackWarns(t *testing.T) {
	for _, tc := range []struct {
		name, src, key string
	}{
		{"discovery to a Service", xdsOrigin("", "corput-control-plane:18000", ""), "origins[0].discovery.server"},
		{"discovery to a pod address", xdsOrigin("", "10.0.0.7:18000", ""), "origins[0].discovery.server"},
		{"fleet to a Service", top("fleet: {server: corput-control-plane:18000}"), "fleet.server"},
		{"loopback", xdsOrigin("fleet: {server: 127.0.0.1:18000}", "localhost:18000", ""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, tc.src)
			ws := cfg.Warnings()
			if tc.key == "" {
				if len(ws) != 0 {
					t.Fatalf("plaintext to loopback warned: %v", ws)
				}
				return
			}
			if len(ws) != 1 || ws[0].Key != tc.key || !strings.Contains(ws[0].Message, "plaintext xDS") || !strings.Contains(ws[0].Message, ".tls: {ca: FILE}") {
				t.Fatalf("warnings = %v, want one on %s saying plaintext xDS and how to add tls", ws, tc.key)
			}
		})
	}
}

func TestXDSTLSProblems(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "a")
	writeCert(t, dir, "b")
	a, aKey, b := filepath.Join(dir, "a.pem"), filepath.Join(dir, "a.key"), filepath.Join(dir, "b.pem")
	second := func(tls string) string {
		return xdsOrigin("", "cp:18000", "tls: {ca: "+a+"}") + `  - name: web
    discovery: {type: xds, server: cp:18000, cluster: web` + tls + `}
`
	}
	for _, tc := range []struct {
		name, src, key, text string
	}{
		{"skip verify is not offered", xdsOrigin("", "cp:18000", "tls: {insecure_skip_verify: true}"),
			"origins[0].discovery.tls.insecure_skip_verify", "unknown key"},
		{"a CA file that is not there", xdsOrigin("", "cp:18000", "tls: {ca: "+filepath.Join(dir, "absent.pem")+"}"),
			"origins[0].discovery.tls.ca", "cannot read"},
		{"a cert without its key", xdsOrigin("", "cp:18000", "tls: {cert: "+a+"}"),
			"origins[0].discovery.tls.key", "missing: cert is set"},
		{"a key that is not the cert's", top("fleet: {server: cp:18000, tls: {cert: " + b + ", key: " + aKey + "}}"),
			"fleet.tls.cert", "do not load as a certificate and its key"},
		{"tls on a static origin", origin("discovery: {type: static, tls: {ca: " + a + "}}"),
			"origins[0].discovery.tls", "only used with discovery type xds"},
		{"fleet tls without a server", top("fleet: {size: 1, tls: {ca: " + a + "}}"),
			"fleet.tls", "fleet.server, which is not set"},
		{"one server, two tls blocks", second(", tls: {ca: " + b + "}"),
			"origins[1].discovery.tls", "share one stream"},
		{"one server, tls and plaintext", second(""),
			"origins[1].discovery.tls", "share one stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := parseDiags(t, tc.src)
			for _, d := range ds.Errors() {
				if d.Key == tc.key && strings.Contains(d.Message, tc.text) {
					return
				}
			}
			t.Fatalf("diagnostics %v, want an error on %s saying %q", ds, tc.key, tc.text)
		})
	}
	// Two origins on one server with one block (a YAML anchor) are fine.
	if _, err := Parse([]byte(second(", tls: {ca: "+a+"}")), "test.yaml"); err != nil {
		t.Fatalf("one server, one tls block: %v", err)
	}
}
