package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corput/corput/internal/h2"
	"github.com/corput/corput/internal/pool"
)

// Protocol is an origin's protocol setting (config key origins[].protocol).
type Protocol string

const (
	// Auto offers ALPN "h2","http/1.1" over TLS and uses what the origin
	// picks; without TLS it is plain HTTP/1.1.
	Auto Protocol = "auto"
	// H1 is HTTP/1.1, over TLS when TLS is configured.
	H1 Protocol = "h1"
	// H2 is HTTP/2 over TLS; an origin that does not select h2 by ALPN is
	// a dial error.
	H2 Protocol = "h2"
	// H2C is cleartext HTTP/2 with prior knowledge.
	H2C Protocol = "h2c"
)

// DefaultConnectTimeout bounds TCP connect + TLS handshake (+ the HTTP/2
// SETTINGS exchange) when Options.ConnectTimeout is zero.
const DefaultConnectTimeout = time.Second

// Options configure a Dialer.
type Options struct {
	// Protocol is Auto when empty.
	Protocol Protocol
	// TLS enables TLS when non-nil (see TLSFiles.Config). NextProtos is
	// set by the Dialer from Protocol; ServerName, when empty, is the
	// host of the address dialled.
	TLS *tls.Config
	// ConnectTimeout bounds connect, handshake and (HTTP/2) the first
	// SETTINGS; DefaultConnectTimeout when zero.
	ConnectTimeout time.Duration
	// KeepAlive is the TCP keepalive of every connection; the zero value
	// means Go's default (15 s idle, 15 s interval, 9 probes). It is what
	// detects a blackholed HTTP/1.1 origin: a failed keepalive makes the
	// next idle probe fail.
	KeepAlive net.KeepAliveConfig
	// H2WriteTimeout fails an HTTP/2 connection whose writes make no
	// progress for this long; 0 = none.
	H2WriteTimeout time.Duration
	// MaxResponseHeaderBytes bounds a response head: an HTTP/1.1 one
	// larger fails its exchange with ErrHeadTooLarge (and the connection
	// closes); an HTTP/2 origin is told the bound
	// (SETTINGS_MAX_HEADER_LIST_SIZE) and a larger header list fails the
	// stream with ErrHeadTooLarge. 0 is DefaultMaxResponseHeaderBytes.
	MaxResponseHeaderBytes int
}

// DefaultMaxResponseHeaderBytes is Options.MaxResponseHeaderBytes' default.
const DefaultMaxResponseHeaderBytes = 64 << 10

// Dialer opens upstream connections. It implements pool.Dialer.
type Dialer struct {
	proto   Protocol
	tls     *tls.Config // nil for cleartext; NextProtos set
	timeout time.Duration
	maxHead int // Options.MaxResponseHeaderBytes
	net     net.Dialer
	h2      h2.Options
	// sessions holds each endpoint's TLS session cache, by address
	// (sessionCache).
	sessions sync.Map
}

var _ pool.Dialer = (*Dialer)(nil)

// NewDialer checks o and returns a Dialer. A protocol that contradicts the
// TLS setting (h2 without TLS, h2c with TLS) is an error naming the key.
func NewDialer(o Options) (*Dialer, error) {
	if o.MaxResponseHeaderBytes <= 0 {
		o.MaxResponseHeaderBytes = DefaultMaxResponseHeaderBytes
	}
	d := &Dialer{proto: o.Protocol, timeout: o.ConnectTimeout, maxHead: o.MaxResponseHeaderBytes}
	if d.proto == "" {
		d.proto = Auto
	}
	if d.timeout <= 0 {
		d.timeout = DefaultConnectTimeout
	}
	var alpn []string
	switch d.proto {
	case Auto:
		alpn = []string{"h2", "http/1.1"}
	case H1:
		alpn = []string{"http/1.1"}
	case H2:
		if o.TLS == nil {
			return nil, errors.New("protocol h2 needs tls: set origins[].tls, or use protocol h2c for cleartext HTTP/2")
		}
		alpn = []string{"h2"}
	case H2C:
		if o.TLS != nil {
			return nil, errors.New("protocol h2c is cleartext but origins[].tls is set: use protocol h2 (or auto) for HTTP/2 over TLS")
		}
	default:
		return nil, fmt.Errorf("protocol %q: want auto, h1, h2 or h2c", o.Protocol)
	}
	if o.TLS != nil {
		d.tls = o.TLS.Clone()
		d.tls.NextProtos = alpn
	}
	d.net = net.Dialer{KeepAliveConfig: o.KeepAlive}
	d.h2 = h2.Options{
		WriteTimeout:      o.H2WriteTimeout,
		MaxHeaderListSize: uint32(o.MaxResponseHeaderBytes),
	}
	return d, nil
}

