// Package certs writes a peers run's throwaway TLS material as PEM files
// and names the TLS settings every proxy is asked for.
//
// Invariants:
//   - Every certificate and key is ECDSA P-256, made fresh for the run
//     (internal/testcert); nothing here is meant to outlive it.
//   - One set of files serves every proxy in a scenario, so each proxy
//     handshakes with the same certificate.
//   - Version and Suite are the settings every proxy is given where it
//     lets them be set; what each proxy really negotiated is measured
//     elsewhere (the load package's probe, the origins' counters), never
//     assumed from these.
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"

	"github.com/corput/corput/internal/testcert"
)

// The TLS settings, the same for every proxy as far as each lets them be
// set: TLS 1.3 only, one throwaway ECDSA P-256 certificate, and
// TLS_AES_128_GCM_SHA256 as the only cipher suite. nginx and HAProxy
// (OpenSSL) take both settings. Caddy takes the version and is given the
// suite (its ciphers line), which has no effect: Go's crypto/tls does not
// let TLS 1.3 suites be configured. corput's downstream tls block has only
// cert, key and client_ca, so it serves TLS 1.2 and 1.3 with Go's suites.
// Go's server picks TLS_AES_128_GCM_SHA256 itself when the CPU has AES-GCM
// instructions and the client prefers an AES-GCM suite, as wrk (OpenSSL's
// defaults: AES-256-GCM first) does; the raw_tls scenario records what
// every proxy negotiated.
const (
	Version = "TLSv1.3"
	Suite   = "TLS_AES_128_GCM_SHA256"
)

// Files is a run's throwaway server certificate, as PEM files: what the
// proxies serve HTTPS with.
type Files struct {
	Cert string // the certificate
	Key  string // its ECDSA P-256 key (SEC 1)
	Both string // the certificate then the key, in one file (HAProxy's crt)
}

// Write makes a self-signed P-256 certificate for 127.0.0.1, ::1 and
// localhost and writes it into dir.
func Write(dir string) (*Files, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c, err := testcert.SelfSigned("corput bench")
	if err != nil {
		return nil, err
	}
	cert, key, err := c.WriteFiles(dir, "bench")
	if err != nil {
		return nil, err
	}
	both, err := writeBoth(dir, "bench-with-key.pem", c.CertPEM, c.KeyPEM)
	if err != nil {
		return nil, err
	}
	return &Files{Cert: cert, Key: key, Both: both}, nil
}

// Upstream is a run's upstream TLS, as PEM files: a CA, the origins'
// certificate it issued, and the proxies' client certificate.
type Upstream struct {
	CA         string // the CA certificate
	Cert, Key  string // the origins' certificate
	ClientCert string // the proxies' client certificate
	ClientKey  string
	ClientBoth string      // client certificate then key (HAProxy's crt)
	Client     *tls.Config // the runner's own, for the origins' stats
	ServerName string      // a name the origins' certificate has (nginx and Caddy check it)
	OriginsMin string      // the origins' --min-tls
}

// WriteUpstream makes the run's CA, origin and client certificates in dir.
func WriteUpstream(dir string) (*Upstream, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ca, err := testcert.NewCA("corput bench CA")
	if err != nil {
		return nil, err
	}
	srv, err := ca.Issue("corput bench origin", x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	cli, err := ca.Issue("corput bench proxy", x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	u := &Upstream{ServerName: "localhost", OriginsMin: "1.3"}
	if u.CA, _, err = ca.WriteFiles(dir, "ca"); err != nil {
		return nil, err
	}
	if u.Cert, u.Key, err = srv.WriteFiles(dir, "origin"); err != nil {
		return nil, err
	}
	if u.ClientCert, u.ClientKey, err = cli.WriteFiles(dir, "client"); err != nil {
		return nil, err
	}
	if u.ClientBoth, err = writeBoth(dir, "client-with-key.pem", cli.CertPEM, cli.KeyPEM); err != nil {
		return nil, err
	}
	u.Client = &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cli.TLS()}, MinVersion: tls.VersionTLS13}
	return u, nil
}

// writeBoth writes a certificate then its key into one file, dir/name.
func writeBoth(dir, name string, cert, key []byte) (string, error) {
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, append(append([]byte{}, cert...), key...), 0o600)
}
