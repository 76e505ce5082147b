package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/testcert"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noLeaks registers, first, a cleanup that runs last: after every server
// and connection the test made is closed, no goroutine may remain.
func noLeaks(t testing.TB) {
	t.Helper()
	before := goleak.IgnoreCurrent() // the test runner's own goroutines
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

// testPKI is a throwaway CA with a server certificate for 127.0.0.1 and a
// client certificate, made fresh for the test run.
type testPKI struct {
	roots      *x509.CertPool
	server     tls.Certificate
	client     tls.Certificate
	clientPool *x509.CertPool // roots that verify client certificates

	caDER        []byte // for tests that write PEM files
	clientKeyDER []byte
}

var (
	pkiOnce sync.Once
	pki     *testPKI
)

func getPKI(t testing.TB) *testPKI {
	t.Helper()
	pkiOnce.Do(func() { pki = newPKI(t) })
	if pki == nil {
		t.Fatal("test PKI could not be made")
	}
	return pki
}

func newPKI(t testing.TB) *testPKI {
	ca, err := testcert.NewCA("corput test CA")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue("corput test leaf", x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue("corput test leaf", x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(client.Key)
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{roots: ca.Pool(), server: server.TLS(), client: client.TLS(), clientPool: ca.Pool(),
		caDER: ca.Leaf.Raw, clientKeyDER: der}
}

// clientTLS trusts the test CA; withCert adds the client certificate.
func (p *testPKI) clientTLS(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.roots}
	if withCert {
		c.Certificates = []tls.Certificate{p.client}
	}
	return c
}

// origin is a loopback test server that counts the TCP connections it
// accepted, has open, and had open at most at once.
type origin struct {
	*httptest.Server
	accepted atomic.Int64
	closed   atomic.Int64
	mu       sync.Mutex
	open     int
	peak     int
}

func (o *origin) peakOpen() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.peak
}

type originOpts struct {
	tls        bool
	h2         bool // offer h2 by ALPN (TLS) or accept h2c (cleartext)
	maxStreams uint32
	clientCert bool // require and verify a client certificate
	// acceptDelay holds each accepted connection this long before the
	// server sees it (one at a time, as its accept loop does): a slow
	// handshake, from the client's side.
	acceptDelay time.Duration
}

// slowListener delays each Accept.
type slowListener struct {
	net.Listener
	delay time.Duration
}

func (l slowListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		time.Sleep(l.delay)
	}
	return c, err
}

func startOrigin(t testing.TB, o originOpts, h http.Handler) *origin {
	t.Helper()
	srv := &origin{Server: httptest.NewUnstartedServer(h)}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		switch s {
		case http.StateNew:
			srv.accepted.Add(1)
			srv.open++
			srv.peak = max(srv.peak, srv.open)
		case http.StateClosed, http.StateHijacked:
			srv.closed.Add(1)
			srv.open--
		}
	}
	if o.acceptDelay > 0 {
		srv.Listener = slowListener{srv.Listener, o.acceptDelay}
	}
	if o.maxStreams > 0 {
		srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: int(o.maxStreams)}
	}
	if o.tls {
		p := getPKI(t)
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{p.server}}
		if o.clientCert {
			srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
			srv.TLS.ClientCAs = p.clientPool
		}
		srv.EnableHTTP2 = o.h2
		srv.StartTLS()
	} else {
		if o.h2 {
			var protos http.Protocols
			protos.SetHTTP1(true)
			protos.SetUnencryptedHTTP2(true)
			srv.Config.Protocols = &protos
		}
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

func (o *origin) addr() string { return o.Listener.Addr().String() }

func (o *origin) url(path string) string {
	scheme := "http"
	if o.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + o.addr() + path
}

// mustDialer makes a Dialer; without a ConnectTimeout it allows 10 s, so a
// loaded machine does not fail a handshake.
func mustDialer(t testing.TB, o Options) *Dialer {
	t.Helper()
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	d, err := NewDialer(o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustDial(t testing.TB, d *Dialer, addr string) Conn {
	t.Helper()
	c, err := d.DialContext(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func get(t testing.TB, c Conn, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := roundTrip(c, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
