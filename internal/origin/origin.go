// Package origin is corput's test origin: a real HTTP server on a real
// socket that plays a backend of the seed's workload model (MC-WM-01) for
// tests, the lab's live mode and the peer benchmarks. It owns
//
//   - the latency classes: a request names its class by the last segment of
//     its path (/light, /api/heavy); any other path is the raw class, a tiny
//     immediate 200 for throughput tests. GET /origin/stats is the ground
//     truth as JSON;
//   - finite capacity: Workers requests are served at once, later ones wait
//     for a worker (so a slow origin queues, as a thread pool does);
//   - sickness: a slowdown factor (a degraded origin is 5×), a cold start
//     whose factor follows workload.Warmup (the same curve the simulator
//     uses), and seeded 5xx injection;
//   - ground-truth counters: TCP connections accepted and open, requests by
//     class and status, current and peak concurrency and queue, and a
//     per-second history of requests, peak concurrency and connections
//     accepted and closed;
//   - many endpoints in one process: Listeners addresses on consecutive
//     ports, served alike (one worker bound, one set of classes), with
//     connections and requests counted per listener, so one process can
//     stand in for a hundred identical endpoints.
//
// Invariants: at most Workers class requests are in service at once; a
// service time is the class latency × Slowdown × Warmup.At(time since
// Start), slept on the wall clock (it is what a client measures on the
// socket), while the warm-up and the per-second history read the injected
// Clock; an injected 5xx is decided by a seeded draw and still costs the
// service time, so a failing origin never looks fast to a latency-aware
// balancer. The request path allocates nothing the server can avoid and
// never logs.
package origin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/workload"
)

// StatsPath serves the ground-truth counters as JSON.
const StatsPath = "/origin/stats"

// IDHeader carries Options.ID on every response, so a client behind a
// gateway can count which origin served it.
const IDHeader = "X-Corput-Origin"

// Proto is the wire protocol an origin speaks.
type Proto string

const (
	// H1 is HTTP/1.1 over cleartext TCP.
	H1 Proto = "h1"
	// H2C is HTTP/1.1 and prior-knowledge HTTP/2 over cleartext TCP on
	// the same port.
	H2C Proto = "h2c"
	// TLS is HTTPS offering h2 and http/1.1 by ALPN.
	TLS Proto = "tls"
)

// Options configure an origin. The zero value is a raw HTTP/1.1 origin on
// a free loopback port with unlimited workers.
type Options struct {
	Listen string // address; default 127.0.0.1:0
	// Listeners is how many addresses the origin listens on: Listen's
	// port and the Listeners−1 ports after it (with port 0 and more than
	// one listener, a run of that many consecutive free ports in
	// 10000–29999). 0 means 1. Every listener serves the same origin;
	// Stats.Listeners counts each.
	Listeners int
	Proto     Proto // default H1
	// Profile names the preset the options came from; reported in stats.
	Profile string
	// ID is sent in IDHeader on every response when not empty.
	ID string
	// Workers bounds the class requests in service at once; 0 is
	// unlimited. Raw requests never wait for a worker.
	Workers int
	// Classes are the latency classes by name; Percent is ignored here.
	Classes []workload.Class
	// Slowdown multiplies every service time (5 for the seed's degraded
	// endpoint); 0 means 1.
	Slowdown float64
	// Warmup is the cold-start curve, timed from Start on Clock.
	Warmup workload.Warmup
	// ErrorRate is the probability in [0, 1] that a request is answered
	// 500 (1 = always), drawn from a source seeded with Seed.
	ErrorRate float64
	Seed      uint64
	// BodyBytes is the response body size; 0 sends "ok\n".
	BodyBytes int
	// IdleTimeout closes keep-alive connections idle this long; 0 never.
	IdleTimeout time.Duration
	// HeaderTimeout bounds the wait for a request's head, the first one's
	// from the accept (net/http's ReadHeaderTimeout): a connection opened
	// ahead of need and never used is closed when it runs out, as most
	// servers do. 0 means 10 s; negative, none.
	HeaderTimeout time.Duration
	// CertFile and KeyFile are the TLS certificate; when empty a
	// self-signed one for 127.0.0.1, ::1 and localhost is generated.
	CertFile, KeyFile string
	// ClientCAFile, with Proto TLS, requires every client to present a
	// certificate this PEM bundle signed (mTLS).
	ClientCAFile string
	// MinTLS is the lowest TLS version served (tls.VersionTLS13 for TLS
	// 1.3 only); 0 is Go's default.
	MinTLS uint16
	// History is how many seconds of per-second counters are kept;
	// default 3600.
	History int
	// Clock times the warm-up and the per-second history; default wall.
	Clock clock.Clock
	// ErrorLog receives the HTTP server's own errors (bad handshakes and
	// the like); default discarded.
	ErrorLog io.Writer
}

