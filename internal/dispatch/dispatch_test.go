package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/dispatch"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/rng"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPlaceIsRoundRobinWhenEqualAndTheLessBusyOfTwo: Place's rule, case by
// case: the rotation's loop and one drawn among the others; the one with
// fewer requests in flight wins, a tie keeps the rotation's.
func TestPlaceIsRoundRobinWhenEqualAndTheLessBusyOfTwo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inflight []int // per loop, before the Place
		skip     int   // Places made first (all loops idle): where the rotation stands
		draw     int   // what intn returns
		want     int
	}{
		{"one loop", []int{5}, 3, 0, 0},
		{"rotation's loop less busy", []int{0, 2, 2}, 0, 0, 0},
		{"drawn loop less busy", []int{2, 0, 0}, 0, 0, 1},
		{"drawn loop less busy, second draw", []int{2, 0, 0}, 0, 1, 2},
		{"tie keeps the rotation's", []int{1, 1, 0}, 0, 0, 0},
		{"rotation moved on", []int{0, 3, 0}, 1, 0, 2},
		{"rotation moved on, the draw wraps", []int{0, 3, 0}, 1, 1, 0},
		{"draw wraps around", []int{0, 0, 4}, 2, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.inflight)
			d := dispatch.New("o", n, nil, func(m int) int {
				if m != n-1 {
					t.Fatalf("intn(%d), want intn(%d): the draw is among the other loops", m, n-1)
				}
				return tc.draw
			})
			for range tc.skip {
				d.Place()
			}
			for l, k := range tc.inflight {
				for range k {
					d.Begin(l)
				}
			}
			if got := d.Place(); got != tc.want {
				t.Fatalf("Place() = %d, want %d", got, tc.want)
			}
			for l, k := range tc.inflight {
				if got := d.InFlight(l); got != int64(k) {
					t.Fatalf("loop %d: %d in flight after Place, want %d (Place counts nothing)", l, got, k)
				}
			}
		})
	}
}

// TestPlaceRoundRobinOverIdleLoops: with the loops equally busy, every
// draw loses to the rotation, which visits each loop in turn.
func TestPlaceRoundRobinOverIdleLoops(t *testing.T) {
	src := rng.New(7)
	d := dispatch.New("o", 4, nil, func(n int) int { return int(src.Uint64() % uint64(n)) })
	for i := range 12 {
		if got := d.Place(); got != i%4 {
			t.Fatalf("place %d: loop %d, want %d", i, got, i%4)
		}
	}
}

func TestBeginFinishCountInFlight(t *testing.T) {
	d := dispatch.New("o", 0, nil, nil) // at least one loop
	if d.Loops() != 1 {
		t.Fatalf("%d loops, want 1", d.Loops())
	}
	d.Begin(0)
	d.Begin(0)
	d.Finish(0)
	if got := d.InFlight(0); got != 1 {
		t.Fatalf("%d in flight, want 1", got)
	}
}

// loops is a dispatch.Pools of real pools over one in-memory origin per
// endpoint: loop l's pool for addr is at[l][addr]; Open makes one
// (unwarmed) for an address the origin has, as cluster.Origin does.
type loops struct {
	t       *testing.T
	clk     *clock.Fake
	at      []map[string]*pool.Pool
	dialers map[string]*memconn.Dialer
}

func newLoops(t *testing.T, n int) *loops {
	ls := &loops{t: t, clk: clock.NewFake(time.Unix(1000, 0)), dialers: map[string]*memconn.Dialer{}}
	for range n {
		ls.at = append(ls.at, map[string]*pool.Pool{})
	}
	t.Cleanup(func() {
		for _, m := range ls.at {
			for _, p := range m {
				p.Close()
			}
		}
	})
	return ls
}

// endpoint adds addr to the origin, served as cfg says.
func (ls *loops) endpoint(addr string, cfg memconn.Config) *memconn.Dialer {
	d := memconn.New(ls.clk, cfg)
	ls.dialers[addr] = d
	return d
}

// open gives loop l a pool for addr, pre-warming prewarm connections.
func (ls *loops) open(l int, addr string, prewarm int) *pool.Pool {
	ls.t.Helper()
	cfg := pool.DefaultConfig()
	cfg.Prewarm = prewarm
	cfg.AcquireTimeout = time.Hour // a wait ends by its context in these tests
	p, err := pool.New(addr, l, cfg, ls.dialers[addr], ls.clk, rng.New(uint64(l)), nil)
	if err != nil {
		ls.t.Fatal(err)
	}
	ls.at[l][addr] = p
	return p
}

