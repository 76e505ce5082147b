package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func verify(t *testing.T, c *Cert, roots *x509.CertPool, use x509.ExtKeyUsage) {
	t.Helper()
	for _, host := range []string{"127.0.0.1", "::1", "localhost"} {
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{use}}); err != nil {
			t.Errorf("%s for %s: %v", c.Leaf.Subject.CommonName, host, err)
		}
	}
}

func TestCAIssuesLeavesItsPoolVerifies(t *testing.T) {
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue("server", x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue("client", x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	verify(t, server, ca.Pool(), x509.ExtKeyUsageServerAuth)
	verify(t, client, ca.Pool(), x509.ExtKeyUsageClientAuth)
	if _, err := server.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("a server certificate verified for client authentication")
	}
	if server.Leaf.IsCA || server.Leaf.SerialNumber.Cmp(client.Leaf.SerialNumber) == 0 {
		t.Errorf("leaves: IsCA %v, serials %v and %v; want no CA and distinct serials", server.Leaf.IsCA, server.Leaf.SerialNumber, client.Leaf.SerialNumber)
	}
	other, err := NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.Leaf.Verify(x509.VerifyOptions{Roots: other.Pool()}); err == nil {
		t.Error("a leaf verified against another CA")
	}
}

// A self-signed certificate written to files serves a real TLS handshake
// on loopback that a client trusting its Pool accepts.
func TestSelfSignedFilesServeTLS(t *testing.T) {
	c, err := SelfSigned("self")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := c.WriteFiles(t.TempDir(), "self")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 2)
	go func() {
		for range 2 {
			nc, err := ln.Accept()
			if err == nil {
				err = nc.(*tls.Conn).Handshake()
				nc.Close()
			}
			served <- err
		}
	}()
	nc, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: c.Pool()})
	if err != nil {
		t.Fatalf("handshake with the self-signed certificate: %v", err)
	}
	nc.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if _, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: x509.NewCertPool()}); err == nil {
		t.Fatal("a client trusting nothing accepted the certificate")
	}
	if err := <-served; err == nil {
		t.Fatal("the server completed a handshake the client refused")
	}
}

// IssueFiles names the SANs given, a URI for each holding "://", besides
// the loopback names, and writes a pair that loads.
func TestIssueFilesNamesTheSANs(t *testing.T) {
	ca, err := NewCA("ca")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := ca.IssueFiles(t.TempDir(), "gw", x509.ExtKeyUsageClientAuth, "gw-a", "spiffe://corput.test/gw-a")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf := pair.Leaf
	if !slices.Equal(leaf.DNSNames, []string{"localhost", "gw-a"}) || len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://corput.test/gw-a" {
		t.Fatalf("DNS SANs %v, URI SANs %v", leaf.DNSNames, leaf.URIs)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the CA does not verify its leaf: %v", err)
	}
}