// Server is a running origin.
type Server struct {
	opts    Options
	clock   clock.Clock
	start   time.Time
	rng     *rng.Source
	classes []class
	raw     class
	sem     chan struct{} // worker tokens; nil when unlimited
	body    []byte
	// header values, built once and shared by every response
	contentLength []string
	idHdr         []string
	ca            *x509.CertPool
	certPEM       []byte

	counters
	hist history
	hs   handshakes // TLS handshakes (Proto TLS)

	http    *http.Server
	lns     []net.Listener // one per listener, in port order
	lcs     []*listenerCounters
	served  chan struct{} // closed when every Serve returned
	closing chan struct{} // closed by Close: waits end at once

	closeOnce sync.Once
	closeErr  error

	watchMu sync.Mutex    // guards following
	changed chan struct{} // closed and replaced when a connection closes
}

// Start listens and serves until Close.
func Start(opts Options) (*Server, error) {
	s, err := newServer(opts)
	if err != nil {
		return nil, err
	}
	lns, err := listen(s.opts.Listen, s.opts.Listeners)
	if err != nil {
		return nil, err
	}
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	errLog := opts.ErrorLog
	if errLog == nil {
		errLog = io.Discard
	}
	headerTimeout := opts.HeaderTimeout
	switch {
	case headerTimeout == 0:
		headerTimeout = 10 * time.Second
	case headerTimeout < 0:
		headerTimeout = 0
	}
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       opts.IdleTimeout,
		ErrorLog:          log.New(errLog, "origin: ", 0),
		Protocols:         new(http.Protocols),
		ConnContext:       connContext,
	}
	s.http.Protocols.SetHTTP1(true)
	switch s.opts.Proto {
	case H2C:
		s.http.Protocols.SetUnencryptedHTTP2(true)
	case TLS:
		s.http.Protocols.SetHTTP2(true)
		cert, pem, err := loadOrGenerateCert(opts.CertFile, opts.KeyFile)
		if err != nil {
			closeAll()
			return nil, err
		}
		s.certPEM = pem
		s.ca = x509.NewCertPool()
		s.ca.AppendCertsFromPEM(pem)
		if s.http.TLSConfig, err = serverTLS(cert, opts.MinTLS, opts.ClientCAFile, &s.hs); err != nil {
			closeAll()
			return nil, err
		}
	}
	var wg sync.WaitGroup
	for _, ln := range lns {
		lc := &listenerCounters{addr: ln.Addr().String()}
		s.lcs = append(s.lcs, lc)
		var l net.Listener = &countingListener{Listener: ln, s: s, lc: lc}
		if s.opts.Proto == TLS {
			l = tls.NewListener(l, s.http.TLSConfig)
		}
		s.lns = append(s.lns, l)
	}
	for _, l := range s.lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.http.Serve(l) // returns ErrServerClosed after Close
		}()
	}
	go func() {
		wg.Wait()
		close(s.served)
	}()
	return s, nil
}

// maxListeners bounds Options.Listeners.
const maxListeners = 10000

// listen opens n listeners on addr's port and the n−1 after it. With port
// 0 and n above 1 it looks for n consecutive free ports from random bases
// in 10000–29999, below Linux's default ephemeral range (32768–60999):
// there a busy machine's outgoing connections leave ports in TIME_WAIT
// that a listener cannot bind, so a run of 100 is seldom free.
func listen(addr string, n int) ([]net.Listener, error) {
	n = max(n, 1)
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("origin: listen %s: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("origin: listen %s: port %q: %w", addr, portText, err)
	}
	if port != 0 || n == 1 {
		return listenRun(host, port, n)
	}
	const lo, hi = 10000, 30000
	if n > hi-lo {
		return nil, fmt.Errorf("origin: listen %s: %d consecutive ports: more than %d–%d holds", addr, n, lo, hi-1)
	}
	var last error
	for range 50 {
		lns, err := listenRun(host, lo+rand.IntN(hi-lo-n+1), n)
		if err == nil {
			return lns, nil
		}
		last = err
	}
	return nil, fmt.Errorf("origin: no %d consecutive free ports on %s: %w", n, host, last)
}