func (ls *loops) Pool(l int, addr string) *pool.Pool { return ls.at[l][addr] }

func (ls *loops) Open(l int, addr string) (*pool.Pool, error) {
	if p, ok := ls.at[l][addr]; ok {
		return p, nil
	}
	if _, ok := ls.dialers[addr]; !ok {
		return nil, fmt.Errorf("%s is not an endpoint of the origin", addr)
	}
	return ls.open(l, addr, 0), nil
}

// The states a pool of a loop can be in for an endpoint, as the warm rule
// and Prepare see it.
const (
	none    = "none"    // the loop has no pool for it
	empty   = "empty"   // a pool with no connection
	dialing = "dialing" // a connection being dialled (held, not ready)
	free    = "free"    // an idle connection (a stream ready)
	busy    = "busy"    // its one connection's stream taken (held, not ready)
)

// setUp gives loop l a pool for addr in state, its connections single
// stream (HTTP/1.1) or not.
func (ls *loops) setUp(l int, addr, state string) *pool.Pool {
	ls.t.Helper()
	switch state {
	case none:
		return nil
	case empty:
		return ls.open(l, addr, 0)
	case dialing:
		// A dial that takes a second of the fake clock, which never moves.
		d := memconn.New(ls.clk, memconn.Config{DialLatency: time.Second})
		cfg := pool.DefaultConfig()
		cfg.Prewarm = 1
		p, err := pool.New(addr, l, cfg, d, ls.clk, rng.New(uint64(l)), nil)
		if err != nil {
			ls.t.Fatal(err)
		}
		ls.at[l][addr] = p
		return p
	case free:
		return ls.open(l, addr, 1)
	case busy:
		p := ls.open(l, addr, 1)
		lease, ok := p.TryAcquire(false)
		if !ok {
			ls.t.Fatal("no stream to take")
		}
		ls.t.Cleanup(lease.Release)
		return p
	}
	ls.t.Fatalf("unknown state %q", state)
	return nil
}

func TestWarmLooksAtTheOwnPoolThenTheHomeLoops(t *testing.T) {
	const addr = "10.0.0.1:80"
	for _, tc := range []struct {
		own, home   string
		ready, held bool
	}{
		{free, none, true, true},
		{free, busy, true, true},
		{busy, free, true, true},
		{none, free, true, true},
		{empty, free, true, true},
		{busy, none, false, true},
		{none, dialing, false, true},
		{empty, busy, false, true},
		{empty, empty, false, false},
		{none, none, false, false},
	} {
		t.Run(tc.own+"/home "+tc.home, func(t *testing.T) {
			ls := newLoops(t, 2)
			ls.endpoint(addr, memconn.Config{})
			ls.setUp(0, addr, tc.own)
			ls.setUp(1, addr, tc.home)
			d := dispatch.New("o", 2, ls, nil)
			d.SetHomes(map[string]int{addr: 1})
			ep := endpointOf(t, addr)
			ready, held := d.Warm(0)(ep)
			if ready != tc.ready || held != tc.held {
				t.Fatalf("warm = ready %v held %v, want %v %v", ready, held, tc.ready, tc.held)
			}
		})
	}
}

// TestWarmWithoutHomes: without homes (or on the home loop itself) only
// the loop's own pool counts.
func TestWarmWithoutHomes(t *testing.T) {
	const addr = "10.0.0.1:80"
	ls := newLoops(t, 2)
	ls.endpoint(addr, memconn.Config{})
	ls.setUp(1, addr, free)
	d := dispatch.New("o", 2, ls, nil)
	ep := endpointOf(t, addr)
	if ready, held := d.Warm(0)(ep); ready || held {
		t.Fatalf("no homes: loop 0 finds ready %v held %v of loop 1's pool", ready, held)
	}
	if d.Home(addr) != nil || d.Homes() != nil {
		t.Fatal("no homes set, yet Home/Homes answer")
	}
	d.SetHomes(map[string]int{addr: 1})
	if d.Home(addr) != ls.at[1][addr] || d.Home("10.9.9.9:80") != nil {
		t.Fatal("Home is not the home loop's pool, or answers for an endpoint without a home")
	}
	if ready, _ := d.Warm(1)(ep); !ready {
		t.Fatal("the home loop's own free stream is not ready")
	}
	d.SetHomes(nil)
	if d.Home(addr) != nil {
		t.Fatal("homes cleared, yet Home answers")
	}
}

// endpointOf is addr as a balancer knows it.
func endpointOf(t *testing.T, addr string) *balance.Endpoint {
	t.Helper()
	o := newBalancer(t, addr)
	return o.Endpoint(addr)
}

