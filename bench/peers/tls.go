package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/corput/corput/internal/testcert"
)

// The raw_tls scenario's TLS settings, the same for every proxy as far as
// each lets them be set: TLS 1.3 only, one throwaway ECDSA P-256
// certificate, and TLS_AES_128_GCM_SHA256 as the only cipher suite. nginx
// and HAProxy (OpenSSL) take both settings. Caddy takes the version and is
// given the suite (its ciphers line), which has no effect: Go's crypto/tls
// does not let TLS 1.3 suites be configured. corput's downstream tls block
// has only cert, key and client_ca, so it serves TLS 1.2 and 1.3 with Go's
// suites. Go's server picks TLS_AES_128_GCM_SHA256 itself when the CPU has
// AES-GCM instructions and the client prefers an AES-GCM suite, as wrk
// (OpenSSL's defaults: AES-256-GCM first) does; the scenario records what
// every proxy negotiated (probeTLS).
const (
	tlsVersion = "TLSv1.3"
	tlsSuite   = "TLS_AES_128_GCM_SHA256"
)

// tlsFiles is a run's throwaway certificate, as PEM files.
type tlsFiles struct {
	cert string // the certificate
	key  string // its ECDSA P-256 key (SEC 1)
	both string // the certificate then the key, in one file (HAProxy's crt)
}

// writeTLSFiles makes a self-signed P-256 certificate for 127.0.0.1, ::1
// and localhost (internal/testcert) and writes it into dir.
func writeTLSFiles(dir string) (*tlsFiles, error) {
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
	both := filepath.Join(dir, "bench-with-key.pem")
	if err := os.WriteFile(both, append(append([]byte{}, c.CertPEM...), c.KeyPEM...), 0o600); err != nil {
		return nil, err
	}
	return &tlsFiles{cert: cert, key: key, both: both}, nil
}

// TLSInfo is what a TLS handshake with a proxy negotiated.
type TLSInfo struct {
	Protocol string `json:"protocol"`          // TLSv1.3
	Cipher   string `json:"cipher"`            // TLS_AES_128_GCM_SHA256
	Group    string `json:"group,omitempty"`   // the key exchange, as openssl prints it: "X25519, 253 bits"
	Probe    string `json:"probe,omitempty"`   // how it was found
	Library  string `json:"library,omitempty"` // the client's TLS library
}

// String is "TLSv1.3 TLS_AES_128_GCM_SHA256 (X25519)".
func (t TLSInfo) String() string {
	s := t.Protocol + " " + t.Cipher
	if g, _, _ := strings.Cut(t.Group, ","); g != "" {
		s += " (" + g + ")"
	}
	return s
}

// expected reports whether t is the scenario's TLS 1.3 and cipher suite.
func (t TLSInfo) expected() bool { return t.Protocol == tlsVersion && t.Cipher == tlsSuite }

// probeTLS does one handshake with the proxy at addr as wrk does: OpenSSL
// (the library wrk links) with its default versions, suites and groups,
// the server name 127.0.0.1, no ALPN, no verification. wrk has no way to
// say what it negotiated, so `openssl s_client` does the same handshake
// and says.
func probeTLS(ctx context.Context, addr string) (TLSInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	argv := []string{"openssl", "s_client", "-connect", addr, "-servername", "127.0.0.1", "-brief"}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader("") // end of input: it closes after the handshake
	out, err := cmd.CombinedOutput()
	if err != nil {
		return TLSInfo{}, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, lastLines(string(out), 5))
	}
	t, err := parseSClient(string(out))
	if err != nil {
		return t, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	t.Probe = "openssl s_client -brief, OpenSSL's defaults"
	if v, err := exec.CommandContext(ctx, "openssl", "version").Output(); err == nil {
		t.Library = opensslLibrary(string(v))
	}
	return t, nil
}

// opensslLibrary is the library version of `openssl version`'s "OpenSSL
// 3.0.19 27 Jan 2026 (Library: OpenSSL 3.0.19 27 Jan 2026)": the library
// is what wrk links.
func opensslLibrary(v string) string {
	v = strings.TrimSpace(v)
	if _, lib, ok := strings.Cut(v, "(Library: "); ok {
		return strings.TrimSuffix(lib, ")")
	}
	return v
}

// parseSClient reads `openssl s_client -brief`'s report of a handshake:
//
//	Protocol version: TLSv1.3
//	Ciphersuite: TLS_AES_128_GCM_SHA256
//	Server Temp Key: X25519, 253 bits
func parseSClient(out string) (TLSInfo, error) {
	var t TLSInfo
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "Protocol version":
			t.Protocol = v
		case "Ciphersuite":
			t.Cipher = v
		case "Server Temp Key", "Negotiated TLS1.3 group":
			if t.Group == "" {
				t.Group = v
			}
		}
	}
	if t.Protocol == "" || t.Cipher == "" {
		return t, fmt.Errorf("no protocol version or cipher suite in its output (did the handshake fail?): %s", lastLines(out, 5))
	}
	return t, nil
}
