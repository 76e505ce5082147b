package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/testcert"
	"github.com/corput/corput/internal/testlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pki is a CA and the files of certificates it issued, in one directory.
type pki struct {
	t   *testing.T
	dir string
	ca  *testcert.Cert
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	ca, err := testcert.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return &pki{t: t, dir: t.TempDir(), ca: ca}
}

func (p *pki) issue(name string, use x509.ExtKeyUsage) *testcert.Cert {
	p.t.Helper()
	c, err := p.ca.Issue(name, use)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// replace writes content over path by a rename, as a rotation does.
func replace(t *testing.T, path string, content []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// install writes c as dir/base.pem and dir/base.key, by renames.
func install(t *testing.T, dir, base string, c *testcert.Cert) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, base+".pem"), filepath.Join(dir, base+".key")
	replace(t, certFile, c.CertPEM)
	replace(t, keyFile, c.KeyPEM)
	return certFile, keyFile
}

// server is a TLS echo server on 127.0.0.1 over a Loader's Server
// configuration.
type server struct {
	ln net.Listener
	wg sync.WaitGroup
}

func serve(t *testing.T, l *Loader) *server {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", l.Server())
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

// dial opens a TLS connection with cfg and returns it with the serial of
// the certificate the server presented; the connection is closed with t.
func dial(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, string, error) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, "", err
	}
	t.Cleanup(func() { c.Close() })
	// A TLS 1.3 server checks the client's certificate after the
	// client's handshake returns: a round trip shows whether it was taken.
	if err := echo(c, "hello"); err != nil {
		return nil, "", err
	}
	return c, c.ConnectionState().PeerCertificates[0].SerialNumber.Text(16), nil
}

func echo(c net.Conn, msg string) error {
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return io.ErrUnexpectedEOF
	}
	return nil
}

func serial(c *testcert.Cert) string { return c.Leaf.SerialNumber.Text(16) }

// rotation is a TLS server on the first of two certificates of one CA,
// installed as files, and a client that trusts the CA.
type rotation struct {
	p             *pki
	first, second *testcert.Cert
	cert, key     string // the server's files
	log           *testlog.Buffer
	server        *server
	client        *tls.Config
}

func newRotation(t *testing.T) rotation {
	t.Helper()
	r := rotation{p: newPKI(t, "ca")}
	r.first, r.second = r.p.issue("cp-1", x509.ExtKeyUsageServerAuth), r.p.issue("cp-2", x509.ExtKeyUsageServerAuth)
	r.cert, r.key = install(t, r.p.dir, "server", r.first)
	var log *slog.Logger
	log, r.log = testlog.New(slog.LevelInfo)
	l, err := New(Files{Cert: r.cert, Key: r.key}, log)
	if err != nil {
		t.Fatal(err)
	}
	r.server = serve(t, l)
	r.client = &tls.Config{RootCAs: r.p.ca.Pool(), ServerName: "localhost"}
	return r
}

// A server's certificate is read again at every handshake: the next
// connection after a rotation gets the new one, and a connection opened
// before it keeps working.
func TestServerUsesARotatedCertificateAtTheNextHandshake(t *testing.T) {
	r := newRotation(t)
	before, got, err := dial(t, r.server.ln.Addr().String(), r.client)
	if err != nil || got != serial(r.first) {
		t.Fatalf("before the rotation: serial %s, err %v; want %s", got, err, serial(r.first))
	}
	install(t, r.p.dir, "server", r.second)
	if _, got, err = dial(t, r.server.ln.Addr().String(), r.client); err != nil || got != serial(r.second) {
		t.Fatalf("after the rotation: serial %s, err %v; want the new certificate's %s", got, err, serial(r.second))
	}
	if err := echo(before, "still up"); err != nil {
		t.Fatalf("the connection opened before the rotation broke: %v", err)
	}
	if !strings.Contains(r.log.String(), "TLS files changed") || !strings.Contains(r.log.String(), serial(r.second)) {
		t.Errorf("the rotation was not logged with the new serial:\n%s", r.log)
	}
}

