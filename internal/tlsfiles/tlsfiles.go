// Package tlsfiles gives TLS configurations whose certificate, key and CA
// bundle come from PEM files that are read again for every connection, so
// that a rotated file — a cert-manager Secret the kubelet swaps in, a file
// renamed over the old one — is used by the next handshake, with no
// restart, no reload and no watcher. It carries corput's xDS: the control
// plane's listener (Server) and every client of it (Client).
//
// Invariants:
//   - Each handshake (Server) or each Client call uses the files' content
//     as it is at that moment. Content unchanged since the last load is
//     not parsed again.
//   - Files that do not load never replace the last ones that did: a
//     rotation caught half-way (a new certificate beside the old key, an
//     empty bundle) keeps the last good material in force, and the log
//     says why once per failure, then once when a good set loads again.
//   - New loads the files once: files that do not load then are an error,
//     so a bad path or a key that is not the certificate's fails at start.
//   - A connection keeps the certificate it was established with: a
//     rotation affects connections opened after it, never one that is up.
//   - No goroutine: the files are read on the handshake's own.
package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
)

// Files names the PEM files of one side of a TLS connection.
type Files struct {
	// CA is a bundle of CA certificates: for a client, the roots that
	// verify the server (empty: the system's roots); for a server, the
	// CAs that verify client certificates, which are then required
	// (empty: none asked for). A bundle holding the old and the new CA
	// lets a CA rotation proceed one side at a time.
	CA string
	// Cert and Key are a certificate (chain) and its private key: the
	// server's, or a client's for mTLS. Both or neither.
	Cert, Key string
	// ServerName is the name a client verifies the server's certificate
	// against, and sends as SNI; empty: the host it dials.
	ServerName string
}

// material is what one load of the files gave.
type material struct {
	pool *x509.CertPool   // nil: no CA file
	cert *tls.Certificate // nil: no certificate file
}

// Loader reads a Files set, for every connection, and keeps the last good
// material.
type Loader struct {
	files Files
	log   *slog.Logger

	mu     sync.Mutex // guards following
	raw    [3][]byte  // CA, cert, key as last loaded
	cur    material
	failed string // the load error logged last; "" after a good load
}

// New loads f once and returns its loader; log (nil: slog.Default) hears
// rotations and files that stop loading.
func New(f Files, log *slog.Logger) (*Loader, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("a certificate and its key go together: give both files, or neither")
	}
	if log == nil {
		log = slog.Default()
	}
	l := &Loader{files: f, log: log}
	raw, err := l.read()
	if err != nil {
		return nil, err
	}
	if l.cur, err = l.parse(raw); err != nil {
		return nil, err
	}
	l.raw = raw
	return l, nil
}

// Files returns the files the loader reads.
func (l *Loader) Files() Files { return l.files }

// Client returns a client configuration from the files as they are now
// (or as they last loaded): the CA bundle as the roots, the certificate
// for mTLS, the server name to verify. A gRPC client wraps it in
// credentials.NewTLS, which adds h2 to the ALPN protocols.
func (l *Loader) Client() *tls.Config {
	m := l.load()
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: m.pool, ServerName: l.files.ServerName}
	if m.cert != nil {
		c.Certificates = []tls.Certificate{*m.cert}
	}
	return c
}

// Server returns a server configuration that loads the files at every
// handshake: the certificate, and with a CA bundle a client certificate
// required and verified against it. The files must name a certificate.
func (l *Loader) Server() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := l.load()
			if m.cert == nil {
				return nil, errors.New("tlsfiles: a server needs a certificate and key")
			}
			c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*m.cert}}
			if m.pool != nil {
				c.ClientCAs, c.ClientAuth = m.pool, tls.RequireAndVerifyClientCert
			}
			return c, nil
		},
	}
}

// load returns the material of the files as they are now, parsing them
// only if they changed; files that do not load leave the last good
// material in force.
func (l *Loader) load() material {
	l.mu.Lock()
	defer l.mu.Unlock()
	raw, err := l.read()
	if err == nil && bytes.Equal(raw[0], l.raw[0]) && bytes.Equal(raw[1], l.raw[1]) && bytes.Equal(raw[2], l.raw[2]) {
		return l.cur
	}
	var m material
	if err == nil {
		m, err = l.parse(raw)
	}
	if err != nil {
		if msg := err.Error(); msg != l.failed {
			l.failed = msg
			l.log.Warn("TLS files do not load; the last good ones stay in force until they do", "err", err)
		}
		return l.cur
	}
	l.raw, l.cur, l.failed = raw, m, ""
	attrs := []any{"ca", l.files.CA, "cert", l.files.Cert}
	if m.cert != nil && m.cert.Leaf != nil {
		attrs = append(attrs, "subject", m.cert.Leaf.Subject.String(), "serial", m.cert.Leaf.SerialNumber.Text(16),
			"not_after", m.cert.Leaf.NotAfter)
	}
	l.log.Info("TLS files changed; new connections use them", attrs...)
	return m
}

// read reads the files that are set.
func (l *Loader) read() ([3][]byte, error) {
	var raw [3][]byte
	for i, path := range [3]string{l.files.CA, l.files.Cert, l.files.Key} {
		if path == "" {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return raw, err
		}
		raw[i] = b
	}
	return raw, nil
}

// parse turns the files' content into material.
func (l *Loader) parse(raw [3][]byte) (material, error) {
	var m material
	if l.files.CA != "" {
		m.pool = x509.NewCertPool()
		if !m.pool.AppendCertsFromPEM(raw[0]) {
			return material{}, fmt.Errorf("CA file %s holds no PEM certificate", l.files.CA)
		}
	}
	if l.files.Cert != "" {
		cert, err := tls.X509KeyPair(raw[1], raw[2])
		if err != nil {
			return material{}, fmt.Errorf("certificate %s and key %s do not load as a pair: %w", l.files.Cert, l.files.Key, err)
		}
		m.cert = &cert
	}
	return m, nil
}

// Loopback reports whether addr (host:port) is on the loopback interface:
// localhost or a loopback IP. Plaintext there crosses no network.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