// FastDialer is a pool.Dialer that can say whether every connection it
// opens is a Raw one (HTTP/1.1) or a Mux one (HTTP/2): those the fast path
// serves. A dialer that wraps another (to watch its dials) passes the
// question on.
type FastDialer interface {
	DialsFast() bool
}

// DialsFast implements FastDialer: every connection a Dialer opens is an
// *h1Conn (Raw) or an *h2Conn (Mux).
func (d *Dialer) DialsFast() bool { return true }

// DialsFast reports whether d says every connection it opens is Raw or
// Mux. A dialer that does not tell gets false: the path that serves any
// connection (RoundTrip) is taken.
func DialsFast(d pool.Dialer) bool {
	r, ok := d.(FastDialer)
	return ok && r.DialsFast()
}

// Dial implements pool.Dialer: it dials on a goroutine of its own, bounded
// by the connect timeout and never cancelled by a request, and calls done
// once with the connection or the *DialError.
func (d *Dialer) Dial(addr string, done func(pool.Conn, error)) {
	go func() {
		c, err := d.DialContext(context.Background(), addr)
		if err != nil {
			done(nil, err)
			return
		}
		done(c, nil)
	}()
}

// DialContext opens one connection to addr ("host:port"). Errors are
// *DialError.
func (d *Dialer) DialContext(ctx context.Context, addr string) (Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	nc, err := d.net.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, dialError(addr, err)
	}
	sock := newSockConn(nc)
	if d.tls == nil {
		if d.proto == H2C {
			c, err := newH2Conn(ctx, d.h2, addr, sock)
			if err != nil {
				return nil, dialError(addr, err)
			}
			return c, nil
		}
		return newH1Conn(addr, sock, nil, d.maxHead), nil
	}
	tc := tls.Client(sock, d.tlsConfigFor(addr))
	if err := tc.HandshakeContext(ctx); err != nil {
		sock.Close()
		if d.proto == H2 && strings.Contains(err.Error(), "no application protocol") {
			return nil, d.noH2(addr, err)
		}
		return nil, &DialError{Addr: addr, Kind: tlsOrTimeout(err), Err: fmt.Errorf("TLS handshake: %w", err)}
	}
	switch got := tc.ConnectionState().NegotiatedProtocol; {
	case got == "h2":
		c, err := newH2Conn(ctx, d.h2, addr, tc)
		if err != nil {
			return nil, dialError(addr, err)
		}
		return c, nil
	case d.proto == H2:
		tc.Close()
		return nil, d.noH2(addr, fmt.Errorf("it selected %q", got))
	}
	return newH1Conn(addr, sock, tc, d.maxHead), nil
}

func (d *Dialer) noH2(addr string, why error) *DialError {
	return &DialError{Addr: addr, Kind: KindProtocol,
		Err: fmt.Errorf("origin does not speak h2 over TLS (ALPN: %w): set protocol auto or h1 for this origin", why)}
}

