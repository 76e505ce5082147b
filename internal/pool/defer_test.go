package pool_test

import (
	"testing"
	"time"

	"github.com/corput/corput/internal/pool/memconn"
)

// An HTTP/1.1 request that finds every connection busy waits one dial
// time (the pool's moving average of its dials, at most a tenth of the
// acquire timeout) for a release before its dial starts: a release within
// it serves the request and no connection is opened; without one, the
// dial starts at the end of the wait, and the request's acquire timeout
// does not run meanwhile (it waits as a dialled waiter does: here the
// timeout would have failed it at 100 ms, and it is served at 105 ms). A
// pool that holds no connection dials at once.
func TestHTTP1DialIsDeferredOneDialTime(t *testing.T) {
	const dial = 95 * time.Millisecond
	c := cfg()
	c.AcquireTimeout = 100 * time.Millisecond // shorter than the wait plus the dial: it must not run
	const wait = 10 * time.Millisecond        // min(dial, acquire timeout / 10)
	e := newEnv(t, c, memconn.Config{DialLatency: dial})

	// Empty pool: the first request dials at once (nothing to release).
	first := e.acquire()
	e.advance(dial)
	if !granted(first) || first.at != dial {
		t.Fatalf("first request: done %v at %v, want a stream at %v (a dial at once)", first.done, first.at, dial)
	}

	// All busy, and a release 4 ms later: served by it, nothing dialled.
	second := e.acquire()
	e.advance(4 * time.Millisecond)
	if second.done {
		t.Fatalf("second request served at %v before any release", second.at)
	}
	e.release(first)
	if !granted(second) || second.at != dial+4*time.Millisecond {
		t.Fatalf("second request: done %v at %v, want the released stream at %v", second.done, second.at, dial+4*time.Millisecond)
	}
	e.advance(2 * dial)
	if got := e.obs.Created(); got != 1 {
		t.Fatalf("%d connections created, want 1: the release served the waiter, its deferred dial must not start", got)
	}

	// All busy, no release: the dial starts one wait after the request
	// came, and it is served when the dial completes.
	at := e.clk.Now().Sub(epoch)
	third := e.acquire()
	e.advance(wait - time.Millisecond)
	if got := e.obs.Created(); got != 1 || third.done {
		t.Fatalf("before the wait is over: %d created, served %v; want 1 and not yet", got, third.done)
	}
	e.advance(time.Millisecond + dial)
	if !granted(third) || third.at != at+wait+dial {
		t.Fatalf("third request: done %v err %v at %v, want a new connection at %v (the wait, then the dial)", third.done, third.err, third.at, at+wait+dial)
	}
	if got := e.obs.Created(); got != 2 {
		t.Fatalf("%d connections created, want 2", got)
	}
	e.release(second)
	e.release(third)
}

// While a pool's dials fail there is no deferral: a deferred waiter counts
// as covered, and in a reconnect backoff its acquire timeout would start
// only once its wait was over (internal/drill TestCrash lost requests
// while the crashed endpoint's pool deferred). Its acquire timeout runs
// from when it came.
func TestNoDeferralWhileDialsFail(t *testing.T) {
	const dial = 10 * time.Millisecond
	c := cfg()
	c.AcquireTimeout = 100 * time.Millisecond
	c.BackoffBase, c.BackoffMax = 10*time.Second, 10*time.Second
	e := newEnv(t, c, memconn.Config{DialLatency: dial})
	first := e.acquire()
	e.advance(dial)
	if !granted(first) {
		t.Fatal("first request not served")
	}
	// The second request's dial fails and a backoff starts; the first's
	// release then serves the second.
	e.d.FailNext(1)
	second := e.acquire()
	e.advance(3 * dial)
	e.release(first)
	if !granted(second) {
		t.Fatalf("second request: done %v err %v, want the released stream", second.done, second.err)
	}
	// A request during the backoff, every connection busy.
	third := e.acquire()
	e.advance(c.AcquireTimeout)
	if !third.done || third.err == nil {
		t.Fatalf("a request during the backoff: done %v err %v, want failed by its acquire timeout %v after it came (a deferral would have started it later)", third.done, third.err, c.AcquireTimeout)
	}
	e.release(second)
}

// A waiter that releases should serve before a dial would finish (one of
// the first healthy × dial time / hold time waiters: the releases the
// pool's moving averages expect within one dial time) waits for one up to
// the deferral's limit, a tenth of the acquire timeout, not one dial time:
// when no release comes that soon, the gateway, not the pool, is short
// (a stall on a loaded machine), and a dial would only add a connection.
// A waiter beyond them waits one dial time, as before.
func TestHTTP1DialWaitsForAReleaseDueSooner(t *testing.T) {
	const (
		dial  = 5 * time.Millisecond
		limit = 10 * time.Millisecond // acquire timeout / 10
		ms    = time.Millisecond
	)
	c := cfg()
	c.AcquireTimeout = 10 * limit
	e := newEnv(t, c, memconn.Config{DialLatency: dial})

	// Dial time 5 ms; held 4 ms: a release is due every 4 ms, so of the
	// waiters on one connection the first (1 × 5 / 4) waits for it.
	first := e.mustAcquireAfterDial(dial)
	e.advance(4 * ms)
	e.release(first) // t = 9 ms
	a := e.mustAcquire()
	b := e.acquire()  // waits for a's release, up to the limit
	cw := e.acquire() // beyond: its dial starts one dial time from now
	e.advance(dial)   // t = 14 ms: cw's dial starts, b's does not
	e.advance(ms)
	e.release(a) // t = 15 ms: serves b
	if !granted(b) || b.at != 15*ms || b.conn() != a.conn() {
		t.Fatalf("b: done %v err %v at %v, want a's released connection at 15ms", b.done, b.err, b.at)
	}
	e.advance(4 * ms) // t = 19 ms: cw's dial is done
	if !granted(cw) || cw.at != 19*ms {
		t.Fatalf("cw: done %v err %v at %v, want a new connection at 19ms (its dial one dial time after it came)", cw.done, cw.err, cw.at)
	}
	if got := e.obs.Created(); got != 2 {
		t.Fatalf("%d connections created, want 2: b's dial must not have started, a release was due sooner than a dial", got)
	}

	// No release comes: the head waiter's dial starts at the limit.
	// Two connections held about 4 ms each: 2 × 5 / 4.25 → the first 2
	// waiters wait for a release.
	d := e.acquire()
	e.advance(limit - ms) // t = 28 ms
	if got := e.obs.Created(); got != 2 || d.done {
		t.Fatalf("before the limit: %d created, d served %v; want 2 and not yet", got, d.done)
	}
	e.advance(ms + dial) // t = 34 ms
	if !granted(d) || d.at != 34*ms {
		t.Fatalf("d: done %v err %v at %v, want a new connection at 34ms (the limit, then the dial)", d.done, d.err, d.at)
	}
	e.release(b)
	e.release(cw)
	e.release(d)
}
