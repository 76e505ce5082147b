// Package memconn is an in-memory pool.Conn and pool.Dialer driven by a
// clock: the pool's unit tests run it on a clock.Fake for exact sequences,
// and the lab's simulator runs the real pool over it on virtual time. It
// carries no bytes; it models what the pool observes of a connection: a
// stream capacity, whether the peer is still there, how long a dial and a
// keepalive probe take, and failures injected by the caller.
//
// The model of an origin (one Dialer per endpoint):
//   - up: dials succeed after DialLatency, probes are answered after
//     PingLatency;
//   - down (SetDown): the process is gone, so the kernel answers: dials are
//     refused after DialLatency, open connections report !Usable() and
//     probes fail at once;
//   - blackholed (SetBlackhole): nothing answers: dials fail after
//     DialTimeout, probes time out, and open connections still look usable
//     (TCP cannot tell), so only keepalive finds them dead.
//
// Per connection, ClosePeer and Blackhole do the same to one connection.
//
// What an origin does with an exchange can be scripted too (Script, Next):
// answer 503 at once, reset the connection without answering, or serve and
// then close the connection while it sits idle — so that a caller that
// takes it unprobed (Config.Trusting) finds it stale. The lab reads the
// script where its origin model would serve.
//
// Everything is safe for concurrent use and cheap (a few atomics per
// connection; one clock timer per delayed dial or probe, none otherwise), so
// a simulation can open ~10^6 connections. With zero latencies every
// callback runs synchronously inside Dial or Ping.
package memconn

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/pool"
)

// Errors the Dialer and connections report.
var (
	ErrRefused     = errors.New("memconn: connection refused (origin down)")
	ErrDialTimeout = errors.New("memconn: dial timed out (origin blackholed)")
	ErrInjected    = errors.New("memconn: injected dial failure")
	ErrPeerClosed  = errors.New("memconn: connection closed")
	ErrPingTimeout = errors.New("memconn: keepalive probe timed out")
)

// Config describes the origin behind a Dialer.
type Config struct {
	Protocol    string        // "h1" or "h2"; default "h1" when Streams <= 1, else "h2"
	Streams     int           // streams per connection; default 1
	DialLatency time.Duration // how long a dial takes; 0: done runs inside Dial
	PingLatency time.Duration // probe round trip; 0: answered inside Ping
	DialTimeout time.Duration // how long a dial to a blackholed origin hangs; default 1s
	// Trusting makes idle connections pool.Trusting: the pool may hand
	// them out without the Usable check (Pool.AcquireTrusting), as it does
	// a real HTTP/1.1 connection that was used a moment ago.
	Trusting bool
}

// Outcome is what the origin does with one exchange.
type Outcome uint8

// The outcomes.
const (
	Serve          Outcome = iota // the caller's model serves it
	Unavailable                   // answered 503 at once
	Reset                         // the connection is closed without an answer
	ServeThenClose                // served, then the origin closes the idle connection
)

// Dialer opens in-memory connections to one origin. It implements
// pool.Dialer.
type Dialer struct {
	clk clock.Clock
	cfg Config

	down      atomic.Bool
	blackhole atomic.Bool
	failNext  atomic.Int64
	script    []Outcome // guarded by scriptMu
	scriptMu  sync.Mutex

	dials   atomic.Int64
	created atomic.Int64
	failed  atomic.Int64
	open    atomic.Int64
	maxOpen atomic.Int64
	last    atomic.Pointer[Conn]
}

// New returns a Dialer for an origin described by cfg, timed by clk.
func New(clk clock.Clock, cfg Config) *Dialer {
	if cfg.Streams <= 0 {
		cfg.Streams = 1
	}
	if cfg.Protocol == "" {
		cfg.Protocol = "h1"
		if cfg.Streams > 1 {
			cfg.Protocol = "h2"
		}
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Second
	}
	return &Dialer{clk: clk, cfg: cfg}
}

// SetDown takes the origin down (true) or brings it back (false).
func (d *Dialer) SetDown(down bool) { d.down.Store(down) }

// SetBlackhole makes the origin stop answering (true) or answer again.
func (d *Dialer) SetBlackhole(on bool) { d.blackhole.Store(on) }

// FailNext makes the next n dials fail with ErrInjected.
func (d *Dialer) FailNext(n int) { d.failNext.Add(int64(n)) }

// Script appends outcomes for the origin's next exchanges, in order;
// exchanges past the script are Serve.
func (d *Dialer) Script(outs ...Outcome) {
	d.scriptMu.Lock()
	d.script = append(d.script, outs...)
	d.scriptMu.Unlock()
}

// Next takes the outcome of the next exchange.
func (d *Dialer) Next() Outcome {
	d.scriptMu.Lock()
	defer d.scriptMu.Unlock()
	if len(d.script) == 0 {
		return Serve
	}
	o := d.script[0]
	d.script = d.script[1:]
	return o
}

// Last is the most recently created connection (nil before the first).
func (d *Dialer) Last() *Conn { return d.last.Load() }