func newBalancer(t *testing.T, addrs ...string) *balance.Origin {
	t.Helper()
	oc := config.DefaultOrigin()
	var ms []balance.Member
	for _, a := range addrs {
		ms = append(ms, balance.Member{Address: a, Weight: 1})
	}
	o, err := balance.NewOrigin("o", balance.FromConfig(&oc), ms, balance.Options{Clock: clock.Real(), Rand: rng.New(1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	return o
}

// request is one request's Attempt on loop l of a driver over ls, its
// picker offering subset; retry.attempts is 1 (so the first attempt may
// take an idle connection unprobed).
type request struct {
	a   forward.Attempt
	pol forward.Policy
}

func newRequest(t *testing.T, d *dispatch.Driver, l int, subset ...string) *request {
	t.Helper()
	bal := newBalancer(t, subset...)
	pk := bal.NewWarmPicker(subset, d.Warm(l))
	t.Cleanup(pk.Close)
	oc := config.DefaultOrigin()
	r := &request{pol: forward.NewPolicy(oc.Retry, clock.Real(), nil)}
	r.a.Start(&r.pol, pk, forward.Replay{Resend: true}, 1, balance.Key{})
	t.Cleanup(r.a.Finish)
	return r
}

// settle ends an attempt that holds a stream, as an exchange that got a
// 200 does: the stream goes back.
func (r *request) settle(t *testing.T) {
	t.Helper()
	r.a.Respond(200, false)
	if step := r.a.Settle(); step != forward.Delivered {
		t.Fatalf("settle: %v", step)
	}
}

// TestPrepareBorrowsSharesOrAcquires: the pool an attempt's stream comes
// from, by the state of the loop's own pool and the home loop's.
func TestPrepareBorrowsSharesOrAcquires(t *testing.T) {
	const addr = "10.0.0.1:80"
	for _, tc := range []struct {
		name      string
		own, home string
		mux       bool
		step      forward.Step
		from      string // "own", "home", or "" for a stream borrowed at once
	}{
		{"own pool has a free stream", free, free, false, forward.Acquire, "own"},
		{"a free stream of the home loop is borrowed", busy, free, false, forward.Send, ""},
		{"borrowed before the own pool dials", empty, free, true, forward.Send, ""},
		{"nothing to borrow: the own pool", empty, busy, false, forward.Acquire, "own"},
		{"multiplexing: wait on the home loop's connection", empty, dialing, true, forward.Acquire, "home"},
		{"multiplexing, but the own pool holds one", busy, dialing, true, forward.Acquire, "own"},
		{"multiplexing, a single-stream home connection", empty, busy, true, forward.Acquire, "own"},
		{"no pool yet: opened on demand", none, busy, false, forward.Acquire, "own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := newLoops(t, 2)
			ls.endpoint(addr, memconn.Config{})
			own := ls.setUp(0, addr, tc.own)
			home := ls.setUp(1, addr, tc.home)
			d := dispatch.New("o", 2, ls, nil)
			d.SetMultiplexes(tc.mux)
			d.SetHomes(map[string]int{addr: 1})
			r := newRequest(t, d, 0, addr)
			homeFree := home.Free()
			step, p, _ := d.Prepare(&r.a, 0, true, nil)
			if step != tc.step {
				t.Fatalf("step %v, want %v", step, tc.step)
			}
			if own == nil {
				own = ls.at[0][addr]
			}
			switch tc.from {
			case "own":
				if p != own {
					t.Fatalf("acquires from %v, want the loop's own pool", p)
				}
			case "home":
				if p != home {
					t.Fatalf("acquires from %v, want the home loop's pool", p)
				}
			case "":
				if p != nil || r.a.Conn() == nil {
					t.Fatalf("pool %v conn %v, want a borrowed stream held", p, r.a.Conn())
				}
				if home.Free() != homeFree-1 {
					t.Fatalf("home has %d free streams, want %d: the stream is not the home loop's", home.Free(), homeFree-1)
				}
				r.settle(t)
				if home.Free() != homeFree {
					t.Fatalf("home has %d free streams after the exchange, want %d: the borrowed stream went elsewhere", home.Free(), homeFree)
				}
				return
			}
			// The caller acquires, as Acquire does, and the attempt sends.
			if tc.home == dialing && tc.from == "home" {
				return // the home loop's dial never ends on the frozen clock
			}
			lease, err := p.Acquire(context.Background())
			if step := r.a.Acquired(lease, err); step != forward.Send {
				t.Fatalf("acquired: %v %v", step, err)
			}
			r.settle(t)
		})
	}
}

// TestPrepareTrust: an attempt may take an idle connection unprobed only
// when the caller allows it and the Attempt does.
func TestPrepareTrust(t *testing.T) {
	const addr = "10.0.0.1:80"
	for _, mayTrust := range []bool{false, true} {
		ls := newLoops(t, 1)
		ls.endpoint(addr, memconn.Config{})
		ls.setUp(0, addr, free)
		d := dispatch.New("o", 1, ls, nil)
		r := newRequest(t, d, 0, addr)
		_, _, trust := d.Prepare(&r.a, 0, mayTrust, nil)
		if trust != mayTrust {
			t.Fatalf("mayTrust %v: trust %v", mayTrust, trust)
		}
	}
}

// TestPrepareAnswersWhatTheAttemptAnswers: a pick that finds no endpoint,
// and an endpoint without a pool, end the request with the Attempt's
// answer.
func TestPrepareAnswersWhatTheAttemptAnswers(t *testing.T) {
	ls := newLoops(t, 1)
	d := dispatch.New("o", 1, ls, nil)
	r := newRequest(t, d, 0) // an empty subset
	if step, p, _ := d.Prepare(&r.a, 0, true, nil); step != forward.Answer || p != nil || r.a.Reason() != forward.NoHealthy {
		t.Fatalf("no endpoint: %v %v %v, want an answer with no_healthy", step, p, r.a.Reason())
	}
	r = newRequest(t, d, 0, "10.0.0.2:80") // the driver's pools have no such endpoint
	if step, p, _ := d.Prepare(&r.a, 0, true, nil); step != forward.Answer || p != nil || r.a.Reason() != forward.NoHealthy {
		t.Fatalf("no pool: %v %v %v, want an answer with no_healthy", step, p, r.a.Reason())
	}
}

// TestAcquireSteps: Acquire's blocking acquisition and the steps it
// passes on.
func TestAcquireSteps(t *testing.T) {
	const addr = "10.0.0.1:80"
	t.Run("send", func(t *testing.T) {
		ls := newLoops(t, 1)
		ls.endpoint(addr, memconn.Config{Trusting: true})
		p := ls.setUp(0, addr, free)
		d := dispatch.New("o", 1, ls, nil)
		for _, mayTrust := range []bool{true, false} {
			r := newRequest(t, d, 0, addr)
			if step := d.Acquire(context.Background(), &r.a, 0, mayTrust, nil); step != forward.Send || r.a.Conn() == nil {
				t.Fatalf("mayTrust %v: %v, want a stream held", mayTrust, step)
			}
			if p.Free() != 0 {
				t.Fatal("the stream is not the loop's pool's")
			}
			r.settle(t)
		}
	})
	t.Run("client gone while waiting", func(t *testing.T) {
		ls := newLoops(t, 1)
		ls.endpoint(addr, memconn.Config{DialLatency: time.Second}) // never ends on the frozen clock
		ls.setUp(0, addr, empty)
		d := dispatch.New("o", 1, ls, nil)
		r := newRequest(t, d, 0, addr)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if step := d.Acquire(ctx, &r.a, 0, true, nil); step != forward.Gone {
			t.Fatalf("%v, want gone", step)
		}
	})
	t.Run("request timeout while waiting", func(t *testing.T) {
		ls := newLoops(t, 1)
		ls.endpoint(addr, memconn.Config{DialLatency: time.Second})
		ls.setUp(0, addr, empty)
		d := dispatch.New("o", 1, ls, nil)
		r := newRequest(t, d, 0, addr)
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
		defer cancel()
		if step := d.Acquire(ctx, &r.a, 0, true, nil); step != forward.Answer || r.a.Reason() != forward.UpstreamTimeout {
			t.Fatalf("%v %v, want an answer with upstream_timeout", step, r.a.Reason())
		}
	})
	t.Run("dial refused, nothing else to try", func(t *testing.T) {
		ls := newLoops(t, 1)
		ls.endpoint(addr, memconn.Config{}).SetDown(true)
		ls.setUp(0, addr, empty)
		d := dispatch.New("o", 1, ls, nil)
		r := newRequest(t, d, 0, addr)
		step := d.Acquire(context.Background(), &r.a, 0, true, nil)
		if step != forward.Again {
			t.Fatalf("%v, want again (retry.on connect-failure)", step)
		}
		if step := d.Acquire(context.Background(), &r.a, 0, true, nil); step != forward.Answer || r.a.Reason() != forward.ConnectFailed {
			t.Fatalf("%v %v, want an answer with connect_failed: the only endpoint was tried", step, r.a.Reason())
		}
	})
}
