package origin

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/corput/corput/internal/testcert"
)

// An mTLS origin refuses a client without a certificate, and counts the
// handshakes of one with a certificate: the first full, the next resumed
// from the first's session ticket, each with what it negotiated.
func TestMTLSOriginCountsFullAndResumedHandshakes(t *testing.T) {
	ca, err := testcert.NewCA("bench CA")
	if err != nil {
		t.Fatal(err)
	}
	srvCert, err := ca.Issue("origin", x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	cliCert, err := ca.Issue("proxy", x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile, err := srvCert.WriteFiles(dir, "origin")
	if err != nil {
		t.Fatal(err)
	}
	caFile, _, err := ca.WriteFiles(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, Options{Proto: TLS, CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, MinTLS: tls.VersionTLS13})

	handshake := func(c *tls.Config) error {
		conn, err := tls.Dial("tcp", s.Addr(), c)
		if err != nil {
			return err
		}
		defer conn.Close()
		// TLS 1.3: the client's certificate is checked, and tickets
		// arrive, after the client's Finished; a read makes the client
		// take them (and see a refusal).
		if _, err := conn.Write([]byte("GET /origin/stats HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			return err
		}
		_, err = conn.Read(make([]byte, 1))
		return err
	}
	anonymous := &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"http/1.1"}}
	if err := handshake(anonymous); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	withCert := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cliCert.TLS()}, NextProtos: []string{"http/1.1"},
		ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	for range 2 {
		if err := handshake(withCert); err != nil {
			t.Fatal(err)
		}
	}
	old := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cliCert.TLS()}, MaxVersion: tls.VersionTLS12}
	if err := handshake(old); err == nil {
		t.Fatal("a TLS 1.2 client was served with MinTLS 1.3")
	}
	st := s.Stats().TLS
	if st == nil || st.Full != 1 || st.Resumed != 1 {
		t.Fatalf("handshakes %+v, want 1 full and 1 resumed", st)
	}
	if n := st.Negotiated["TLSv1.3 TLS_AES_128_GCM_SHA256 http/1.1"]; n != 2 {
		t.Fatalf("negotiated %v, want 2 × TLSv1.3 TLS_AES_128_GCM_SHA256 http/1.1", st.Negotiated)
	}
}

// A client CA needs a TLS origin.
func TestClientCANeedsTLS(t *testing.T) {
	if _, err := Start(Options{Proto: H1, ClientCAFile: "ca.pem"}); err == nil {
		t.Fatal("an h1 origin with a client CA started")
	}
}