// Stats counts what the origin saw.
type Stats struct {
	Dials   int64 // Dial calls
	Created int64 // connections established
	Failed  int64 // dials that failed
	Open    int64 // connections not yet closed by the pool
	MaxOpen int64 // the most connections open at once
}

// Stats returns the counters.
func (d *Dialer) Stats() Stats {
	return Stats{Dials: d.dials.Load(), Created: d.created.Load(), Failed: d.failed.Load(),
		Open: d.open.Load(), MaxOpen: d.maxOpen.Load()}
}

// Dial implements pool.Dialer.
func (d *Dialer) Dial(_ string, done func(pool.Conn, error)) {
	d.dials.Add(1)
	if d.blackhole.Load() {
		d.clk.AfterFunc(d.cfg.DialTimeout, func() { d.fail(ErrDialTimeout, done) })
		return
	}
	if d.cfg.DialLatency <= 0 {
		d.connect(done) // no closure, no timer: the common simulated case
		return
	}
	d.clk.AfterFunc(d.cfg.DialLatency, func() { d.connect(done) })
}

func (d *Dialer) connect(done func(pool.Conn, error)) {
	switch {
	case d.down.Load():
		d.fail(ErrRefused, done)
	case d.takeFailure():
		d.fail(ErrInjected, done)
	default:
		c := &Conn{d: d, id: d.created.Add(1)}
		c.streams.Store(int32(d.cfg.Streams))
		n := d.open.Add(1)
		for m := d.maxOpen.Load(); n > m && !d.maxOpen.CompareAndSwap(m, n); m = d.maxOpen.Load() {
		}
		d.last.Store(c)
		done(c, nil)
	}
}

func (d *Dialer) takeFailure() bool {
	for n := d.failNext.Load(); n > 0; n = d.failNext.Load() {
		if d.failNext.CompareAndSwap(n, n-1) {
			return true
		}
	}
	return false
}

func (d *Dialer) fail(err error, done func(pool.Conn, error)) {
	d.failed.Add(1)
	done(nil, err)
}

// Conn is one in-memory connection. It implements pool.Conn.
type Conn struct {
	d          *Dialer
	id         int64
	streams    atomic.Int32
	closed     atomic.Bool
	peerClosed atomic.Bool
	deaf       atomic.Bool
	pings      atomic.Int64
}

var _ pool.Conn = (*Conn)(nil)

// ID numbers connections from 1 in the order the Dialer created them.
func (c *Conn) ID() int64 { return c.id }

// Streams implements pool.Conn.
func (c *Conn) Streams() int { return int(c.streams.Load()) }

// SetStreams changes the peer's stream limit (an HTTP/2 SETTINGS update).
func (c *Conn) SetStreams(n int) { c.streams.Store(int32(n)) }

// Usable implements pool.Conn: false once closed by either side or when the
// origin is down.
func (c *Conn) Usable() bool { return !c.closed.Load() && !c.peerGone() }

func (c *Conn) peerGone() bool { return c.peerClosed.Load() || c.d.down.Load() }

func (c *Conn) silent() bool { return c.deaf.Load() || c.d.blackhole.Load() }

// ClosePeer makes the peer close this connection (a FIN or GOAWAY).
func (c *Conn) ClosePeer() { c.peerClosed.Store(true) }

// PeerGone reports whether the peer closed the connection or its origin
// is down: an exchange on it fails at once.
func (c *Conn) PeerGone() bool { return c.peerGone() }

// Trusted implements pool.Trusting when the Dialer's Config says
// Trusting.
func (c *Conn) Trusted() bool { return c.d.cfg.Trusting }

// Blackhole makes the peer of this connection stop answering.
func (c *Conn) Blackhole() { c.deaf.Store(true) }

// Ping implements pool.Conn: answered after PingLatency when the peer is
// there, failed at once when it is gone, timed out when it is silent or
// slower than timeout. The answer is decided when the probe is sent.
func (c *Conn) Ping(timeout time.Duration, done func(error)) {
	c.pings.Add(1)
	switch {
	case c.closed.Load() || c.peerGone():
		done(ErrPeerClosed)
	case c.silent() || c.d.cfg.PingLatency > timeout:
		c.d.clk.AfterFunc(timeout, func() { done(ErrPingTimeout) })
	case c.d.cfg.PingLatency <= 0:
		done(nil)
	default:
		c.d.clk.AfterFunc(c.d.cfg.PingLatency, func() { done(nil) })
	}
}

// Pings is how many probes the connection received.
func (c *Conn) Pings() int { return int(c.pings.Load()) }

// Protocol implements pool.Conn.
func (c *Conn) Protocol() string { return c.d.cfg.Protocol }

// Close implements pool.Conn.
func (c *Conn) Close() error {
	if !c.closed.Swap(true) {
		c.d.open.Add(-1)
	}
	return nil
}

// Closed reports whether the pool closed the connection.
func (c *Conn) Closed() bool { return c.closed.Load() }
