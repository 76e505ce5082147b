package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corput/corput/internal/testcert"
)

// writeCert writes a self-signed certificate and its key as PEM files
// named base.pem and base.key in dir.
func writeCert(t *testing.T, dir, base string) {
	t.Helper()
	c, err := testcert.SelfSigned(base)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.WriteFiles(dir, base); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTLSFilesResolvedAndLoaded: relative TLS paths are resolved against
// the config file's directory, and real PEM files pass.
func TestTLSFilesResolvedAndLoaded(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "certs"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeCert(t, filepath.Join(dir, "certs"), "server")
	writeCert(t, filepath.Join(dir, "certs"), "client")
	cfgPath := filepath.Join(dir, "gw.yaml")
	write(t, cfgPath, `
tls: {cert: certs/server.pem, key: certs/server.key, client_ca: certs/client.pem}
routes: [{origin: api}]
origins:
  - name: api
    protocol: h2
    tls: {ca: certs/server.pem, cert: certs/client.pem, key: certs/client.key, server_name: localhost}
    endpoints: [{address: "localhost:9443"}]
`)
	cfg, err := Load(cfgPath)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	certs := filepath.Join(dir, "certs")
	if got, want := cfg.TLS.Cert, filepath.Join(certs, "server.pem"); got != want {
		t.Errorf("tls.cert = %q, want %q", got, want)
	}
	if got, want := cfg.TLS.ClientCA, filepath.Join(certs, "client.pem"); got != want {
		t.Errorf("tls.client_ca = %q, want %q", got, want)
	}
	ot := cfg.Origins[0].TLS
	if ot.CA != filepath.Join(certs, "server.pem") || ot.Key != filepath.Join(certs, "client.key") || ot.ServerName != "localhost" {
		t.Errorf("origin tls = %+v", ot)
	}

	// Absolute paths stay as written.
	abs := filepath.Join(certs, "server.pem")
	cfg = mustParse(t, origin("protocol: h2\ntls: {ca: "+abs+"}"))
	if cfg.Origins[0].TLS.CA != abs {
		t.Errorf("absolute path rewritten to %q", cfg.Origins[0].TLS.CA)
	}
}

func TestTLSFileProblems(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "a")
	writeCert(t, dir, "b")
	write(t, filepath.Join(dir, "junk.pem"), "not pem\n")
	cfgPath := filepath.Join(dir, "gw.yaml")
	write(t, cfgPath, `tls: {cert: a.pem, key: b.key, client_ca: junk.pem}
routes: [{origin: api}]
origins:
  - name: api
    tls: {ca: .}
    endpoints: [{address: "localhost:9443"}]
`)
	_, err := Load(cfgPath)
	var ds Diagnostics
	if !errors.As(err, &ds) {
		t.Fatalf("Load: %v", err)
	}
	wants := []struct{ key, text string }{
		{"tls.cert", "do not load as a certificate and its key"},
		{"tls.client_ca", "holds no PEM certificate"},
		{"origins[0].tls.ca", "is not a regular file"},
	}
	if len(ds) != len(wants) {
		t.Fatalf("got %d diagnostics, want %d:\n%v", len(ds), len(wants), ds)
	}
	for i, w := range wants {
		if ds[i].Key != w.key || !strings.Contains(ds[i].Message, w.text) {
			t.Errorf("diagnostic %d = %s, want %s: …%s…", i, ds[i], w.key, w.text)
		}
	}
}

// TestServerTLSPolicyKeys: the tls block's policy keys are decoded with
// their defaults shown, their files resolved, listed for --watch, and
// their problems reported as `file:line: key: message`.
func TestServerTLSPolicyKeys(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "server")
	writeCert(t, dir, "api")
	write(t, filepath.Join(dir, "tickets"), "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n")
	cfgPath := filepath.Join(dir, "gw.yaml")
	write(t, cfgPath, `tls:
  cert: server.pem
  key: server.key
  session_ticket_keys: tickets
  certificates:
    - {hosts: [localhost], cert: api.pem, key: api.key, client_ca: server.pem, client_auth: verify_if_given}
routes: [{origin: api}]
origins:
  - name: api
    endpoints: [{address: "localhost:9443"}]
`)
	cfg, err := Load(cfgPath)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := cfg.TLS; got.MinVersion != "1.2" || len(got.CipherSuites) != 6 || len(got.Curves) != 4 || strings.Join(got.ALPN, ",") != "h2,http/1.1" {
		t.Errorf("defaults not filled in: %+v", got)
	}
	h := cfg.TLS.Certificates[0]
	if h.Cert != filepath.Join(dir, "api.pem") || h.ClientCA != filepath.Join(dir, "server.pem") || cfg.TLS.SessionTicketKeys != filepath.Join(dir, "tickets") {
		t.Errorf("paths not resolved: %+v, %q", h, cfg.TLS.SessionTicketKeys)
	}
	files := strings.Join(cfg.Files(), " ")
	for _, f := range []string{"tickets", "api.pem", "api.key"} {
		if !strings.Contains(files, filepath.Join(dir, f)) {
			t.Errorf("Files() = %s: %s missing", files, f)
		}
	}

	write(t, cfgPath, `tls:
  cert: server.pem
  key: server.key
  min_version: "1.1"
  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_RSA_WITH_AES_128_GCM_SHA256]
  certificates:
    - hosts: [api.test, "a*.test"]
      cert: api.pem
      key: api.key
      client_auth: sometimes
routes: [{origin: api}]
origins:
  - name: api
    endpoints: [{address: "localhost:9443"}]
`)
	_, err = Load(cfgPath)
	var ds Diagnostics
	if !errors.As(err, &ds) {
		t.Fatalf("Load: %v", err)
	}
	wants := []string{
		cfgPath + `:4: tls.min_version: TLS 1.1 is deprecated (RFC 8996)`,
		cfgPath + `:5: tls.cipher_suites[1]: TLS_RSA_WITH_AES_128_GCM_SHA256 is among crypto/tls's insecure suites`,
		cfgPath + `:7: tls.certificates[0].hosts[0]: warning: the certificate does not name api.test`,
		cfgPath + `:7: tls.certificates[0].hosts[1]: "a*.test" is not a server name`,
		cfgPath + `:10: tls.certificates[0].client_auth: "sometimes" is not one of: none, request, require, verify_if_given`,
	}
	if len(ds) != len(wants) {
		t.Fatalf("got %d diagnostics, want %d:\n%v", len(ds), len(wants), ds)
	}
	for i, w := range wants {
		if !strings.HasPrefix(ds[i].String(), w) {
			t.Errorf("diagnostic %d = %s\nwant %s…", i, ds[i], w)
		}
	}
}
