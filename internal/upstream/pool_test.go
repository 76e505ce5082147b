package upstream

// The "Must show" 1–7: the real pool (internal/pool) over this
// package's Dialer, against real loopback origins. Pool timers run on a
// clock.Fake where a test needs time to pass (idle, lifetime, keepalive,
// acquire timeout); sockets, TLS and HTTP are real.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/waitfor"
)

// gate holds requests at the origin until opened; it counts arrivals.
type gate struct {
	ch      chan struct{}
	once    sync.Once
	arrived atomic.Int64
}

func newGate(t testing.TB) *gate {
	g := &gate{ch: make(chan struct{})}
	t.Cleanup(g.open) // before the origin's Close, which waits for handlers
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// handler answers "/held" after the gate opens and anything else at once.
func (g *gate) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/held" {
			g.arrived.Add(1)
			<-g.ch
		}
		io.WriteString(w, r.URL.Path)
	})
}

func poolConfig(mut func(*pool.Config)) pool.Config {
	c := pool.DefaultConfig()
	c.Prewarm = 0
	c.Keepalive = 0
	c.IdleTimeout = 0
	c.MaxLifetime = 0
	c.AcquireTimeout = 10 * time.Second // a loaded CI machine must not turn a wait into a failure
	if mut != nil {
		mut(&c)
	}
	return c
}

func newPool(t testing.TB, addr string, cfg pool.Config, d pool.Dialer, clk clock.Clock) (*pool.Pool, *pool.Tally) {
	t.Helper()
	var tally pool.Tally
	p, err := pool.New(addr, 0, cfg, d, clk, rng.New(7), &tally)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, &tally
}