// listenRun listens on host's ports port … port+n−1, all or none.
func listenRun(host string, port, n int) ([]net.Listener, error) {
	if port+n-1 > 65535 {
		return nil, fmt.Errorf("origin: listen %s: ports %d–%d: past 65535", host, port, port+n-1)
	}
	lns := make([]net.Listener, 0, n)
	for i := range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port+i)))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("origin: listen: %w", err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// newServer checks opts and builds everything but the listener.
func newServer(opts Options) (*Server, error) {
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if opts.Proto == "" {
		opts.Proto = H1
	}
	if opts.Slowdown == 0 {
		opts.Slowdown = 1
	}
	if opts.History <= 0 {
		opts.History = 3600
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		opts:    opts,
		clock:   opts.Clock,
		start:   opts.Clock.Now(),
		rng:     rng.New(opts.Seed),
		raw:     class{name: RawClass},
		served:  make(chan struct{}),
		closing: make(chan struct{}),
		changed: make(chan struct{}),
	}
	s.hist.init(opts.History)
	s.classes = make([]class, len(opts.Classes))
	for i, c := range opts.Classes {
		s.classes[i].name, s.classes[i].latency = c.Name, c.Latency
	}
	if opts.Workers > 0 {
		s.sem = make(chan struct{}, opts.Workers)
	}
	s.body = []byte("ok\n")
	if opts.BodyBytes > 0 {
		s.body = make([]byte, opts.BodyBytes)
		for i := range s.body {
			s.body[i] = 'x'
		}
	}
	s.contentLength = []string{strconv.Itoa(len(s.body))}
	if opts.ID != "" {
		s.idHdr = []string{opts.ID}
	}
	return s, nil
}

func (o *Options) validate() error {
	switch o.Proto {
	case H1, H2C, TLS:
	default:
		return fmt.Errorf("origin: proto %q: want h1, h2c or tls", o.Proto)
	}
	if (o.ClientCAFile != "" || o.MinTLS != 0) && o.Proto != TLS {
		return fmt.Errorf("origin: a client CA and a minimum TLS version need proto tls, not %s", o.Proto)
	}
	if o.Listeners < 0 || o.Listeners > maxListeners {
		return fmt.Errorf("origin: listeners %d: want 1–%d (0 is 1)", o.Listeners, maxListeners)
	}
	if o.Workers < 0 {
		return fmt.Errorf("origin: workers %d: want ≥ 0 (0 is unlimited)", o.Workers)
	}
	if o.Slowdown < 1 {
		return fmt.Errorf("origin: slowdown %v: want ≥ 1 (5 for a degraded endpoint)", o.Slowdown)
	}
	if o.ErrorRate < 0 || o.ErrorRate > 1 {
		return fmt.Errorf("origin: error rate %v: want a probability in [0, 1] (1 = always 500)", o.ErrorRate)
	}
	if o.BodyBytes < 0 {
		return fmt.Errorf("origin: body bytes %d: want ≥ 0", o.BodyBytes)
	}
	if o.Warmup.Factor != 0 && o.Warmup.Factor < 1 {
		return fmt.Errorf("origin: warm-up factor %v: want ≥ 1", o.Warmup.Factor)
	}
	seen := map[string]bool{RawClass: true, "stats": true}
	for i, c := range o.Classes {
		if c.Name == "" || seen[c.Name] {
			return fmt.Errorf("origin: classes[%d]: name %q is empty, reserved or repeated", i, c.Name)
		}
		if c.Latency <= 0 {
			return fmt.Errorf("origin: class %s: latency must be positive, e.g. 15ms", c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

// Addr is the address the origin listens on, e.g. 127.0.0.1:40123: the
// first one when it has several listeners.
func (s *Server) Addr() string { return s.lns[0].Addr().String() }

// Addrs are the addresses of every listener, in port order.
func (s *Server) Addrs() []string {
	out := make([]string, len(s.lns))
	for i, ln := range s.lns {
		out[i] = ln.Addr().String()
	}
	return out
}

// URL is the origin's base URL: http:// or https:// and Addr.
func (s *Server) URL() string {
	if s.opts.Proto == TLS {
		return "https://" + s.Addr()
	}
	return "http://" + s.Addr()
}

// Options returns the options the origin runs with, defaults filled in.
func (s *Server) Options() Options { return s.opts }

// CertPool trusts the origin's certificate (nil unless Proto is TLS).
func (s *Server) CertPool() *x509.CertPool { return s.ca }

// CertPEM is the origin's certificate in PEM (nil unless Proto is TLS), for
// a client that reads a CA file.
func (s *Server) CertPEM() []byte { return s.certPEM }

// Close stops the origin: waiting requests are abandoned, requests in
// service end early, every connection is closed, and Close returns once
// the server's goroutines are gone. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.http.Shutdown(ctx); err != nil {
			s.closeErr = s.http.Close()
		}
		<-s.served
	})
	return s.closeErr
}

// WaitOpen blocks until exactly n connections are open or ctx ends. It lets
// a test or the lab wait for the origin to see a client's close without
// sleeping.
func (s *Server) WaitOpen(ctx context.Context, n int64) error {
	for {
		s.watchMu.Lock()
		ch := s.changed
		s.watchMu.Unlock()
		if s.open.Load() == n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("origin %s: waiting for %d open connections, have %d: %w", s.Addr(), n, s.open.Load(), ctx.Err())
		}
	}
}

// notify wakes WaitOpen callers.
func (s *Server) notify() {
	s.watchMu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.watchMu.Unlock()
}
