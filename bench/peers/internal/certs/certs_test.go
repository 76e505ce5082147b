package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"
)

// TestWrite: the run's certificate is a P-256 ECDSA one for 127.0.0.1,
// and HAProxy's file holds the same certificate with its key.
func TestWrite(t *testing.T) {
	tc, err := Write(filepath.Join(t.TempDir(), "tls"))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(tc.Cert, tc.Key)
	if err != nil {
		t.Fatal(err)
	}
	both, err := tls.LoadX509KeyPair(tc.Both, tc.Both)
	if err != nil {
		t.Fatalf("%s (certificate and key in one file): %v", tc.Both, err)
	}
	if !bytes.Equal(pair.Certificate[0], both.Certificate[0]) {
		t.Error("HAProxy's file holds another certificate")
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		t.Fatalf("key %T; want ECDSA P-256", pair.PrivateKey)
	}
	if err := pair.Leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
}

// TestWriteUpstream: the origins' certificate verifies against the CA for
// the server name the proxies are given, the client certificate verifies
// as a client's, and HAProxy's client file holds the client pair.
func TestWriteUpstream(t *testing.T) {
	u, err := WriteUpstream(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := tls.LoadX509KeyPair(u.Cert, u.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Leaf.Verify(x509.VerifyOptions{Roots: u.Client.RootCAs, DNSName: u.ServerName}); err != nil {
		t.Errorf("origin certificate for %q: %v", u.ServerName, err)
	}
	cli, err := tls.LoadX509KeyPair(u.ClientBoth, u.ClientBoth)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Leaf.Verify(x509.VerifyOptions{Roots: u.Client.RootCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := srv.Leaf.Verify(x509.VerifyOptions{Roots: u.Client.RootCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("the origins' certificate verifies as a client's")
	}
}
