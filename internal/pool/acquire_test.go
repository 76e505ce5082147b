package pool_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/rng"
)

func TestReuseOneConnectionForSequentialRequests(t *testing.T) {
	e := newEnv(t, cfg(), memconn.Config{DialLatency: time.Millisecond})
	first := e.acquire()
	e.advance(time.Millisecond)
	if !granted(first) {
		t.Fatalf("first acquire not granted after the dial: %+v", first)
	}
	e.release(first)
	second := e.mustAcquire()
	if second.conn() != first.conn() {
		t.Fatalf("second request got conn %d, want the warm conn %d", second.conn().ID(), first.conn().ID())
	}
	e.release(second)
	if s := e.d.Stats(); s.Dials != 1 || s.Created != 1 {
		t.Fatalf("origin saw %d dials, %d conns; want exactly 1", s.Dials, s.Created)
	}
	if got := e.obs.Created(); got != 1 {
		t.Fatalf("observer counted %d created, want 1", got)
	}
}

func TestMostRecentlyUsedConnectionFirst(t *testing.T) {
	e := newEnv(t, cfg(), memconn.Config{})
	a, b := e.mustAcquire(), e.mustAcquire()
	e.release(a)
	e.release(b)
	if got := e.mustAcquire().conn(); got != b.conn() {
		t.Fatalf("got conn %d, want the most recently released %d", got.ID(), b.conn().ID())
	}
}

// 64 concurrent requests, max_connections 8, queue: the origin never sees
// more than 8 connections, 50 requests wait, 14 are refused at once, and
// the waiters nobody serves fail exactly acquire_timeout after the pool
// knew no dial would serve them: when the first connection (1 ms) told it
// a connection carries one stream, and the cap left room for 7 more dials.
func TestQueueBoundsConnectionsAndTimesOut(t *testing.T) {
	c := cfg()
	c.MaxConnections, c.MaxPending, c.AcquireTimeout = 8, 50, 100*time.Millisecond
	e := newEnv(t, c, memconn.Config{DialLatency: time.Millisecond})

	var rs []*result
	for range 64 {
		rs = append(rs, e.acquire())
	}
	full := count(rs, func(r *result) bool { return errors.Is(r.err, pool.ErrPendingFull) })
	if full != 14 || e.p.Stats().Pending != 50 {
		t.Fatalf("refused %d with ErrPendingFull and queued %d; want 14 and 50", full, e.p.Stats().Pending)
	}
	// The first dial teaches the pool that a connection carries one
	// stream; the other seven follow.
	if d := e.d.Stats().Dials; d != 1 {
		t.Fatalf("%d dials before the first connection, want 1", d)
	}
	e.advance(2 * time.Millisecond)
	if n := count(rs, granted); n != 8 {
		t.Fatalf("%d granted, want 8", n)
	}
	if s := e.d.Stats(); s.MaxOpen != 8 || s.Dials != 8 {
		t.Fatalf("origin saw %d dials, at most %d open; want 8 and 8", s.Dials, s.MaxOpen)
	}
	e.advanceTo(101*time.Millisecond - 1)
	if n := count(rs, func(r *result) bool { return errors.Is(r.err, pool.ErrAcquireTimeout) }); n != 0 {
		t.Fatalf("%d timed out before acquire_timeout", n)
	}
	e.advanceTo(101 * time.Millisecond)
	timedOut := count(rs, func(r *result) bool {
		return errors.Is(r.err, pool.ErrAcquireTimeout) && r.at == 101*time.Millisecond
	})
	if timedOut != 42 {
		t.Fatalf("%d waiters timed out at exactly 101ms, want 42", timedOut)
	}
	if st := e.p.Stats(); st.Pending != 0 || st.Busy != 8 || st.Open != 8 {
		t.Fatalf("stats %+v, want 0 pending, 8 busy of 8 open", st)
	}
	if e.obs.Failed() != 56 || e.obs.Granted() != 8 {
		t.Fatalf("observer: %d failed, %d granted; want 56 and 8", e.obs.Failed(), e.obs.Granted())
	}
}

