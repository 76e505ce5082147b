package pool_test

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/rng"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const addr = "10.0.0.1:443"

// cfg is DefaultConfig without pre-warming, so tests start from an empty
// pool; each test changes what it is about.
func cfg() pool.Config {
	c := pool.DefaultConfig()
	c.Prewarm = 0
	return c
}

// env is a pool over memconn on a fake clock, with a ledger of events.
type env struct {
	t   *testing.T
	clk *clock.Fake
	d   *memconn.Dialer
	obs *ledger
	p   *pool.Pool
}

func newEnv(t *testing.T, c pool.Config, mc memconn.Config) *env {
	t.Helper()
	clk := clock.NewFake(epoch)
	e := &env{t: t, clk: clk, d: memconn.New(clk, mc), obs: &ledger{clk: clk}}
	p, err := pool.New(addr, 3, c, e.d, clk, rng.New(42), e.obs)
	if err != nil {
		t.Fatal(err)
	}
	e.p = p
	t.Cleanup(func() {
		p.Close()
		e.check()
	})
	return e
}

// ledger is a Tally that also remembers when each close happened and each
// backoff drawn.
type ledger struct {
	pool.Tally
	clk *clock.Fake

	mu       sync.Mutex
	closes   []closeEvent
	backoffs []time.Duration
}

type closeEvent struct {
	at     time.Duration // since epoch
	reason pool.CloseReason
	temp   bool
}

func (l *ledger) ConnClosed(proto string, r pool.CloseReason, temp bool) {
	l.Tally.ConnClosed(proto, r, temp)
	l.mu.Lock()
	l.closes = append(l.closes, closeEvent{l.clk.Now().Sub(epoch), r, temp})
	l.mu.Unlock()
}

func (l *ledger) DialFailed(err error, backoff time.Duration) {
	l.Tally.DialFailed(err, backoff)
	l.mu.Lock()
	l.backoffs = append(l.backoffs, backoff)
	l.mu.Unlock()
}

// result is one AcquireAsync's outcome.
type result struct {
	done   bool
	lease  pool.Lease
	err    error
	at     time.Duration // when the callback ran, since epoch
	cancel func() bool
}

func (r *result) conn() *memconn.Conn {
	if r.lease.Conn() == nil {
		return nil
	}
	return r.lease.Conn().(*memconn.Conn)
}

// acquire starts an AcquireAsync and records its outcome.
func (e *env) acquire() *result {
	e.t.Helper()
	r := &result{}
	r.cancel = e.p.AcquireAsync(func(l pool.Lease, err error) {
		if r.done {
			e.t.Errorf("callback ran twice")
		}
		r.done, r.lease, r.err, r.at = true, l, err, e.clk.Now().Sub(epoch)
	})
	e.check()
	return r
}

// mustAcquire acquires and requires a stream at once.
func (e *env) mustAcquire() *result {
	e.t.Helper()
	r := e.acquire()
	if !r.done || r.err != nil {
		e.t.Fatalf("acquire: done=%v err=%v, want a stream at once", r.done, r.err)
	}
	return r
}

func (e *env) release(r *result) {
	e.t.Helper()
	r.lease.Release()
	e.check()
}

func (e *env) advance(d time.Duration) {
	e.t.Helper()
	e.clk.Advance(d)
	e.check()
}

// advanceTo moves the clock to epoch+at.
func (e *env) advanceTo(at time.Duration) {
	e.t.Helper()
	e.clk.AdvanceTo(epoch.Add(at))
	e.check()
}

func (e *env) check() {
	e.t.Helper()
	if err := e.p.CheckInvariants(); err != nil {
		e.t.Fatalf("invariant broken: %v", err)
	}
}

func count(rs []*result, pred func(*result) bool) int {
	n := 0
	for _, r := range rs {
		if pred(r) {
			n++
		}
	}
	return n
}

func granted(r *result) bool { return r.done && r.err == nil }

// mustAcquireAfterDial acquires from a pool with nothing free: the request
// dials, and is served dial later.
func (e *env) mustAcquireAfterDial(dial time.Duration) *result {
	e.t.Helper()
	r := e.acquire()
	e.advance(dial)
	if !granted(r) {
		e.t.Fatalf("acquire: done=%v err=%v, want a new connection after %v", r.done, r.err, dial)
	}
	return r
}
