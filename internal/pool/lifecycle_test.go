package pool_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/rng"
)

// lifecycleCfg isolates one behaviour: everything else off.
func lifecycleCfg() pool.Config {
	c := cfg()
	c.IdleTimeout, c.MaxLifetime, c.Keepalive = 0, 0, 0
	return c
}

func TestIdleEvictionIsExact(t *testing.T) {
	c := lifecycleCfg()
	c.IdleTimeout = 60 * time.Second
	e := newEnv(t, c, memconn.Config{})
	e.release(e.mustAcquire())
	e.advanceTo(30 * time.Second)
	e.release(e.mustAcquire()) // use restarts the idle clock
	e.advanceTo(90*time.Second - 1)
	if e.p.Stats().Open != 1 {
		t.Fatal("evicted before idle_timeout")
	}
	e.advanceTo(90 * time.Second)
	if st := e.p.Stats(); st.Open != 0 || e.d.Stats().Open != 0 {
		t.Fatalf("not evicted at idle_timeout: %+v", st)
	}
	if got := e.obs.closes; len(got) != 1 || got[0] != (closeEvent{at: 90 * time.Second, reason: pool.ReasonIdle}) {
		t.Fatalf("closes %+v, want one idle close at 90s", got)
	}
}

func TestIdleEvictionKeepsThePrewarmFloor(t *testing.T) {
	c := lifecycleCfg()
	c.IdleTimeout, c.Prewarm = 60*time.Second, 2
	e := newEnv(t, c, memconn.Config{})
	rs := []*result{e.mustAcquire(), e.mustAcquire(), e.mustAcquire(), e.mustAcquire()}
	for _, r := range rs {
		e.release(r)
	}
	e.advance(10 * time.Minute)
	if st := e.p.Stats(); st.Open != 2 || st.Idle != 2 || e.obs.Closed(pool.ReasonIdle) != 2 {
		t.Fatalf("stats %+v, idle closes %d; want 2 kept for prewarm, 2 evicted", st, e.obs.Closed(pool.ReasonIdle))
	}
}

// Many connections opened at the same instant recycle spread over
// [0.9, 1.1] × max_lifetime, not all at once.
func TestLifetimeJitterWithinTenPercent(t *testing.T) {
	c := lifecycleCfg()
	c.MaxConnections, c.MaxPending, c.MaxLifetime = 200, 200, 10*time.Minute
	e := newEnv(t, c, memconn.Config{})
	var rs []*result
	for range 200 {
		rs = append(rs, e.mustAcquire())
	}
	for _, r := range rs {
		e.release(r)
	}
	e.advance(12 * time.Minute)
	closes := e.obs.closes
	if len(closes) != 200 {
		t.Fatalf("%d closes, want 200", len(closes))
	}
	lo, hi := 9*time.Minute, 11*time.Minute
	distinct := map[time.Duration]bool{}
	first, last := hi, lo
	for _, ce := range closes {
		if ce.reason != pool.ReasonLifetime || ce.at < lo || ce.at > hi {
			t.Fatalf("close %+v outside [%v, %v] or not lifetime", ce, lo, hi)
		}
		distinct[ce.at] = true
		first, last = min(first, ce.at), max(last, ce.at)
	}
	// Uniform draws: 200 of them cover the range and almost never repeat.
	if len(distinct) < 190 || first > 9*time.Minute+15*time.Second || last < 11*time.Minute-15*time.Second {
		t.Fatalf("%d distinct close times in [%v, %v]: not spread by jitter", len(distinct), first, last)
	}
}