func TestWaitersAreServedFIFO(t *testing.T) {
	c := cfg()
	c.MaxConnections = 1
	e := newEnv(t, c, memconn.Config{})
	held := e.mustAcquire()
	var queue []*result
	for range 4 {
		queue = append(queue, e.acquire())
		e.advance(time.Millisecond)
	}
	prev := held
	for i, w := range queue {
		if w.done {
			t.Fatalf("waiter %d settled before a release", i)
		}
		e.release(prev)
		if !granted(w) {
			t.Fatalf("release %d: waiter %d not served (FIFO)", i, i)
		}
		for j := i + 1; j < len(queue); j++ {
			if queue[j].done {
				t.Fatalf("release %d served waiter %d out of order", i, j)
			}
		}
		prev = w
	}
	e.release(prev)
	if got := e.d.Stats().Created; got != 1 {
		t.Fatalf("%d connections for 5 sequential holders, want 1", got)
	}
}

func TestRejectFailsAtOnceAtTheCap(t *testing.T) {
	c := cfg()
	c.MaxConnections, c.OverCap = 2, pool.Reject
	e := newEnv(t, c, memconn.Config{})
	e.mustAcquire()
	e.mustAcquire()
	r := e.acquire()
	if !r.done || !errors.Is(r.err, pool.ErrOverCap) {
		t.Fatalf("third acquire: done=%v err=%v, want ErrOverCap at once", r.done, r.err)
	}
	if st := e.p.Stats(); st.Pending != 0 || e.d.Stats().Dials != 2 {
		t.Fatalf("reject queued or dialled: %+v, dials %d", st, e.d.Stats().Dials)
	}
}

// Reject still lets a request wait for a dial already in flight: the pool
// is not over its cap for it.
func TestRejectWaitsForCapacityAlreadyDialling(t *testing.T) {
	c := cfg()
	c.MaxConnections, c.OverCap = 2, pool.Reject
	e := newEnv(t, c, memconn.Config{DialLatency: time.Millisecond, Streams: 1})
	a, b := e.acquire(), e.acquire() // one dial: the capacity is not known yet
	e.advance(time.Millisecond)
	if !granted(a) || b.done {
		t.Fatalf("after the first dial: a=%+v b=%+v", a, b)
	}
	c3 := e.acquire() // one dial in flight for b; 2 of 2 open or dialling
	if !errors.Is(c3.err, pool.ErrOverCap) {
		t.Fatalf("third: %+v, want ErrOverCap", c3)
	}
	e.advance(time.Millisecond)
	if !granted(b) {
		t.Fatalf("b not served by its dial: %+v", b)
	}
}

// A request the dials in flight will serve is not over the cap, even when
// open + dialling connections are at max_connections: with a known stream
// capacity it waits instead of being rejected.
func TestRejectCountsTheCapacityOfDialsInFlight(t *testing.T) {
	c := cfg()
	c.MaxConnections, c.OverCap = 2, pool.Reject
	e := newEnv(t, c, memconn.Config{Streams: 10, DialLatency: time.Millisecond})
	first := e.acquire()
	e.advance(time.Millisecond)
	for range 9 {
		e.mustAcquire() // fills the first connection
	}
	r11, r12 := e.acquire(), e.acquire() // one dial for both
	if r11.done || r12.done || e.d.Stats().Dials != 2 {
		t.Fatalf("r11=%+v r12=%+v dials=%d; want both waiting on one dial", r11, r12, e.d.Stats().Dials)
	}
	e.advance(time.Millisecond)
	if !granted(first) || !granted(r11) || !granted(r12) || r11.conn() != r12.conn() {
		t.Fatalf("r11=%+v r12=%+v; want both on the second connection", r11, r12)
	}
}

func TestTemporaryOpensOneShotConnections(t *testing.T) {
	c := cfg()
	c.MaxConnections, c.OverCap = 2, pool.Temporary
	e := newEnv(t, c, memconn.Config{})
	e.mustAcquire()
	e.mustAcquire()
	tmp := e.mustAcquire()
	if !tmp.lease.Temporary() {
		t.Fatal("over-cap lease is not temporary")
	}
	if st := e.p.Stats(); st.Open != 2 || st.Temporary != 1 {
		t.Fatalf("stats %+v, want 2 pooled + 1 temporary", st)
	}
	e.release(tmp)
	if !tmp.conn().Closed() {
		t.Fatal("temporary connection still open after its request")
	}
	if e.obs.CreatedTemporary() != 1 || e.obs.Closed(pool.ReasonEviction) != 1 {
		t.Fatalf("observer: %d temporary created, %d closed by eviction; want 1 and 1",
			e.obs.CreatedTemporary(), e.obs.Closed(pool.ReasonEviction))
	}
	if st := e.p.Stats(); st.Open != 2 || st.Temporary != 0 {
		t.Fatalf("stats %+v after release", st)
	}
}