// tlsConfigFor returns the TLS config for one dial: the server name
// defaults to the host being dialled, and the session cache is the
// endpoint's own (sessionCache), unless the config brings one.
func (d *Dialer) tlsConfigFor(addr string) *tls.Config {
	c := d.tls.Clone()
	if c.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		c.ServerName = host
	}
	if c.ClientSessionCache == nil {
		c.ClientSessionCache = d.sessionCache(addr)
	}
	return c
}

// sessionsPerEndpoint is the capacity of each endpoint's session cache:
// crypto/tls keeps one session per server name, and an endpoint has one.
const sessionsPerEndpoint = 2

// sessionCache is endpoint addr's TLS session cache. A new connection to
// an endpoint resumes the session of an earlier one (TLS 1.3 tickets, TLS
// 1.2 tickets), so a redial after a recycle or a lost connection costs an
// abbreviated handshake, without the certificate signatures and their
// verification, when the origin accepts it. The cache is per endpoint,
// not per server name: crypto/tls keys sessions by server name, which
// endpoints share (every IP endpoint of a host, or tls.server_name), and
// one endpoint's ticket is worth nothing to another that has other
// ticket keys. Endpoints that left keep their small cache until the
// origin's dialer is replaced (a reload that changes the dialer).
func (d *Dialer) sessionCache(addr string) tls.ClientSessionCache {
	if c, ok := d.sessions.Load(addr); ok {
		return c.(tls.ClientSessionCache)
	}
	c, _ := d.sessions.LoadOrStore(addr, tls.NewLRUClientSessionCache(sessionsPerEndpoint))
	return c.(tls.ClientSessionCache)
}

// DialErrorKind classifies a dial failure.
type DialErrorKind string

// Dial failure kinds.
const (
	KindRefused  DialErrorKind = "connection refused"
	KindTimeout  DialErrorKind = "timeout"
	KindTLS      DialErrorKind = "tls"
	KindProtocol DialErrorKind = "protocol"
	KindNetwork  DialErrorKind = "network"
)

// DialError is a failure to open an upstream connection.
type DialError struct {
	Addr string
	Kind DialErrorKind
	Err  error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("upstream %s: dial: %s: %v", e.Addr, e.Kind, e.Err)
}

func (e *DialError) Unwrap() error { return e.Err }

// Timeout reports whether the dial ran out of time (net.Error).
func (e *DialError) Timeout() bool { return e.Kind == KindTimeout }

func dialError(addr string, err error) *DialError {
	kind := KindNetwork
	var (
		op     *net.OpError // crypto/tls reports alerts as Op "remote error" / "local error"
		verify *tls.CertificateVerificationError
		header tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		kind = KindRefused
	case isTimeout(err):
		kind = KindTimeout
	case errors.As(err, &op) && (op.Op == "remote error" || op.Op == "local error"),
		errors.As(err, &verify), errors.As(err, &header):
		kind = KindTLS
	}
	return &DialError{Addr: addr, Kind: kind, Err: err}
}

func tlsOrTimeout(err error) DialErrorKind {
	if isTimeout(err) {
		return KindTimeout
	}
	return KindTLS
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}

// TLSFiles is an origin's tls: block (config keys origins[].tls.*).
type TLSFiles struct {
	CA                 string // PEM bundle of roots; empty = system roots
	Cert, Key          string // client certificate and key (mTLS); both or neither
	ServerName         string // SNI and verified name; empty = the dialled host
	InsecureSkipVerify bool   // skip verification (tests only)
}

// Config loads the files into a *tls.Config. Errors name the key and the
// file.
func (f TLSFiles) Config() (*tls.Config, error) {
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         f.ServerName,
		InsecureSkipVerify: f.InsecureSkipVerify,
	}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("tls.ca: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca: %s holds no PEM certificate", f.CA)
		}
		c.RootCAs = roots
	}
	switch {
	case f.Cert != "" && f.Key != "":
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("tls.cert/tls.key: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	case f.Cert != "" || f.Key != "":
		return nil, errors.New("tls.cert and tls.key go together: set both for mTLS, or neither")
	}
	return c, nil
}