// A connection past its lifetime finishes its stream, takes no new one,
// then closes: no in-flight request fails because of a recycle.
func TestLifetimeRecycleDrainsWithoutFailingInflight(t *testing.T) {
	c := lifecycleCfg()
	c.MaxLifetime = 10 * time.Minute
	e := newEnv(t, c, memconn.Config{Streams: 4})
	inflight := e.mustAcquire()
	e.advance(11 * time.Minute)
	if inflight.conn().Closed() {
		t.Fatal("recycle closed a connection with a stream in flight")
	}
	if st := e.p.Stats(); st.Draining != 1 || st.Busy != 1 {
		t.Fatalf("stats %+v, want the old connection draining", st)
	}
	fresh := e.mustAcquire()
	if fresh.conn() == inflight.conn() {
		t.Fatal("a draining connection took a new stream")
	}
	e.release(inflight)
	if !inflight.conn().Closed() || e.obs.Closed(pool.ReasonLifetime) != 1 {
		t.Fatalf("drained connection not closed for lifetime: closed=%v", inflight.conn().Closed())
	}
	if e.obs.Failed() != 0 {
		t.Fatalf("%d acquisitions failed", e.obs.Failed())
	}
	e.release(fresh)
}

// A blackholed origin: the idle connection is probed after keepalive,
// closed when the probe times out (keepalive + timeout), and never handed
// out meanwhile.
func TestKeepaliveDetectsABlackholedOrigin(t *testing.T) {
	c := lifecycleCfg()
	c.Keepalive, c.KeepaliveTimeout = 15*time.Second, 5*time.Second
	e := newEnv(t, c, memconn.Config{PingLatency: time.Millisecond})
	e.release(e.mustAcquire())
	dead := e.d.Last()
	e.advanceTo(time.Second)
	dead.Blackhole()
	e.advanceTo(15*time.Second - 1)
	if dead.Pings() != 0 {
		t.Fatal("probed before keepalive")
	}
	e.advanceTo(15 * time.Second)
	if dead.Pings() != 1 {
		t.Fatalf("%d probes at keepalive, want 1", dead.Pings())
	}
	during := e.mustAcquire() // the HTTP/1.1 connection is busy with its probe
	if during.conn() == dead {
		t.Fatal("handed out a connection under probe")
	}
	e.release(during)
	e.advanceTo(20*time.Second - 1)
	if dead.Closed() {
		t.Fatal("closed before the probe timed out")
	}
	e.advanceTo(20 * time.Second)
	if !dead.Closed() || e.obs.Closed(pool.ReasonKeepalive) != 1 {
		t.Fatalf("not closed at keepalive + timeout: closed=%v", dead.Closed())
	}
	for range 3 {
		if r := e.mustAcquire(); r.conn() == dead {
			t.Fatal("handed out the dead connection")
		} else {
			e.release(r)
		}
	}
}

func TestKeepaliveKeepsAnsweringConnectionsUntilIdleTimeout(t *testing.T) {
	c := lifecycleCfg()
	c.Keepalive, c.KeepaliveTimeout, c.IdleTimeout = 15*time.Second, 5*time.Second, 60*time.Second
	e := newEnv(t, c, memconn.Config{PingLatency: time.Millisecond})
	e.release(e.mustAcquire())
	conn := e.d.Last()
	e.advanceTo(59 * time.Second)
	if conn.Closed() || conn.Pings() != 3 {
		t.Fatalf("at 59s: closed=%v, %d probes; want open after 3 probes", conn.Closed(), conn.Pings())
	}
	e.advanceTo(60 * time.Second)
	if !conn.Closed() || e.obs.Closed(pool.ReasonIdle) != 1 {
		t.Fatalf("at 60s: closed=%v; want evicted idle", conn.Closed())
	}
}