// A temporary waiter takes a released pooled stream when that comes first;
// its one-shot connection is then closed unused.
func TestTemporaryWaiterTakesAReleasedStreamFirst(t *testing.T) {
	c := cfg()
	c.MaxConnections, c.OverCap = 1, pool.Temporary
	e := newEnv(t, c, memconn.Config{DialLatency: 10 * time.Millisecond})
	a := e.acquire()
	e.advance(10 * time.Millisecond)
	b := e.acquire()
	if b.done || e.p.Stats().TemporaryDialing != 1 {
		t.Fatalf("b=%+v, stats %+v: want b waiting on a temporary dial", b, e.p.Stats())
	}
	e.advance(time.Millisecond)
	e.release(a)
	if !granted(b) || b.lease.Temporary() || b.conn() != a.conn() {
		t.Fatalf("b not served by the released pooled stream: %+v", b)
	}
	e.advance(10 * time.Millisecond)
	if st := e.p.Stats(); st.Temporary != 0 || st.TemporaryDialing != 0 || e.d.Stats().Open != 1 {
		t.Fatalf("the unused temporary connection was kept: %+v, origin open %d", st, e.d.Stats().Open)
	}
}

func TestCancelWithdrawsTheWaiter(t *testing.T) {
	c := cfg()
	c.MaxConnections = 1
	e := newEnv(t, c, memconn.Config{})
	held := e.mustAcquire()
	w := e.acquire()
	if !w.cancel() {
		t.Fatal("cancel of a queued waiter reported false")
	}
	if e.p.Stats().Pending != 0 {
		t.Fatal("cancelled waiter still queued")
	}
	e.release(held)
	e.advance(time.Second)
	if w.done {
		t.Fatalf("cancelled waiter's callback ran: %+v", w)
	}
	if w.cancel() {
		t.Fatal("second cancel reported true")
	}
	r := e.mustAcquire()
	if r.cancel() {
		t.Fatal("cancel of a settled acquisition reported true")
	}
}

// The request that caused a dial gives up; the dial still finishes and its
// connection serves the next request.
func TestDialForAnAbandonedRequestFillsThePool(t *testing.T) {
	e := newEnv(t, cfg(), memconn.Config{DialLatency: 10 * time.Millisecond})
	r := e.acquire()
	e.advance(time.Millisecond)
	if !r.cancel() {
		t.Fatal("cancel failed")
	}
	e.advance(9 * time.Millisecond)
	if st := e.p.Stats(); st.Open != 1 || st.Idle != 1 {
		t.Fatalf("stats %+v, want the abandoned dial's connection idle in the pool", st)
	}
	next := e.mustAcquire()
	if next.conn().ID() != 1 || e.d.Stats().Dials != 1 {
		t.Fatalf("next request dialled again: conn %d, %d dials", next.conn().ID(), e.d.Stats().Dials)
	}
}

