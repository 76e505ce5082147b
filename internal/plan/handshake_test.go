package plan

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"
)

// BenchmarkTLSHandshake calibrates --handshake-ms: one full TLS 1.3
// handshake (no resumption) between a client and a server in this process
// over an in-memory pipe, so ns/op is the CPU of both ends (they take turns).
// "mtls" adds a client certificate, as a service mesh does.
//
//	go test -run NONE -bench TLSHandshake ./internal/plan/
func BenchmarkTLSHandshake(b *testing.B) {
	for _, tc := range []struct {
		name string
		key  func() (crypto.Signer, error)
		mtls bool
	}{
		{"ecdsa-p256", func() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }, false},
		{"ecdsa-p256-mtls", func() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }, true},
		{"rsa-2048", func() (crypto.Signer, error) { return rsa.GenerateKey(rand.Reader, 2048) }, false},
		{"rsa-2048-mtls", func() (crypto.Signer, error) { return rsa.GenerateKey(rand.Reader, 2048) }, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cert, pool := selfSigned(b, tc.key)
			srv := &tls.Config{Certificates: []tls.Certificate{cert}, SessionTicketsDisabled: true}
			cli := &tls.Config{RootCAs: pool, ServerName: "origin.test", ClientSessionCache: nil}
			if tc.mtls {
				srv.ClientAuth, srv.ClientCAs = tls.RequireAndVerifyClientCert, pool
				cli.Certificates = []tls.Certificate{cert}
			}
			b.ReportAllocs()
			for b.Loop() {
				a, z := net.Pipe()
				done := make(chan error, 1)
				go func() { done <- tls.Server(z, srv).Handshake() }()
				err := tls.Client(a, cli).Handshake()
				if serr := <-done; err == nil {
					err = serr
				}
				a.Close()
				z.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// selfSigned returns a certificate for origin.test, valid as server and
// client, and a pool that trusts it.
func selfSigned(b *testing.B, newKey func() (crypto.Signer, error)) (tls.Certificate, *x509.CertPool) {
	b.Helper()
	key, err := newKey()
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "origin.test"}, DNSNames: []string{"origin.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		b.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