// fetch is one proxied exchange the way the gateway does it: acquire,
// round trip, read the body to EOF, release.
func fetch(p *pool.Pool, url string) (body string, lease pool.Lease, err error) {
	lease, err = p.Acquire(context.Background())
	if err != nil {
		return "", lease, err
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := roundTrip(lease.Conn().(Conn), req)
	if err != nil {
		lease.Discard()
		return "", lease, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	lease.Release()
	return string(b), lease, err
}

func mustFetch(t testing.TB, p *pool.Pool, url string) pool.Lease {
	t.Helper()
	body, lease, err := fetch(p, url)
	if err != nil {
		t.Fatal(err)
	}
	if want := url[len(url)-len(body):]; body == "" || body != want {
		t.Fatalf("GET %s: body %q", url, body)
	}
	return lease
}

// 1. Reuse: two sequential requests, one TCP connection.
func TestPoolReuseOneConnection(t *testing.T) {
	noLeaks(t)
	for _, tc := range []struct {
		name string
		o    originOpts
		d    Options
	}{
		{"h1", originOpts{}, Options{}},
		{"h2", originOpts{tls: true, h2: true}, Options{TLS: getPKI(t).clientTLS(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := startOrigin(t, tc.o, newGate(t).handler())
			p, tally := newPool(t, o.addr(), poolConfig(nil), mustDialer(t, tc.d), nil)
			mustFetch(t, p, o.url("/a"))
			mustFetch(t, p, o.url("/b"))
			if n := o.accepted.Load(); n != 1 {
				t.Fatalf("origin accepted %d connections for two sequential requests, want 1", n)
			}
			if tally.Created() != 1 {
				t.Fatalf("pool created %d connections, want 1", tally.Created())
			}
		})
	}
}

// 2. The h1 bound: 64 concurrent slow requests, max_connections 8.
func TestPoolH1BoundAndOverCapPolicies(t *testing.T) {
	noLeaks(t)
	const maxConns, pending, clients = 8, 50, 64
	d := mustDialer(t, Options{})

	// warm opens the pool's 8 connections and holds a request on each.
	warm := func(t *testing.T, over pool.OverCap, clk clock.Clock) (*origin, *gate, *pool.Pool, *pool.Tally) {
		g := newGate(t)
		o := startOrigin(t, originOpts{}, g.handler())
		p, tally := newPool(t, o.addr(), poolConfig(func(c *pool.Config) {
			c.MaxConnections, c.MaxPending, c.OverCap = maxConns, pending, over
			c.Prewarm = maxConns
		}), d, clk)
		waitfor.Until(t, "pool pre-warmed", p.Ready)
		return o, g, p, tally
	}
	// fill holds a request on each of the 8 connections and waits until
	// all are at the origin.
	fill := func(t *testing.T, p *pool.Pool, o *origin, g *gate) chan error {
		held := hold(p, o, maxConns)
		waitfor.Until(t, "8 in service", func() bool { return g.arrived.Load() == maxConns })
		return held
	}

	t.Run("queue", func(t *testing.T) {
		o, g, p, _ := warm(t, pool.Queue, nil)
		errs := hold(p, o, clients)
		// 8 in service, 50 queued, the rest refused at once.
		var full int
		for full < clients-maxConns-pending {
			if err := <-errs; !errors.Is(err, pool.ErrPendingFull) {
				t.Fatalf("while 8 are served and 50 wait: %v, want ErrPendingFull", err)
			}
			full++
		}
		waitfor.Until(t, "8 in service, 50 queued", func() bool {
			return g.arrived.Load() == maxConns && p.Stats().Pending == pending
		})
		g.open()
		for range maxConns + pending {
			if err := <-errs; err != nil {
				t.Fatalf("queued request: %v", err)
			}
		}
		if o.peakOpen() > maxConns || o.accepted.Load() != maxConns {
			t.Fatalf("origin saw %d connections (peak %d open), want %d", o.accepted.Load(), o.peakOpen(), maxConns)
		}
	})

	t.Run("queue times out", func(t *testing.T) {
		clk := clock.NewFake(time.Unix(0, 0))
		o, g, p, _ := warm(t, pool.Queue, clk)
		held := fill(t, p, o, g)
		waiter := hold(p, o, 1)
		waitfor.Until(t, "one waiter queued", func() bool { return p.Stats().Pending == 1 })
		clk.Advance(p.Config().AcquireTimeout)
		if err := <-waiter; !errors.Is(err, pool.ErrAcquireTimeout) {
			t.Fatalf("waiter after acquire_timeout: %v, want ErrAcquireTimeout", err)
		}
		release(t, g, held, maxConns)
		if o.accepted.Load() != maxConns {
			t.Fatalf("origin accepted %d connections, want %d", o.accepted.Load(), maxConns)
		}
	})

	t.Run("reject", func(t *testing.T) {
		o, g, p, _ := warm(t, pool.Reject, nil)
		held := fill(t, p, o, g)
		// The gate is shut, so nothing can free up: only an immediate
		// rejection lets this return before the gate opens.
		if _, _, err := fetch(p, o.url("/now")); !errors.Is(err, pool.ErrOverCap) {
			t.Fatalf("over the cap with reject: %v, want ErrOverCap", err)
		}
		release(t, g, held, maxConns)
		if o.accepted.Load() != maxConns {
			t.Fatalf("origin accepted %d connections, want %d", o.accepted.Load(), maxConns)
		}
	})

	t.Run("temporary", func(t *testing.T) {
		o, g, p, tally := warm(t, pool.Temporary, nil)
		held := fill(t, p, o, g)
		const extra = 3
		for range extra {
			lease := mustFetch(t, p, o.url("/now"))
			if !lease.Temporary() {
				t.Fatal("over the cap with temporary: got a pooled connection")
			}
		}
		if n := o.accepted.Load(); n != maxConns+extra {
			t.Fatalf("origin accepted %d connections, want %d pooled + %d one-shot", n, maxConns, extra)
		}
		if n := tally.Closed(pool.ReasonEviction); n != extra {
			t.Fatalf("pool closed %d one-shot connections, want %d", n, extra)
		}
		waitfor.Until(t, "one-shot connections closed at the origin", func() bool { return o.closed.Load() == extra })
		release(t, g, held, maxConns)
	})
}

// 3. HTTP/2: 56 concurrent requests, 16 streams per connection → 4
// connections (the last half full: the pool's headroom of half a
// connection needs no fifth).
func TestPoolH2Multiplexes(t *testing.T) {
	noLeaks(t)
	const streams, clients = 16, 56
	g := newGate(t)
	o := startOrigin(t, originOpts{tls: true, h2: true, maxStreams: streams}, g.handler())
	p, _ := newPool(t, o.addr(), poolConfig(func(c *pool.Config) { c.Prewarm = 1 }),
		mustDialer(t, Options{TLS: getPKI(t).clientTLS(false)}), nil)
	waitfor.Until(t, "pool pre-warmed", p.Ready)
	// All 56 are at the origin at once: they are multiplexed.
	holdAtOnce(t, g, p, o, clients, streams)
}

// holdAtOnce sends n requests through p that o's gate holds, waits until
// all n are at the origin at once, opens the gate, and requires that all
// succeeded over ceil(n/streams) connections.
func holdAtOnce(t *testing.T, g *gate, p *pool.Pool, o *origin, n, streams int) {
	t.Helper()
	errs := hold(p, o, n)
	waitfor.Until(t, fmt.Sprintf("%d requests in flight", n), func() bool {
		select {
		case err := <-errs:
			t.Fatalf("with %d in flight, stats %+v: %v", g.arrived.Load(), p.Stats(), err)
		default:
		}
		return g.arrived.Load() == int64(n)
	})
	release(t, g, errs, n)
	if want := int64((n + streams - 1) / streams); o.accepted.Load() != want {
		t.Fatalf("origin accepted %d connections, want ceil(%d/%d) = %d", o.accepted.Load(), n, streams, want)
	}
}

// HTTP/2 growth with slow handshakes: 45 long requests at once to an
// origin of 10 streams per connection whose every accept takes 300 ms
// (three times the default acquire_timeout, and serial: the fifth
// connection is ready after 1.5 s). The requests waiting for a connection
// being dialled are not shed: all 45 reach the origin together and
// succeed, over ceil(45/10) = 5 connections, not more.
func TestPoolH2SlowDialsShedNothing(t *testing.T) {
	noLeaks(t)
	const streams, clients = 10, 45
	g := newGate(t)
	o := startOrigin(t, originOpts{tls: true, h2: true, maxStreams: streams, acceptDelay: 300 * time.Millisecond}, g.handler())
	c := poolConfig(nil)
	c.AcquireTimeout = pool.DefaultConfig().AcquireTimeout // 100 ms
	p, _ := newPool(t, o.addr(), c, mustDialer(t, Options{TLS: getPKI(t).clientTLS(false)}), nil)
	holdAtOnce(t, g, p, o, clients, streams)
}

// 4. ALPN auto through the pool; 5. mTLS through the pool.
func TestPoolALPNAndMTLS(t *testing.T) {
	noLeaks(t)
	pki := getPKI(t)
	g := newGate(t)
	for _, tc := range []struct {
		name  string
		o     originOpts
		proto string
	}{
		{"h2 origin", originOpts{tls: true, h2: true}, ProtoH2},
		{"h1-only origin", originOpts{tls: true}, ProtoH1},
		{"mTLS h2 origin", originOpts{tls: true, h2: true, clientCert: true}, ProtoH2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := startOrigin(t, tc.o, g.handler())
			d := mustDialer(t, Options{Protocol: Auto, TLS: pki.clientTLS(tc.o.clientCert)})
			p, _ := newPool(t, o.addr(), poolConfig(nil), d, nil)
			if lease := mustFetch(t, p, o.url("/x")); lease.Conn().Protocol() != tc.proto {
				t.Fatalf("protocol %s, want %s", lease.Conn().Protocol(), tc.proto)
			}
			if p.Stats().Protocol != tc.proto {
				t.Fatalf("pool stats protocol %q, want %q", p.Stats().Protocol, tc.proto)
			}
			if !tc.o.clientCert {
				return
			}
			// Without the client certificate the dial fails, and the pool
			// reports it as a connect failure.
			bare, _ := newPool(t, o.addr(), poolConfig(nil), mustDialer(t, Options{TLS: pki.clientTLS(false)}), nil)
			_, err := bare.Acquire(context.Background())
			var de *pool.DialError
			if !errors.As(err, &de) || !IsConnectFailure(err) {
				t.Fatalf("mTLS origin without a client certificate: %v, want a pool.DialError over a connect failure", err)
			}
		})
	}
}

// 6. Idle eviction and max-lifetime recycling, with no in-flight request
// failed by a recycle.
func TestPoolIdleEvictionAndLifetimeRecycle(t *testing.T) {
	noLeaks(t)
	t.Run("idle", func(t *testing.T) {
		clk := clock.NewFake(time.Unix(0, 0))
		o := startOrigin(t, originOpts{}, newGate(t).handler())
		p, tally := newPool(t, o.addr(), poolConfig(func(c *pool.Config) { c.IdleTimeout = time.Minute }),
			mustDialer(t, Options{}), clk)
		mustFetch(t, p, o.url("/a"))
		clk.Advance(time.Minute - time.Second)
		if tally.Closed(pool.ReasonIdle) != 0 {
			t.Fatal("connection evicted before idle_timeout")
		}
		clk.Advance(time.Second)
		if tally.Closed(pool.ReasonIdle) != 1 {
			t.Fatal("connection not evicted at idle_timeout")
		}
		waitfor.Until(t, "origin sees the close", func() bool { return o.closed.Load() == 1 })
		mustFetch(t, p, o.url("/b"))
		if o.accepted.Load() != 2 {
			t.Fatalf("origin accepted %d connections, want 2 (one after the eviction)", o.accepted.Load())
		}
	})
	for _, tc := range []struct {
		name string
		o    originOpts
		d    Options
	}{
		{"lifetime h1", originOpts{}, Options{}},
		{"lifetime h2", originOpts{tls: true, h2: true}, Options{TLS: getPKI(t).clientTLS(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(0, 0))
			g := newGate(t)
			o := startOrigin(t, tc.o, g.handler())
			p, tally := newPool(t, o.addr(), poolConfig(func(c *pool.Config) { c.MaxLifetime = 10 * time.Minute }),
				mustDialer(t, tc.d), clk)
			held := hold(p, o, 1)
			waitfor.Until(t, "request in flight", func() bool { return g.arrived.Load() == 1 })
			clk.Advance(11 * time.Minute) // past 10m + 10 % jitter
			if p.Stats().Draining != 1 {
				t.Fatalf("stats %+v: want the old connection draining", p.Stats())
			}
			// New requests go to a new connection while the old one
			// finishes its stream.
			mustFetch(t, p, o.url("/fresh"))
			g.open()
			if err := <-held; err != nil {
				t.Fatalf("in-flight request failed by the recycle: %v", err)
			}
			waitfor.Until(t, "drained connection closed", func() bool { return tally.Closed(pool.ReasonLifetime) == 1 })
			if o.accepted.Load() != 2 {
				t.Fatalf("origin accepted %d connections, want 2", o.accepted.Load())
			}
		})
	}
}

// peerClosed peeks at an h1 connection's socket without consuming
// anything: true once the peer's FIN has arrived. Tests use it to know the
// kernel has seen the kill before advancing the pool's clock.
func peerClosed(c pool.Conn) bool {
	var n int
	var err error
	c.(*h1Conn).sock.raw.Read(func(fd uintptr) bool {
		buf := make([]byte, 1)
		n, _, err = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	})
	return n == 0 && err == nil
}

// 7. Origin killed or blackholed: found by keepalive within keepalive +
// timeout, and the dead connection is never handed out.
func TestPoolKeepaliveFindsDeadOrigin(t *testing.T) {
	noLeaks(t)
	const keepalive, timeout = 15 * time.Second, 200 * time.Millisecond
	cfg := poolConfig(func(c *pool.Config) { c.Keepalive, c.KeepaliveTimeout = keepalive, timeout })

	t.Run("h1 origin closed its connections", func(t *testing.T) {
		clk := clock.NewFake(time.Unix(0, 0))
		o := startOrigin(t, originOpts{}, newGate(t).handler())
		p, tally := newPool(t, o.addr(), cfg, mustDialer(t, Options{}), clk)
		old := mustFetch(t, p, o.url("/a")).Conn()
		o.CloseClientConnections()
		waitfor.Until(t, "FIN arrived", func() bool { return peerClosed(old) })
		clk.Advance(keepalive) // the first probe after the kill
		if tally.Closed(pool.ReasonKeepalive) != 1 {
			t.Fatalf("dead connection not closed by the first keepalive probe (closed: keepalive %d, remote %d)",
				tally.Closed(pool.ReasonKeepalive), tally.Closed(pool.ReasonRemote))
		}
		if lease := mustFetch(t, p, o.url("/b")); lease.Conn() == old {
			t.Fatal("the dead connection was handed out")
		}
	})

	t.Run("h1 origin closed between probes", func(t *testing.T) {
		o := startOrigin(t, originOpts{}, newGate(t).handler())
		p, tally := newPool(t, o.addr(), poolConfig(nil), mustDialer(t, Options{}), nil)
		old := mustFetch(t, p, o.url("/a")).Conn()
		o.CloseClientConnections()
		waitfor.Until(t, "FIN arrived", func() bool { return peerClosed(old) })
		// No probe ran; the hand-out check alone keeps it out.
		if lease := mustFetch(t, p, o.url("/b")); lease.Conn() == old {
			t.Fatal("the dead connection was handed out")
		}
		if tally.Closed(pool.ReasonRemote) != 1 {
			t.Fatalf("closed as remote: %d, want 1", tally.Closed(pool.ReasonRemote))
		}
	})

	t.Run("h2 origin blackholed", func(t *testing.T) {
		clk := clock.NewFake(time.Unix(0, 0))
		o := startOrigin(t, originOpts{tls: true, h2: true}, newGate(t).handler())
		front := startBlackholeProxy(t, o.addr())
		p, tally := newPool(t, front.addr(), cfg, mustDialer(t, Options{TLS: getPKI(t).clientTLS(false)}), clk)
		old := mustFetch(t, p, o.url("/a")).Conn()
		front.blackhole() // the open connection goes silent; new ones still pass
		clk.Advance(keepalive)
		// The PING times out after `timeout` (wall time, in the conn).
		waitfor.Until(t, "lost PING closes the connection", func() bool { return tally.Closed(pool.ReasonKeepalive) == 1 })
		if old.Usable() {
			t.Fatal("blackholed connection still reports usable")
		}
		if lease := mustFetch(t, p, o.url("/b")); lease.Conn() == old {
			t.Fatal("the dead connection was handed out")
		}
		if o.accepted.Load() != 2 {
			t.Fatalf("origin accepted %d connections, want 2", o.accepted.Load())
		}
	})
}

// hold starts n requests to /held; their results arrive on the channel.
func hold(p *pool.Pool, o *origin, n int) chan error {
	errs := make(chan error, n)
	for range n {
		go func() {
			_, _, err := fetch(p, o.url("/held"))
			errs <- err
		}()
	}
	return errs
}

// release opens the gate; the n requests on held must then succeed.
func release(t testing.TB, g *gate, held chan error, n int) {
	t.Helper()
	g.open()
	for range n {
		if err := <-held; err != nil {
			t.Fatal(err)
		}
	}
}