// A client's CA bundle is read at every Client call: after the bundle is
// replaced, the old CA's servers are no longer trusted and the new one's
// are.
func TestClientUsesARotatedCABundle(t *testing.T) {
	oldCA, newCA := newPKI(t, "old-ca"), newPKI(t, "new-ca")
	serverOf := func(p *pki) *server {
		cert, key := install(t, p.dir, "server", p.issue("cp", x509.ExtKeyUsageServerAuth))
		l, err := New(Files{Cert: cert, Key: key}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return serve(t, l)
	}
	oldServer, newServer := serverOf(oldCA), serverOf(newCA)
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	replace(t, bundle, oldCA.ca.CertPEM)
	l, err := New(Files{CA: bundle, ServerName: "localhost"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := dial(t, oldServer.ln.Addr().String(), l.Client()); err != nil {
		t.Fatalf("the old CA's server, trusted: %v", err)
	}
	if _, _, err := dial(t, newServer.ln.Addr().String(), l.Client()); err == nil {
		t.Fatal("the new CA's server was trusted before the bundle named it")
	}
	replace(t, bundle, newCA.ca.CertPEM)
	if _, _, err := dial(t, newServer.ln.Addr().String(), l.Client()); err != nil {
		t.Fatalf("the new CA's server after the rotation: %v", err)
	}
	var unknown x509.UnknownAuthorityError
	if _, _, err := dial(t, oldServer.ln.Addr().String(), l.Client()); !errors.As(err, &unknown) {
		t.Fatalf("the old CA's server after the rotation: err %v, want an unknown authority", err)
	}
}

// Files caught half-way through a rotation (the new certificate beside
// the old key) keep the last good pair in force, logged once however many
// handshakes see them; the completed rotation is used.
func TestFilesThatDoNotLoadKeepTheLastGood(t *testing.T) {
	r := newRotation(t)
	replace(t, r.cert, r.second.CertPEM) // the key is still the first's
	for range 3 {
		if _, got, err := dial(t, r.server.ln.Addr().String(), r.client); err != nil || got != serial(r.first) {
			t.Fatalf("half-way: serial %s, err %v; want the last good %s", got, err, serial(r.first))
		}
	}
	if n := strings.Count(r.log.String(), "level=WARN"); n != 1 {
		t.Errorf("the half-way files were logged %d times, want once:\n%s", n, r.log)
	}
	replace(t, r.key, r.second.KeyPEM)
	if _, got, err := dial(t, r.server.ln.Addr().String(), r.client); err != nil || got != serial(r.second) {
		t.Fatalf("rotation complete: serial %s, err %v; want %s", got, err, serial(r.second))
	}
}

// With a CA bundle a server requires a client certificate the bundle
// verifies: none, or one of another CA, is refused.
func TestServerWithACABundleRequiresAClientCertificate(t *testing.T) {
	p, other := newPKI(t, "ca"), newPKI(t, "other-ca")
	cert, key := install(t, p.dir, "server", p.issue("cp", x509.ExtKeyUsageServerAuth))
	ca := filepath.Join(p.dir, "clients.pem")
	replace(t, ca, p.ca.CertPEM)
	l, err := New(Files{CA: ca, Cert: cert, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, l)
	for _, tc := range []struct {
		name   string
		client *testcert.Cert
		ok     bool
	}{
		{"no certificate", nil, false},
		{"another CA's", other.issue("gw", x509.ExtKeyUsageClientAuth), false},
		{"the CA's", p.issue("gw", x509.ExtKeyUsageClientAuth), true},
	} {
		cfg := &tls.Config{RootCAs: p.ca.Pool(), ServerName: "localhost"}
		if tc.client != nil {
			cfg.Certificates = []tls.Certificate{tc.client.TLS()}
		}
		_, _, err := dial(t, s.ln.Addr().String(), cfg)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want accepted=%v", tc.name, err, tc.ok)
		}
	}
}

func TestNewRefusesFilesThatDoNotLoad(t *testing.T) {
	p := newPKI(t, "ca")
	cert, key := install(t, p.dir, "server", p.issue("cp", x509.ExtKeyUsageServerAuth))
	_, otherKey := install(t, p.dir, "other", p.issue("other", x509.ExtKeyUsageServerAuth))
	garbage := filepath.Join(p.dir, "garbage.pem")
	replace(t, garbage, []byte("not a certificate\n"))
	for _, tc := range []struct {
		name string
		f    Files
		want string
	}{
		{"missing file", Files{CA: filepath.Join(p.dir, "absent.pem")}, "no such file"},
		{"CA without a certificate", Files{CA: garbage}, "holds no PEM certificate"},
		{"cert without key", Files{Cert: cert}, "give both files"},
		{"another key", Files{Cert: cert, Key: otherKey}, "do not load as a pair"},
	} {
		if _, err := New(tc.f, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := New(Files{Cert: cert, Key: key}, nil); err != nil {
		t.Errorf("a good pair: %v", err)
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:18000": true, "[::1]:18000": true, "localhost:18000": true, "127.3.2.1:1": true,
		"10.0.0.7:18000": false, "corput-control-plane:18000": false, "0.0.0.0:18000": false, ":18000": false, "127.0.0.1": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
