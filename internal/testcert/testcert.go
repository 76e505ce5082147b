// Package testcert makes throwaway X.509 certificates for tests and for the
// test origin: a certificate authority, leaves it issues, and self-signed
// server certificates, each in memory (a tls.Certificate, a trust pool) and
// as PEM files.
//
// Every key is ECDSA P-256 and every certificate has a random 128-bit
// serial, names 127.0.0.1, ::1 and localhost (and the DNS or URI names
// IssueFor is given: a workload's identity), and is valid from an hour ago
// (wall clock, as clients check it against theirs) for a year. Nothing here
// is fit to protect anything.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Cert is a certificate and its private key.
type Cert struct {
	Leaf    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte // "CERTIFICATE"
	KeyPEM  []byte // "EC PRIVATE KEY" (SEC 1)
}

// NewCA makes a self-signed certificate authority named name: it can only
// sign certificates.
func NewCA(name string) (*Cert, error) {
	return create(name, true, x509.KeyUsageCertSign, nil, nil)
}

// SelfSigned makes a server certificate named name that is its own CA, so
// a client trusts it through Pool.
func SelfSigned(name string) (*Cert, error) {
	return create(name, true, x509.KeyUsageDigitalSignature|x509.KeyUsageCertSign,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, nil)
}

// Issue makes a leaf named name for use (server or client authentication),
// signed by c.
func (c *Cert) Issue(name string, use x509.ExtKeyUsage) (*Cert, error) {
	return create(name, false, x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{use}, c)
}

// IssueFor is Issue with more subject alternative names besides the
// loopback ones: each of sans holding "://" is a URI SAN (a SPIFFE id),
// any other a DNS SAN.
func (c *Cert) IssueFor(name string, use x509.ExtKeyUsage, sans ...string) (*Cert, error) {
	return create(name, false, x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{use}, c, sans...)
}

// IssueFiles is IssueFor written as dir/base.pem and dir/base.key
// (WriteFiles): it returns their paths.
func (c *Cert) IssueFiles(dir, base string, use x509.ExtKeyUsage, sans ...string) (certFile, keyFile string, err error) {
	leaf, err := c.IssueFor(base, use, sans...)
	if err != nil {
		return "", "", err
	}
	return leaf.WriteFiles(dir, base)
}

func create(name string, isCA bool, usage x509.KeyUsage, ext []x509.ExtKeyUsage, parent *Cert, sans ...string) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certificate %q: generate key: %w", name, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("certificate %q: serial: %w", name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              usage,
		ExtKeyUsage:           ext,
		BasicConstraintsValid: true,
		IsCA:                  isCA,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, san := range sans {
		if !strings.Contains(san, "://") {
			tmpl.DNSNames = append(tmpl.DNSNames, san)
			continue
		}
		u, err := url.Parse(san)
		if err != nil {
			return nil, fmt.Errorf("certificate %q: URI SAN %q: %w", name, san, err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.Leaf, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return nil, fmt.Errorf("certificate %q: sign: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certificate %q: parse: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certificate %q: encode key: %w", name, err)
	}
	return &Cert{
		Leaf: leaf, Key: key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// TLS returns c for a tls.Config's Certificates.
func (c *Cert) TLS() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.Leaf.Raw}, PrivateKey: c.Key, Leaf: c.Leaf}
}

// Pool returns a pool that trusts c: for a CA or a self-signed certificate,
// what verifies the certificates it signed.
func (c *Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Leaf)
	return p
}

// WriteFiles writes c as dir/base.pem and its key as dir/base.key and
// returns their paths.
func (c *Cert) WriteFiles(dir, base string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, base+".pem"), filepath.Join(dir, base+".key")
	if err := os.WriteFile(certFile, c.CertPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("certificate %q: %w", c.Leaf.Subject.CommonName, err)
	}
	if err := os.WriteFile(keyFile, c.KeyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("certificate %q: %w", c.Leaf.Subject.CommonName, err)
	}
	return certFile, keyFile, nil
}
