package controlplane

import (
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/testcert"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/tlsfiles"
	"github.com/corput/corput/internal/waitfor"
)

// pki is a CA that issues the control plane's and the gateways'
// certificates as files in one directory.
type pki struct {
	t      *testing.T
	dir    string
	ca     *testcert.Cert
	bundle string // the CA's file, once written
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	ca, err := testcert.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return &pki{t: t, dir: t.TempDir(), ca: ca}
}

// caFile returns the path of the CA's certificate as a bundle file,
// written the first time.
func (p *pki) caFile() string {
	p.t.Helper()
	if p.bundle == "" {
		var err error
		if p.bundle, _, err = p.ca.WriteFiles(p.dir, "ca"); err != nil {
			p.t.Fatal(err)
		}
	}
	return p.bundle
}

// issue writes a certificate for use naming sans (besides localhost and
// the loopback addresses) and returns its files.
func (p *pki) issue(base string, use x509.ExtKeyUsage, sans ...string) (certFile, keyFile string) {
	p.t.Helper()
	certFile, keyFile, err := p.ca.IssueFiles(p.dir, base, use, sans...)
	if err != nil {
		p.t.Fatal(err)
	}
	return certFile, keyFile
}

// server is the control plane's TLS files from p: mTLS when clientCA.
func (p *pki) server(clientCA bool) *tlsfiles.Files {
	cert, key := p.issue("control-plane", x509.ExtKeyUsageServerAuth)
	f := &tlsfiles.Files{Cert: cert, Key: key}
	if clientCA {
		f.CA = p.caFile()
	}
	return f
}

// client is a gateway's TLS files trusting p's CA, with a client
// certificate naming sans unless sans is nil.
func (p *pki) client(base string, sans ...string) *tlsfiles.Files {
	f := &tlsfiles.Files{CA: p.caFile()}
	if sans != nil {
		f.Cert, f.Key = p.issue(base, x509.ExtKeyUsageClientAuth, sans...)
	}
	return f
}

// waitErr waits until the client's Err says want.
func waitErr(t *testing.T, what string, errOf func() error, want string) {
	t.Helper()
	var last error
	defer func() {
		if t.Failed() {
			t.Logf("%s: the last error: %v", what, last)
		}
	}()
	waitfor.Until(t, fmt.Sprintf("%s: an error saying %q", what, want), func() bool {
		last = errOf()
		return last != nil && strings.Contains(last.Error(), want)
	})
}

// tlsFixture is a control plane over mTLS (or TLS) from one CA, serving
// one origin of three endpoints.
func tlsFixture(t *testing.T, p *pki, mtls bool) *fixture {
	f := newFixture(t, map[string][]string{"payments": endpoints(15001, 3)})
	f.opts.TLS = p.server(mtls)
	f.opts.Admin = "127.0.0.1:0"
	f.opts.Debounce = -1
	return f
}

// A gateway verifies the control plane: a CA that did not sign its
// certificate, or a name its certificate does not carry, and the
// gateway's xDS client connects to nothing, saying why; with the right CA
// and name it gets the membership. Plaintext is refused by a TLS control
// plane.
func TestXDSGatewayWithTheWrongCACannotConnect(t *testing.T) {
	p, other := newPKI(t, "corput-ca"), newPKI(t, "someone-else")
	cp := tlsFixture(t, p, false).start()

	wrongCA := runXDSWith(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: "gw-wrong-ca", TLS: other.client("gw", nil...)}, "payments")
	wrongName := runXDSWith(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: "gw-wrong-name",
		TLS: &tlsfiles.Files{CA: p.caFile(), ServerName: "impostor.example"}}, "payments")
	plain := runXDSWith(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: "gw-plain"}, "payments")
	right := runXDSWith(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: "gw-right", TLS: p.client("gw", nil...)}, "payments")

	waitErr(t, "wrong CA", wrongCA.x.Err, "certificate signed by unknown authority")
	waitErr(t, "wrong name", wrongName.x.Err, "not impostor.example")
	waitErr(t, "plaintext", plain.x.Err, "Unavailable")
	waitfor.Until(t, "the gateway with the right CA to get the membership", func() bool { return len(right.emitted()) == 1 })
	if n := len(right.emitted()[0].Endpoints); n != 3 {
		t.Fatalf("the verified gateway got %d endpoints, want 3", n)
	}
	for name, c := range map[string]*xdsClient{"wrong CA": wrongCA, "wrong name": wrongName, "plaintext": plain} {
		if e := c.emitted(); len(e) != 0 {
			t.Errorf("%s: the gateway took membership from a control plane it could not verify: %v", name, e)
		}
	}
	if n := value(cp.Metrics().TLSRefused); n < 3 {
		t.Errorf("corput_controlplane_tls_handshake_failures_total = %v, want ≥ 3 (one per refused gateway at least)", n)
	}
}

