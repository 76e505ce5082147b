package edgetls

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/testcert"
)

// The tests serve real TLS on 127.0.0.1 with net/http's server over the
// policy's listener configuration, and connect with crypto/tls clients.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pki is a test CA and the directory its files go to.
type pki struct {
	ca     *testcert.Cert
	caFile string
	dir    string
}

func newPKI(t testing.TB, name string) *pki {
	t.Helper()
	ca, err := testcert.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{ca: ca, dir: t.TempDir()}
	p.caFile = p.write(t, name+"-ca.pem", ca.CertPEM)
	return p
}

func (p *pki) write(t testing.TB, name string, data []byte) string {
	t.Helper()
	file := filepath.Join(p.dir, name)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// server issues a server certificate for dns and writes it, with the CA
// after it (the chain), and its key.
func (p *pki) server(t testing.TB, name string, dns ...string) (c *testcert.Cert, certFile, keyFile string) {
	t.Helper()
	c, err := p.ca.IssueFor(name, x509.ExtKeyUsageServerAuth, dns...)
	if err != nil {
		t.Fatal(err)
	}
	certFile = p.write(t, name+".pem", append(append([]byte{}, c.CertPEM...), p.ca.CertPEM...))
	keyFile = p.write(t, name+".key", c.KeyPEM)
	return c, certFile, keyFile
}

// client issues a client certificate.
func (p *pki) client(t testing.TB, name string) tls.Certificate {
	t.Helper()
	c, err := p.ca.Issue(name, x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	return c.TLS()
}

// current holds the policy a test server serves, swapped as a reload does.
type current struct{ atomic.Pointer[Policy] }

func mustNew(t testing.TB, s *Settings, prev *Policy) *Policy {
	t.Helper()
	p, err := New(s, prev)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// serve runs an HTTPS server on 127.0.0.1 whose handshakes take cur's
// policy, answering with h; it is closed when the test ends.
func serve(t testing.TB, cur *current, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if h == nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	}
	srv := &http.Server{Handler: h, TLSConfig: Listener(cur.Load), ErrorLog: log.New(io.Discard, "", 0), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// get makes one request over a new connection with the client TLS cfg;
// it returns the response's TLS state and body.
func get(addr string, cfg *tls.Config) (*tls.ConnectionState, string, error) {
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/")
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.TLS, string(body), err
}

// handshake dials addr and ends the handshake; it also reads nothing, so
// a TLS 1.3 client-certificate refusal is not seen here (use get).
func handshake(addr string, cfg *tls.Config) (tls.ConnectionState, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	return c.ConnectionState(), nil
}

// ticketFile writes keys as a ticket key file.
func ticketFile(t testing.TB, p *pki, name string, keys ...[TicketKeySize]byte) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# session ticket keys: the first encrypts\n")
	for _, k := range keys {
		b.WriteString(base64.StdEncoding.EncodeToString(k[:]) + "\n")
	}
	return p.write(t, name, []byte(b.String()))
}

func key(b byte) (k [TicketKeySize]byte) {
	for i := range k {
		k[i] = b
	}
	return k
}