// A failed probe closes an HTTP/2 connection at once, even with a stream
// started on it during the probe: the peer is gone, so waiting for the
// stream would only delay its failure.
func TestFailedProbeClosesAMultiplexedConnectionAtOnce(t *testing.T) {
	c := lifecycleCfg()
	c.Keepalive, c.KeepaliveTimeout = 15*time.Second, 5*time.Second
	e := newEnv(t, c, memconn.Config{Streams: 10})
	e.release(e.mustAcquire())
	conn := e.d.Last()
	conn.Blackhole()
	e.advanceTo(15 * time.Second)
	during := e.mustAcquire()
	if during.conn() != conn {
		t.Fatal("the h2 connection under probe was not used")
	}
	e.advanceTo(20 * time.Second)
	if !conn.Closed() || e.obs.Closed(pool.ReasonKeepalive) != 1 {
		t.Fatalf("failed probe did not close the connection: closed=%v", conn.Closed())
	}
	e.release(during) // harmless after the close
	if st := e.p.Stats(); st.Open != 0 || st.Busy != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A probed connection goes back among the least recently used: the most
// recently used connection stays the first choice.
func TestAnsweredProbeKeepsTheMostRecentlyUsedFirst(t *testing.T) {
	c := lifecycleCfg()
	c.Keepalive = 15 * time.Second
	e := newEnv(t, c, memconn.Config{PingLatency: time.Millisecond})
	a, b := e.mustAcquire(), e.mustAcquire()
	e.release(a)
	e.advanceTo(time.Second)
	e.release(b)
	e.advanceTo(15*time.Second + 500*time.Millisecond) // a was probed and answered; b not yet probed
	if a.conn().Pings() != 1 || b.conn().Pings() != 0 {
		t.Fatalf("probes: a %d, b %d", a.conn().Pings(), b.conn().Pings())
	}
	if got := e.mustAcquire().conn(); got != b.conn() {
		t.Fatalf("got conn %d, want the most recently used %d", got.ID(), b.conn().ID())
	}
}

// An HTTP/2 connection keeps serving streams while its probe is in flight.
func TestProbeLeavesMultiplexedStreamsAvailable(t *testing.T) {
	c := lifecycleCfg()
	c.Keepalive = 15 * time.Second
	e := newEnv(t, c, memconn.Config{Streams: 10, PingLatency: time.Second})
	e.release(e.mustAcquire())
	e.advanceTo(15 * time.Second)
	if r := e.mustAcquire(); r.conn().ID() != 1 {
		t.Fatal("an h2 connection under probe was not used")
	} else {
		e.release(r)
	}
	if e.d.Stats().Created != 1 {
		t.Fatal("dialled although the probed connection had free streams")
	}
}

// The origin process dies: connections are found unusable, dials are
// refused, the pool backs off and fails requests fast with the dial error
// until the backoff ends; then it reconnects.
func TestOriginDownFailsFastDuringBackoff(t *testing.T) {
	c := cfg()
	e := newEnv(t, c, memconn.Config{})
	e.release(e.mustAcquire())
	e.d.SetDown(true)

	r := e.acquire()
	var de *pool.DialError
	if !r.done || !errors.As(r.err, &de) || !errors.Is(r.err, memconn.ErrRefused) {
		t.Fatalf("acquire on a dead origin: done=%v err=%v, want a *DialError wrapping the refusal", r.done, r.err)
	}
	if de.Addr != addr || de.Loop != 3 || de.Failures != 1 || !strings.Contains(de.Error(), addr) {
		t.Fatalf("dial error %+v lacks context", de)
	}
	if e.obs.Closed(pool.ReasonRemote) != 1 {
		t.Fatal("the dead connection was not closed as remote")
	}
	st := e.p.Stats()
	if st.RetryAt.IsZero() {
		t.Fatalf("no backoff after a failed dial: %+v", st)
	}
	dials := e.d.Stats().Dials
	again := e.acquire()
	if !errors.Is(again.err, r.err) || e.d.Stats().Dials != dials {
		t.Fatalf("during backoff: err=%v, dials %d → %d; want the same error and no dial", again.err, dials, e.d.Stats().Dials)
	}
	e.d.SetDown(false)
	e.clk.AdvanceTo(st.RetryAt)
	if ok := e.mustAcquire(); ok.conn() == nil {
		t.Fatal("no connection after the backoff")
	}
	if st := e.p.Stats(); st.Failures != 0 || !st.RetryAt.IsZero() {
		t.Fatalf("backoff not reset by a successful dial: %+v", st)
	}
}

// The n-th consecutive failure backs off uniformly in
// [0, min(max, base·2^(n-1))).
func TestReconnectBackoffIsFullJitterWithinBounds(t *testing.T) {
	c := cfg()
	c.BackoffBase, c.BackoffMax = 100*time.Millisecond, 5*time.Second
	e := newEnv(t, c, memconn.Config{})
	e.d.SetDown(true)
	const n = 300
	for range n {
		if r := e.acquire(); !r.done || r.err == nil {
			t.Fatalf("acquire on a down origin: %+v", r)
		}
		if at := e.p.Stats().RetryAt; !at.IsZero() {
			e.clk.AdvanceTo(at)
		}
	}
	bs := e.obs.backoffs
	if len(bs) != n || e.d.Stats().Dials != n {
		t.Fatalf("%d backoffs for %d dials, want %d", len(bs), e.d.Stats().Dials, n)
	}
	var capped time.Duration
	for i, b := range bs {
		ceil := min(c.BackoffMax, c.BackoffBase<<min(i, 20))
		if b < 0 || b >= ceil {
			t.Fatalf("failure %d: backoff %v outside [0, %v)", i+1, b, ceil)
		}
		if i >= 10 {
			capped += b
		}
	}
	// Past the cap the draws are uniform on [0, 5s): mean 2.5s; 290
	// draws put it within ±0.3s (about 3.5 standard errors).
	if mean := capped / (n - 10); mean < 2200*time.Millisecond || mean > 2800*time.Millisecond {
		t.Fatalf("mean capped backoff %v, want about 2.5s", mean)
	}
}

// With connections still open, a failed dial does not fail the waiters:
// they wait for a released stream.
func TestFailedDialKeepsWaitersWhenConnectionsRemain(t *testing.T) {
	c := cfg()
	c.MaxConnections = 2
	e := newEnv(t, c, memconn.Config{})
	held := e.mustAcquire()
	e.d.FailNext(1)
	w := e.acquire()
	if w.done || e.obs.DialFailures() != 1 {
		t.Fatalf("waiter %+v, %d dial failures; want it still waiting", w, e.obs.DialFailures())
	}
	e.release(held)
	if !granted(w) {
		t.Fatalf("waiter not served by the release: %+v", w)
	}
}

// During a reconnect backoff, over_cap: temporary does not dial: the request
// queues for the open connection like queue.
func TestTemporaryDoesNotDialDuringBackoff(t *testing.T) {
	c := cfg()
	c.MaxConnections, c.OverCap = 1, pool.Temporary
	e := newEnv(t, c, memconn.Config{})
	held := e.mustAcquire()
	e.d.FailNext(1)
	failed := e.acquire() // its temporary dial fails and starts the backoff
	if failed.done || e.obs.DialFailures() != 1 || e.p.Stats().RetryAt.IsZero() {
		t.Fatalf("r=%+v failures=%d stats %+v", failed, e.obs.DialFailures(), e.p.Stats())
	}
	dials := e.d.Stats().Dials
	w := e.acquire()
	if w.done || e.d.Stats().Dials != dials {
		t.Fatalf("during backoff: w=%+v, dials %d → %d; want a plain waiter", w, dials, e.d.Stats().Dials)
	}
	e.release(held)
	if !granted(failed) || w.done {
		t.Fatalf("release served %+v / %+v; want the older waiter first", failed, w)
	}
}

func TestPrewarmAndReady(t *testing.T) {
	c := cfg()
	c.Prewarm = 3
	e := newEnv(t, c, memconn.Config{DialLatency: 5 * time.Millisecond})
	if e.p.Ready() || e.d.Stats().Dials != 3 {
		t.Fatalf("ready=%v with %d dials at New; want not ready, 3 dials", e.p.Ready(), e.d.Stats().Dials)
	}
	e.advance(5 * time.Millisecond)
	if st := e.p.Stats(); !e.p.Ready() || st.Open != 3 || st.Idle != 3 {
		t.Fatalf("after the dials: ready=%v %+v", e.p.Ready(), st)
	}
	// A lost connection is replaced to keep the floor.
	e.d.Last().ClosePeer()
	for range 3 {
		e.release(e.mustAcquire())
	}
	e.advance(5 * time.Millisecond)
	if st := e.p.Stats(); st.Open != 3 || e.d.Stats().Created != 4 {
		t.Fatalf("floor not restored: %+v, %d created", st, e.d.Stats().Created)
	}
}

func TestPrewarmRetriesAfterTheBackoff(t *testing.T) {
	c := cfg()
	c.Prewarm = 1
	// New dials at once, so the failures are armed before it.
	clk := clock.NewFake(epoch)
	d := memconn.New(clk, memconn.Config{})
	d.FailNext(2)
	p, err := pool.New(addr, 0, c, d, clk, rng.New(7), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := 0; !p.Ready(); i++ {
		if i > 3 || !clk.Step() {
			t.Fatalf("not ready after %d steps: %+v, dialer %+v", i, p.Stats(), d.Stats())
		}
	}
	if s := d.Stats(); s.Dials != 3 || s.Failed != 2 {
		t.Fatalf("dialer %+v, want 2 failures then a success", s)
	}
}

func TestDrainFinishesInflightThenCloses(t *testing.T) {
	c := cfg()
	c.MaxConnections = 1
	e := newEnv(t, c, memconn.Config{})
	inflight := e.mustAcquire()
	queued := e.acquire()
	if queued.done {
		t.Fatal("max_connections 1 handed out two streams")
	}
	drained := false
	e.p.Drain(func() { drained = true })
	e.check()
	if !errors.Is(queued.err, pool.ErrClosed) {
		t.Fatalf("queued waiter: %v, want ErrClosed", queued.err)
	}
	if r := e.acquire(); !errors.Is(r.err, pool.ErrClosed) {
		t.Fatalf("acquire after Drain: %v, want ErrClosed", r.err)
	}
	if inflight.conn().Closed() || drained {
		t.Fatal("drain closed a connection in flight")
	}
	e.release(inflight)
	if !inflight.conn().Closed() || !drained || e.obs.Closed(pool.ReasonEviction) != 1 {
		t.Fatalf("after the last release: closed=%v drained=%v", inflight.conn().Closed(), drained)
	}
	if e.p.Ready() {
		t.Fatal("a drained pool reports ready")
	}
}

func TestDrainOfAnIdlePoolIsImmediate(t *testing.T) {
	e := newEnv(t, cfg(), memconn.Config{})
	e.release(e.mustAcquire())
	drained := false
	e.p.Drain(func() { drained = true })
	if !drained || e.d.Stats().Open != 0 {
		t.Fatalf("drained=%v, origin open %d", drained, e.d.Stats().Open)
	}
}

func TestCloseFailsWaitersAndClosesEverything(t *testing.T) {
	c := cfg()
	c.MaxConnections, c.OverCap = 1, pool.Temporary
	e := newEnv(t, c, memconn.Config{DialLatency: time.Millisecond})
	held := e.acquire()
	e.advance(time.Millisecond)
	tmp := e.acquire() // a temporary dial in flight
	e.advance(time.Millisecond)
	w := e.acquire() // another temporary dial
	e.p.Close()
	e.check()
	if !errors.Is(w.err, pool.ErrClosed) {
		t.Fatalf("waiter: %v, want ErrClosed", w.err)
	}
	if !held.conn().Closed() || !tmp.conn().Closed() {
		t.Fatal("Close left a busy connection open")
	}
	held.lease.Release() // releasing after Close is harmless
	tmp.lease.Release()
	e.advance(time.Millisecond) // the temporary dial finishes into a closed pool
	if s := e.d.Stats(); s.Open != 0 || s.Created != 3 {
		t.Fatalf("origin %+v, want 3 created and none open", s)
	}
	if e.obs.Closed(pool.ReasonShutdown) != 3 {
		t.Fatalf("%d shutdown closes, want 3", e.obs.Closed(pool.ReasonShutdown))
	}
	if r := e.acquire(); !errors.Is(r.err, pool.ErrClosed) {
		t.Fatalf("acquire after Close: %v", r.err)
	}
	if e.clk.Pending() != 0 {
		t.Fatalf("%d timers left armed after Close", e.clk.Pending())
	}
	drained := false
	e.p.Drain(func() { drained = true })
	if !drained {
		t.Fatal("Drain of a closed pool did not run its callback")
	}
}

func TestConfigValidateNamesTheKey(t *testing.T) {
	if err := pool.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig invalid: %v", err)
	}
	bad := pool.DefaultConfig()
	bad.MaxConnections, bad.MaxPending, bad.AcquireTimeout = 0, 0, 0
	bad.BackoffMax = time.Millisecond
	err := bad.Validate()
	for _, key := range []string{"pool.max_connections", "pool.max_pending", "pool.acquire_timeout", "pool.backoff"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Fatalf("Validate() = %v, want it to name %s", err, key)
		}
	}
	if _, err := pool.New(addr, 0, bad, memconn.New(clock.NewFake(epoch), memconn.Config{}), nil, nil, nil); err == nil {
		t.Fatal("New accepted an invalid config")
	}
	for _, s := range []string{"queue", "temporary", "reject"} {
		o, err := pool.ParseOverCap(s)
		if err != nil || o.String() != s {
			t.Fatalf("ParseOverCap(%q) = %v, %v", s, o, err)
		}
	}
	if _, err := pool.ParseOverCap("unlimited"); err == nil {
		t.Fatal("ParseOverCap accepted an unknown policy")
	}
	want := []string{"idle", "lifetime", "error", "keepalive", "remote", "eviction", "shutdown"}
	for i, r := range pool.CloseReasons() {
		if r.String() != want[i] {
			t.Fatalf("reason %d = %q, want %q", i, r, want[i])
		}
	}
}