// Under mTLS, a client without a certificate — the gateways' EDS client,
// their fleet client, a relay — is refused at the handshake, counted and
// logged; the same clients with a certificate of the CA connect.
func TestXDSClientWithoutACertificateIsRefusedUnderMTLS(t *testing.T) {
	p, other := newPKI(t, "corput-ca"), newPKI(t, "someone-else")
	f := tlsFixture(t, p, true)
	cp := f.start()

	noCert := runXDSWith(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: "gw-a", TLS: p.client("gw-a", nil...)}, "payments")
	noCertFleet := runFleetXDS(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: "gw-a", TLS: p.client("gw-a", nil...)})
	// A certificate of another CA, with the right roots for the server.
	foreign := other.client("gw-b", "gw-b")
	foreign.CA = p.caFile()
	foreignCert := runXDSWith(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: "gw-b", TLS: foreign}, "payments")

	waitErr(t, "EDS without a certificate", noCert.x.Err, "certificate required")
	waitErr(t, "fleet without a certificate", noCertFleet.x.Err, "certificate required")
	// Go's client offers only a certificate of a CA the server names as
	// acceptable, so this one is not even sent.
	waitErr(t, "a certificate of another CA", foreignCert.x.Err, "certificate required")
	if len(noCert.emitted())+len(noCertFleet.emitted())+len(foreignCert.emitted()) != 0 {
		t.Fatal("a client without an accepted certificate got a response")
	}
	if n := len(cp.Fleet()); n != 0 {
		t.Fatalf("a client without a certificate took a fleet position: %v", cp.Fleet())
	}
	if n := value(cp.Metrics().TLSRefused); n < 3 {
		t.Errorf("corput_controlplane_tls_handshake_failures_total = %v, want ≥ 3", n)
	}
	if !strings.Contains(f.log.String(), "TLS handshake refused") {
		t.Errorf("the refused handshakes were not logged:\n%s", f.log)
	}

	withCert := runXDSWith(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: "gw-c", TLS: p.client("gw-c", "gw-c")}, "payments")
	withCertFleet := runFleetXDS(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: "gw-c", TLS: p.client("gw-c", "gw-c")})
	waitfor.Until(t, "the gateway with a certificate to get its membership and position", func() bool {
		return len(withCert.emitted()) == 1 && len(withCertFleet.emitted()) == 1
	})
}

// With --fleet-require-identity a gateway takes only the fleet position
// of the node id its certificate names (a DNS or a URI SAN): one whose
// certificate names another node is refused — counted, logged, its stream
// ended with PermissionDenied — while that node's position is held for it,
// and the node itself comes back to the same position.
func TestFleetPositionNeedsTheCertificatesIdentity(t *testing.T) {
	p := newPKI(t, "corput-ca")
	f := tlsFixture(t, p, true)
	f.opts.FleetIdentity = true
	cp := f.start()

	a := runFleetXDS(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: "gw-a", TLS: p.client("gw-a", "gw-a")})
	waitfor.Until(t, "gw-a at 0 of 1", func() bool { return slices.Equal(a.positions(), [][2]int{{0, 1}}) })

	// gw-b's certificate is gw-b's; it claims gw-a's position, and keeps
	// trying (its client reconnects with backoff).
	thief := runFleetXDS(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: "gw-a", TLS: p.client("gw-b", "gw-b")})
	waitErr(t, "the thief", thief.x.Err, "PermissionDenied")
	waitfor.Until(t, "the refusal to be counted", func() bool { return value(cp.Metrics().FleetRefused) >= 1 })
	if !strings.Contains(f.log.String(), "names a node id its client certificate does not") {
		t.Errorf("the refusal was not logged:\n%s", f.log)
	}

	// A URI SAN (a SPIFFE id) is an identity as well.
	const spiffe = "spiffe://corput.test/gateway/gw-c"
	c := runFleetXDS(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: spiffe, TLS: p.client("gw-c", spiffe)})
	waitfor.Until(t, "the SPIFFE-named gateway at 1 of 2", func() bool {
		e := c.positions()
		return len(e) > 0 && e[len(e)-1] == [2]int{1, 2}
	})
	if e := thief.emitted(); len(e) != 0 {
		t.Fatalf("the gateway whose certificate names gw-b was given a position: %v", e)
	}
	members := cp.Fleet()
	if len(members) != 2 || members[0].Node != "gw-a" || members[1].Node != spiffe {
		t.Fatalf("fleet %v, want gw-a at 0 and the SPIFFE-named gateway at 1", members)
	}
	if n := value(cp.Metrics().FleetConnected); n != 2 {
		t.Fatalf("corput_controlplane_fleet_connected = %v: the refused stream was counted for gw-a", n)
	}

	// gw-a goes away: its position is held for the grace, and the thief
	// cannot take it meanwhile; gw-a comes back to it.
	a.stop()
	waitConnected(t, cp, "gw-a", false)
	refused := value(cp.Metrics().FleetRefused)
	waitfor.Until(t, "another refusal while gw-a's position is held", func() bool { return value(cp.Metrics().FleetRefused) > refused })
	waitConnected(t, cp, "gw-a", false)
	back := runFleetXDS(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: "gw-a", TLS: p.client("gw-a", "gw-a")})
	waitfor.Until(t, "gw-a back at 0 of 2", func() bool { return slices.Equal(back.positions(), [][2]int{{0, 2}}) })
	waitConnected(t, cp, "gw-a", true)
	if e := thief.emitted(); len(e) != 0 {
		t.Fatalf("the gateway whose certificate names gw-b was given a position: %v", e)
	}
}

