package pool_test

import (
	"errors"
	"testing"
	"time"

	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
)

// A waiter that a dial in flight covers waits for it past acquire_timeout:
// 15 requests, 10 streams per connection, dials of 300 ms (3× the acquire
// timeout). The first 10 get the first connection, the other 5 the
// second, dialled when the first told its capacity: no request fails, and
// 2 connections serve 15.
func TestWaitersCoveredByADialOutwaitAcquireTimeout(t *testing.T) {
	c := cfg()
	c.AcquireTimeout = 100 * time.Millisecond
	e := newEnv(t, c, memconn.Config{Streams: 10, DialLatency: 300 * time.Millisecond})
	var rs []*result
	for range 15 {
		rs = append(rs, e.acquire())
	}
	e.advanceTo(299 * time.Millisecond)
	if n := count(rs, func(r *result) bool { return r.done }); n != 0 {
		t.Fatalf("%d settled before the first dial finished, want 0", n)
	}
	e.advanceTo(300 * time.Millisecond)
	if n := count(rs, granted); n != 10 {
		t.Fatalf("%d granted by the first connection, want 10", n)
	}
	e.advanceTo(600 * time.Millisecond)
	if n := count(rs, granted); n != 15 {
		for _, r := range rs {
			if r.err != nil {
				t.Errorf("at %v: %v", r.at, r.err)
			}
		}
		t.Fatalf("%d of 15 granted, want all", n)
	}
	if s := e.d.Stats(); s.Dials != 2 || s.Created != 2 {
		t.Fatalf("%d dials, %d connections; want 2 and 2", s.Dials, s.Created)
	}
}

// A waiter no dial covers (the pool is at max_connections) times out
// acquire_timeout after the pool knew it: the first connection's arrival.
func TestWaitersAtTheCapTimeOutFromWhenNoDialCoversThem(t *testing.T) {
	c := cfg()
	c.MaxConnections, c.AcquireTimeout = 1, 100*time.Millisecond
	e := newEnv(t, c, memconn.Config{Streams: 10, DialLatency: 300 * time.Millisecond})
	var rs []*result
	for range 15 {
		rs = append(rs, e.acquire())
	}
	e.advanceTo(400*time.Millisecond - 1)
	if n := count(rs, func(r *result) bool { return r.err != nil }); n != 0 {
		t.Fatalf("%d failed before 400 ms, want 0", n)
	}
	e.advanceTo(400 * time.Millisecond)
	late := count(rs, func(r *result) bool {
		return errors.Is(r.err, pool.ErrAcquireTimeout) && r.at == 400*time.Millisecond
	})
	if late != 5 || count(rs, granted) != 10 {
		t.Fatalf("%d timed out at 400 ms and %d granted; want 5 and 10", late, count(rs, granted))
	}
}

// Requests that arrive one by one, 10 ms apart, on 10-stream connections
// whose dial takes 40 ms: the pool dials the next connection when the
// spare streams fall under half a connection, so every request finds a
// free stream at once, and 25 requests open ceil(25/10) = 3 connections,
// not more (the last is half full: no dial ahead of it).
func TestMultiplexedPoolDialsTheNextConnectionAhead(t *testing.T) {
	c := cfg()
	e := newEnv(t, c, memconn.Config{Streams: 10, DialLatency: 40 * time.Millisecond})
	r := e.acquire() // the cold pool's first dial: nothing to be ahead of
	e.advance(40 * time.Millisecond)
	if !granted(r) {
		t.Fatalf("first request: %+v", r)
	}
	for i := 2; i <= 25; i++ {
		e.advance(10 * time.Millisecond)
		e.mustAcquire()
		if i == 5 && e.d.Stats().Dials != 1 {
			t.Fatalf("a second dial with 5 of 10 streams free")
		}
		if i == 6 && e.d.Stats().Dials != 2 {
			t.Fatalf("no second dial with 4 of 10 streams free")
		}
	}
	e.advance(time.Second)
	if s := e.d.Stats(); s.Dials != 3 || s.Created != 3 {
		t.Fatalf("%d dials, %d connections for 25 streams; want 3 and 3", s.Dials, s.Created)
	}
	if st := e.p.Stats(); st.Busy != 25 || st.Capacity != 30 {
		t.Fatalf("stats %+v, want 25 busy of 30", st)
	}
}

// An idle multiplexed pool does not dial ahead: the headroom is kept only
// while streams are being taken.
func TestIdleMultiplexedPoolDoesNotDialAhead(t *testing.T) {
	c := cfg()
	c.IdleTimeout = time.Second
	e := newEnv(t, c, memconn.Config{Streams: 10})
	var rs []*result
	for range 9 {
		rs = append(rs, e.mustAcquire())
	}
	if d := e.d.Stats().Dials; d != 2 {
		t.Fatalf("9 of 10 streams in use: %d dials, want 2 (one ahead)", d)
	}
	for _, r := range rs {
		e.release(r)
	}
	e.advance(time.Minute)
	if s := e.d.Stats(); s.Dials != 2 || e.p.Stats().Open != 0 {
		t.Fatalf("after idling out: %d dials, %d open; want 2 and 0", s.Dials, e.p.Stats().Open)
	}
}