// TestRenewRetiresEveryConnectionAndStaleDials: Renew closes the idle
// connections at once, a busy one when its request ends, and a dial in
// flight (started with the old dialer) as soon as it arrives; the pool
// dials afresh for its floor and its waiters.
func TestRenewRetiresEveryConnectionAndStaleDials(t *testing.T) {
	c := cfg()
	c.Prewarm = 2
	e := newEnv(t, c, memconn.Config{DialLatency: 10 * time.Millisecond})
	e.advance(10 * time.Millisecond)
	busy := e.mustAcquire()
	idle := e.mustAcquire()
	e.release(idle)
	e.p.Renew()
	e.check()
	if !idle.conn().Closed() || busy.conn().Closed() {
		t.Fatalf("after Renew: idle closed=%v (want true), busy closed=%v (want false)", idle.conn().Closed(), busy.conn().Closed())
	}
	// The floor's two dials are in flight; Renew again makes them stale.
	e.p.Renew()
	e.check()
	e.advance(10 * time.Millisecond)
	if n := e.obs.Closed(pool.ReasonEviction); n != 3 {
		t.Fatalf("evicted %d connections, want 3 (the idle one and the two dialled before the second Renew)", n)
	}
	e.release(busy)
	if !busy.conn().Closed() {
		t.Fatal("the connection busy at Renew was put back to serve again")
	}
	e.advance(10 * time.Millisecond)
	fresh := e.mustAcquire()
	if fresh.conn() == busy.conn() || fresh.conn() == idle.conn() || fresh.conn().Closed() {
		t.Fatal("after Renew, an old connection serves")
	}
	e.release(fresh)
	if s := e.p.Stats(); s.Open != 2 {
		t.Fatalf("open %d after Renew, want the floor of 2 dialled afresh", s.Open)
	}
}