// The blocking Acquire: a ctx that ends withdraws the waiter; the dial it
// started still fills the pool.
func TestAcquireContextCancel(t *testing.T) {
	e := newEnv(t, cfg(), memconn.Config{DialLatency: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := e.p.Acquire(ctx)
		done <- err
	}()
	for e.p.Stats().Pending != 1 {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire returned %v, want context.Canceled", err)
	}
	if st := e.p.Stats(); st.Pending != 0 || st.Dialing != 1 {
		t.Fatalf("stats %+v, want no waiter and the dial still running", st)
	}
	e.advance(10 * time.Millisecond)
	l, err := e.p.Acquire(context.Background())
	if err != nil || l.Conn().(*memconn.Conn).ID() != 1 {
		t.Fatalf("Acquire after the dial: %v, %v", l.Conn(), err)
	}
	l.Release()
}

func TestAcquireBlockingGetsAReleasedStream(t *testing.T) {
	c := cfg()
	c.MaxConnections = 1
	e := newEnv(t, c, memconn.Config{})
	held, err := e.p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan pool.Lease)
	go func() {
		l, err := e.p.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	for e.p.Stats().Pending != 1 {
		runtime.Gosched()
	}
	held.Release()
	if l := <-got; l.Conn() != held.Conn() {
		t.Fatal("waiter did not get the released connection")
	} else {
		l.Release()
	}
}

// 64 concurrent requests over connections of N streams open ceil(64/N)
// connections: HTTP/2 multiplexes, HTTP/1.1 (N = 1) needs one each. A
// multiplexed pool also keeps a headroom of streams spare, half a
// connection's or an eighth of those in use (8), so it opens
// ceil((64 + max(N/2, 8)) / N): one more where the last connection is past
// the headroom (100 streams: 64 of them; 16: all; 10: 4 free of 70).
func TestMultiplexedConnectionsFillBeforeDialling(t *testing.T) {
	for _, tc := range []struct {
		name              string
		streams, maxStrms int
		want              int64
	}{
		{"h1", 1, 0, 64},
		{"h2-10", 10, 0, 8},
		{"h2-30", 30, 0, 3},
		{"h2-100", 100, 0, 2},
		{"h2-100-capped-16", 100, 16, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg()
			c.MaxConnections, c.MaxPending, c.MaxStreams = 64, 64, tc.maxStrms
			e := newEnv(t, c, memconn.Config{Streams: tc.streams, DialLatency: time.Millisecond})
			var rs []*result
			for range 64 {
				rs = append(rs, e.acquire())
			}
			e.advance(5 * time.Millisecond)
			if n := count(rs, granted); n != 64 {
				t.Fatalf("%d of 64 granted", n)
			}
			if s := e.d.Stats(); s.Created != tc.want || s.Dials != tc.want {
				t.Fatalf("%d dials, %d connections; want %d", s.Dials, s.Created, tc.want)
			}
			if st := e.p.Stats(); st.Busy != 64 || st.Protocol != map[bool]string{true: "h1", false: "h2"}[tc.streams == 1] {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestWarmMultiplexedAcquisitionsNeedOneDialPerCapacity(t *testing.T) {
	c := cfg()
	c.MaxPending = 64
	e := newEnv(t, c, memconn.Config{Streams: 10})
	var rs []*result
	for range 25 { // synchronous dials: each new connection serves at once
		rs = append(rs, e.mustAcquire())
	}
	if got := e.d.Stats().Created; got != 3 {
		t.Fatalf("25 streams over 10-stream connections opened %d, want 3", got)
	}
	if st := e.p.Stats(); st.Capacity != 30 || st.Busy != 25 || st.Utilization() != 25.0/30 {
		t.Fatalf("stats %+v, utilization %v", st, st.Utilization())
	}
	for _, r := range rs {
		e.release(r)
	}
}

func TestPeerClosedConnectionIsNeverHandedOut(t *testing.T) {
	e := newEnv(t, cfg(), memconn.Config{})
	first := e.mustAcquire()
	e.release(first)
	first.conn().ClosePeer()
	next := e.mustAcquire()
	if next.conn() == first.conn() {
		t.Fatal("handed out a connection the peer closed")
	}
	if !first.conn().Closed() || e.obs.Closed(pool.ReasonRemote) != 1 {
		t.Fatalf("dead connection: closed=%v, remote closes %d", first.conn().Closed(), e.obs.Closed(pool.ReasonRemote))
	}
}

// A connection found unusable at release is closed then, not left for the
// next request to find.
func TestUnusableAtReleaseIsClosedAtOnce(t *testing.T) {
	e := newEnv(t, cfg(), memconn.Config{})
	r := e.mustAcquire()
	r.conn().ClosePeer() // e.g. the response said Connection: close
	e.release(r)
	if !r.conn().Closed() || e.p.Stats().Open != 0 || e.obs.Closed(pool.ReasonRemote) != 1 {
		t.Fatalf("closed=%v stats %+v", r.conn().Closed(), e.p.Stats())
	}
}

// A connection that dies between being taken for a waiter and being handed
// over (here: a probe answered just before the peer left) is retired, and
// the waiter keeps its place at the head of the queue.
func TestDeadHandOffRequeuesTheWaiter(t *testing.T) {
	c := cfg()
	c.MaxConnections, c.Keepalive = 1, 15*time.Second
	e := newEnv(t, c, memconn.Config{PingLatency: time.Millisecond})
	e.release(e.mustAcquire())
	e.advanceTo(15 * time.Second) // probe sent; the h1 connection is busy with it
	first := e.d.Last()
	w1, w2 := e.acquire(), e.acquire()
	if w1.done || w2.done {
		t.Fatalf("a waiter was handed a connection under probe: %+v %+v", w1, w2)
	}
	first.ClosePeer() // after the probe's answer was decided
	e.advance(time.Millisecond)
	if !first.Closed() || e.obs.Closed(pool.ReasonRemote) != 1 {
		t.Fatalf("dead connection not retired: closed=%v", first.Closed())
	}
	if !granted(w1) || w1.conn() == first || w2.done {
		t.Fatalf("w1=%+v w2=%+v; want w1 served first by a new connection", w1, w2)
	}
	e.release(w1)
	if !granted(w2) {
		t.Fatalf("w2=%+v", w2)
	}
}

func TestDiscardClosesAfterTheLastStream(t *testing.T) {
	e := newEnv(t, cfg(), memconn.Config{Streams: 4})
	a, b := e.mustAcquire(), e.mustAcquire()
	a.lease.Discard()
	e.check()
	if a.conn().Closed() {
		t.Fatal("Discard closed a connection that still carries a stream")
	}
	if c := e.mustAcquire(); c.conn() == a.conn() {
		t.Fatal("a discarded connection took a new stream")
	}
	e.release(b)
	if !a.conn().Closed() || e.obs.Closed(pool.ReasonError) != 1 {
		t.Fatalf("closed=%v, error closes %d", a.conn().Closed(), e.obs.Closed(pool.ReasonError))
	}
}

func TestDoubleReleasePanics(t *testing.T) {
	e := newEnv(t, cfg(), memconn.Config{})
	r := e.mustAcquire()
	r.lease.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("second Release did not panic")
		}
	}()
	r.lease.Release()
}

func TestZeroLeaseIsInert(t *testing.T) {
	var l pool.Lease
	if l.Conn() != nil || l.Temporary() {
		t.Fatal("zero Lease has a connection")
	}
	l.Release()
	l.Discard()
}

// Free counts the connections with a free stream, without the lock: what
// a picker asks to prefer an endpoint whose request dials nothing.
func TestFreeCountsConnectionsReadyForAStream(t *testing.T) {
	e := newEnv(t, cfg(), memconn.Config{})
	if n := e.p.Free(); n != 0 {
		t.Fatalf("empty pool: Free %d", n)
	}
	a, b := e.mustAcquire(), e.mustAcquire()
	if n := e.p.Free(); n != 0 {
		t.Fatalf("both connections busy: Free %d", n)
	}
	e.release(a)
	if n := e.p.Free(); n != 1 {
		t.Fatalf("one released: Free %d, want 1", n)
	}
	e.release(b)
	if n := e.p.Free(); n != 2 {
		t.Fatalf("both released: Free %d, want 2", n)
	}
}

// A loop sees an endpoint through its own pool and its home loop's
// (pool.Ready, pool.Borrow): nothing held, all busy, or a stream ready —
// and only a ready stream of the home pool is borrowed.
func TestReadyAndBorrowFromTheHomePool(t *testing.T) {
	own, home := newEnv(t, cfg(), memconn.Config{}), newEnv(t, cfg(), memconn.Config{})
	if ready, held := pool.Ready(own.p, home.p); ready || held || own.p.Held() != 0 {
		t.Fatalf("nothing dialled: ready %v, held %v (Held %d)", ready, held, own.p.Held())
	}
	busy := home.mustAcquire()
	if ready, held := pool.Ready(own.p, home.p); ready || !held || home.p.Held() != 1 {
		t.Fatalf("the home pool's one connection busy: ready %v, held %v (Held %d), want busy", ready, held, home.p.Held())
	}
	if _, ok := pool.Borrow(own.p, home.p, false); ok {
		t.Fatal("borrowed from a home pool with no free stream")
	}
	home.release(busy)
	if ready, held := pool.Ready(own.p, home.p); !ready || !held {
		t.Fatalf("a free stream at home: ready %v, held %v", ready, held)
	}
	if ready, held := pool.Ready(own.p, nil); ready || held {
		t.Fatalf("own pool alone, empty: ready %v, held %v", ready, held)
	}
	l, ok := pool.Borrow(own.p, home.p, false)
	if !ok || l.Conn() != busy.lease.Conn() {
		t.Fatalf("Borrow = %v, %v; want the home pool's idle connection", l.Conn(), ok)
	}
	if _, ok := pool.Borrow(home.p, home.p, false); ok {
		t.Fatal("a pool borrowed from itself")
	}
	l.Release()
	home.check()
}

// A loop whose own pool holds nothing waits on the home loop's pool
// (pool.Share) while home dials a connection of unknown capacity or holds
// a multiplexed one; it keeps its own pool when home holds nothing, when
// home's connections carry one stream each, or once it holds one itself.
func TestShareWaitsOnTheHomePoolsMultiplexedConnection(t *testing.T) {
	c := cfg()
	own := newEnv(t, c, memconn.Config{Streams: 4, DialLatency: time.Millisecond})
	home := newEnv(t, c, memconn.Config{Streams: 4, DialLatency: time.Millisecond})
	if got := pool.Share(own.p, home.p); got != own.p {
		t.Fatal("home holds nothing: want own")
	}
	if got := pool.Share(own.p, nil); got != own.p {
		t.Fatal("no home: want own")
	}
	first := home.acquire() // home dials; its capacity is not known yet
	if got := pool.Share(own.p, home.p); got != home.p {
		t.Fatal("home's first dial in flight: want home")
	}
	waiter := &result{}
	pool.Share(own.p, home.p).AcquireAsync(func(l pool.Lease, err error) { waiter.done, waiter.lease, waiter.err = true, l, err })
	home.advance(time.Millisecond)
	if !granted(first) || !granted(waiter) || first.conn() != waiter.conn() {
		t.Fatalf("the dial served both requests on one connection: %+v %+v", first, waiter)
	}
	if got := pool.Share(own.p, home.p); got != home.p {
		t.Fatal("home holds a connection of 4 streams: want home")
	}
	home.release(first)
	home.release(waiter)
	mine := own.mustAcquireAfterDial(time.Millisecond)
	if got := pool.Share(own.p, home.p); got != own.p {
		t.Fatal("own holds a connection: want own")
	}
	own.release(mine)

	ownH1, homeH1 := newEnv(t, c, memconn.Config{}), newEnv(t, c, memconn.Config{})
	homeH1.release(homeH1.mustAcquire())
	if got := pool.Share(ownH1.p, homeH1.p); got != ownH1.p {
		t.Fatal("home's connections carry one stream each: want own")
	}
}

// slowClose is a memconn connection whose Close waits for release: the
// pool has forgotten the connection, but the origin still has it open.
type slowClose struct {
	*memconn.Conn
	closing chan struct{} // closed when Close starts
	release chan struct{}
	once    sync.Once
}

func (c *slowClose) Close() error {
	close(c.closing)
	<-c.release
	return c.Conn.Close()
}

func (c *slowClose) let() { c.once.Do(func() { close(c.release) }) }

type slowCloseDialer struct {
	d     *memconn.Dialer
	conns chan *slowClose
}

func (d *slowCloseDialer) Dial(addr string, done func(pool.Conn, error)) {
	d.d.Dial(addr, func(c pool.Conn, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		sc := &slowClose{Conn: c.(*memconn.Conn), closing: make(chan struct{}), release: make(chan struct{})}
		d.conns <- sc
		done(sc, nil)
	})
}

// A connection the pool closes keeps its place under MaxConnections until
// its Close has run: a waiter meanwhile gets no new dial (the origin would
// see one more than the cap open), and gets one as soon as the close is
// done.
func TestClosedConnectionHoldsItsSlotUntilItsCloseRan(t *testing.T) {
	c := cfg()
	c.MaxConnections = 1
	d := &slowCloseDialer{d: memconn.New(clock.Real(), memconn.Config{}), conns: make(chan *slowClose, 4)}
	p, err := pool.New(addr, 0, c, d, clock.Real(), rng.New(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	first, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sc := <-d.conns
	t.Cleanup(func() { // before p.Close: a failed check must not leave a Close waiting
		sc.let()
		for {
			select {
			case c := <-d.conns:
				c.let()
			default:
				return
			}
		}
	})
	go first.Discard() // blocks in Close until released
	<-sc.closing
	got := make(chan error, 1)
	p.AcquireAsync(func(l pool.Lease, err error) {
		if err == nil {
			l.Release()
		}
		got <- err
	})
	if n := d.d.Stats().Dials; n != 1 {
		t.Fatalf("%d dials while the first connection's Close had not run, want 1 (cap 1)", n)
	}
	sc.let()
	if err := <-got; err != nil {
		t.Fatalf("the waiter after the close: %v", err)
	}
	second := <-d.conns
	second.let()
	if s := d.d.Stats(); s.Dials != 2 || s.MaxOpen != 1 {
		t.Fatalf("dials %d, most open at once %d; want 2 and 1", s.Dials, s.MaxOpen)
	}
}