// cutter forwards TCP connections to a target, counting them, and can cut
// every one it carries: a network that drops the gateways' connections.
type cutter struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu       sync.Mutex
	accepted int
	conns    []net.Conn
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, target: target}
	c.wg.Add(1)
	go c.serve()
	t.Cleanup(func() { ln.Close(); c.cut(); c.wg.Wait() })
	return c
}

func (c *cutter) serve() {
	defer c.wg.Done()
	for {
		down, err := c.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", c.target)
		if err != nil {
			down.Close()
			continue
		}
		c.mu.Lock()
		c.accepted++
		c.conns = append(c.conns, down, up)
		c.mu.Unlock()
		c.wg.Add(2)
		go c.pipe(up, down)
		go c.pipe(down, up)
	}
}

func (c *cutter) pipe(dst, src net.Conn) {
	defer c.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// cut closes every connection carried so far.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

func (c *cutter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted
}

// A certificate rotation on both sides — a new CA, the control plane's
// certificate and client CA, the gateway's certificate and roots, nothing
// trusting the old CA any more — keeps the streams up: a membership
// change made after it reaches the gateway on the same connection. When
// the network then cuts the connections, each client reconnects once,
// with the new certificates on both sides, and no membership or fleet
// position is lost or moved.
func TestCertificateRotationOnBothSidesKeepsTheStream(t *testing.T) {
	old, next := newPKI(t, "ca-2025"), newPKI(t, "ca-2026")
	f := tlsFixture(t, old, true)
	f.opts.FleetIdentity = true
	serverFiles := *f.opts.TLS
	cp := f.start()
	link := newCutter(t, cp.Addr())
	gwFiles := old.client("gw-a", "gw-a")
	eds := runXDSWith(t, discovery.XDSConfig{Server: link.ln.Addr().String(), NodeID: "gw-a", TLS: gwFiles}, "payments")
	fleet := runFleetXDS(t, discovery.XDSConfig{Server: link.ln.Addr().String(), NodeID: "gw-a", TLS: gwFiles})
	waitfor.Until(t, "membership and position", func() bool { return len(eds.emitted()) == 1 && len(fleet.emitted()) == 1 })
	if got := link.count(); got != 2 {
		t.Fatalf("%d connections before the rotation, want 2 (EDS and fleet)", got)
	}

	// Rotate every file in place, as a Secret update does.
	rotate := func(path string, content []byte) {
		t.Helper()
		writeFile(t, path, string(content))
	}
	cpCert, err := next.ca.IssueFor("control-plane", x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	gwCert, err := next.ca.IssueFor("gw-a", x509.ExtKeyUsageClientAuth, "gw-a")
	if err != nil {
		t.Fatal(err)
	}
	rotate(serverFiles.Key, cpCert.KeyPEM)
	rotate(serverFiles.Cert, cpCert.CertPEM)
	rotate(serverFiles.CA, next.ca.CertPEM)
	rotate(gwFiles.Key, gwCert.KeyPEM)
	rotate(gwFiles.Cert, gwCert.CertPEM)
	rotate(gwFiles.CA, next.ca.CertPEM)

	// The streams stay: a change after the rotation comes on them.
	f.setSource(map[string][]string{"payments": endpoints(15001, 4)})
	waitfor.Until(t, "the change made after the rotation", func() bool { return len(eds.emitted()) == 2 })
	if got := link.count(); got != 2 {
		t.Fatalf("%d connections after the rotation, want the same 2: the rotation broke a stream", got)
	}

	// The network cuts them: each client reconnects once, on the new
	// certificates on both sides (no file trusts the old CA any more).
	link.cut()
	waitfor.Until(t, "both clients to reconnect", func() bool {
		return link.count() == 4 && eds.x.Err() == nil && fleet.x.Err() == nil && value(cp.Metrics().FleetConnected) == 1
	})
	waitConnected(t, cp, "gw-a", true)
	if got := link.count(); got != 4 {
		t.Fatalf("%d connections after the cut, want 4: each client reconnects once", got)
	}
	if e := eds.emitted(); len(e) != 2 || len(e[1].Endpoints) != 4 {
		t.Fatalf("memberships emitted %v: the reconnect must emit nothing (none lost, none changed)", e)
	}
	if e := fleet.positions(); !slices.Equal(e, [][2]int{{0, 1}}) {
		t.Fatalf("positions emitted %v: the reconnect must keep gw-a at 0 of 1", e)
	}
	if n := value(cp.Metrics().FleetMoves) + value(cp.Metrics().FleetRefused) + value(cp.Metrics().TLSRefused); n != 0 {
		t.Fatalf("moves + identity refusals + refused handshakes = %v, want 0", n)
	}
	if !strings.Contains(f.log.String(), "TLS files changed") {
		t.Errorf("the control plane did not log the rotation:\n%s", f.log)
	}
}

// The control plane's own relay client speaks mTLS to an upstream xDS
// server (here another corput control plane requiring client
// certificates) and republishes its clusters.
func TestRelayOverMTLS(t *testing.T) {
	p := newPKI(t, "corput-ca")
	upstream := tlsFixture(t, p, true).start()
	dir := t.TempDir()
	logger, _ := testlog.New(slog.LevelDebug)
	relay, err := Start(Options{Listen: "127.0.0.1:0", StatePath: filepath.Join(dir, "state.json"), Relay: upstream.Addr(),
		Clusters: []string{"payments"}, RelayTLS: p.client("relay", "relay"), Debounce: -1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relay.Close)
	gw := runXDS(t, relay.Addr(), "gw-0", "payments")
	waitfor.Until(t, "the relayed membership", func() bool { return len(gw.emitted()) == 1 })
	if n := len(gw.emitted()[0].Endpoints); n != 3 {
		t.Fatalf("relayed %d endpoints, want the upstream's 3", n)
	}
}

// The TLS options are checked at start: TLS without a certificate, an
// identity check without client certificates, relay TLS without a relay,
// and files that do not load are input errors naming the flags.
func TestTLSOptionsAreChecked(t *testing.T) {
	p := newPKI(t, "corput-ca")
	garbage := filepath.Join(p.dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("no"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"client CA alone", func(o *Options) { o.TLS = &tlsfiles.Files{CA: p.caFile()} }, "--tls-cert and --tls-key"},
		{"identity without mTLS", func(o *Options) { o.TLS = p.server(false); o.FleetIdentity = true }, "--fleet-require-identity"},
		{"relay TLS without a relay", func(o *Options) { o.RelayTLS = p.client("r", nil...) }, "need --relay"},
		{"a CA that does not load", func(o *Options) { o.TLS = p.server(false); o.TLS.CA = garbage }, "holds no PEM certificate"},
	} {
		f := newFixture(t, map[string][]string{"payments": endpoints(15001, 1)})
		tc.set(&f.opts)
		_, err := Start(f.opts)
		if err == nil || !IsConfigError(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want an input error saying %q", tc.name, err, tc.want)
		}
	}
}

// Plaintext off loopback is warned of at start: relaying from a server
// that is not on loopback without TLS is; serving on loopback is not.
func TestPlaintextOffLoopbackIsWarnedOf(t *testing.T) {
	logger, buf := testlog.New(slog.LevelDebug)
	cp, err := Start(Options{Listen: "127.0.0.1:0", StatePath: filepath.Join(t.TempDir(), "state.json"),
		Relay: "192.0.2.1:18000", Clusters: []string{"payments"}, Debounce: -1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	cp.Close()
	log := buf.String()
	if !strings.Contains(log, "relaying from a non-loopback server in plaintext") {
		t.Errorf("plaintext relay to 192.0.2.1 not warned of:\n%s", log)
	}
	if strings.Contains(log, "serving xDS in plaintext") {
		t.Errorf("plaintext on loopback warned of:\n%s", log)
	}
}
