package memconn_test

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type dialResult struct {
	conn *memconn.Conn
	err  error
	at   time.Duration
}

func dial(clk *clock.Fake, d *memconn.Dialer) *dialResult {
	r := &dialResult{at: -1}
	d.Dial("x", func(c pool.Conn, err error) {
		r.err, r.at = err, clk.Now().Sub(epoch)
		if c != nil {
			r.conn = c.(*memconn.Conn)
		}
	})
	return r
}

func TestDialLatencyAndDefaults(t *testing.T) {
	clk := clock.NewFake(epoch)
	d := memconn.New(clk, memconn.Config{DialLatency: 3 * time.Millisecond})
	r := dial(clk, d)
	clk.Advance(3*time.Millisecond - 1)
	if r.at >= 0 {
		t.Fatal("dial finished early")
	}
	clk.Advance(1)
	if r.err != nil || r.at != 3*time.Millisecond {
		t.Fatalf("dial: %+v", r)
	}
	c := r.conn
	if c.ID() != 1 || c.Streams() != 1 || c.Protocol() != "h1" || !c.Usable() || d.Last() != c {
		t.Fatalf("conn: id %d streams %d proto %s usable %v", c.ID(), c.Streams(), c.Protocol(), c.Usable())
	}
	if h2 := memconn.New(clk, memconn.Config{Streams: 100}); dial(clk, h2).conn.Protocol() != "h2" {
		t.Fatal("a multi-stream origin is not h2 by default")
	}
	c.SetStreams(0)
	if c.Streams() != 0 {
		t.Fatal("SetStreams ignored")
	}
}

func TestFailuresDownAndBlackhole(t *testing.T) {
	clk := clock.NewFake(epoch)
	d := memconn.New(clk, memconn.Config{DialTimeout: time.Second})
	d.FailNext(2)
	for range 2 {
		if r := dial(clk, d); !errors.Is(r.err, memconn.ErrInjected) {
			t.Fatalf("injected failure: %+v", r)
		}
	}
	up := dial(clk, d)
	if up.err != nil {
		t.Fatal(up.err)
	}
	d.SetDown(true)
	if r := dial(clk, d); !errors.Is(r.err, memconn.ErrRefused) {
		t.Fatalf("down origin: %+v", r)
	}
	if up.conn.Usable() {
		t.Fatal("a connection to a down origin is usable")
	}
	d.SetDown(false)
	d.SetBlackhole(true)
	r := dial(clk, d)
	clk.Advance(time.Second - 1)
	if r.at >= 0 {
		t.Fatal("blackholed dial finished before DialTimeout")
	}
	clk.Advance(1)
	if !errors.Is(r.err, memconn.ErrDialTimeout) {
		t.Fatalf("blackholed dial: %+v", r)
	}
	if !up.conn.Usable() {
		t.Fatal("a blackhole made a connection look closed; only a probe can tell")
	}
	if s := d.Stats(); s.Dials != 5 || s.Created != 1 || s.Failed != 4 || s.Open != 1 || s.MaxOpen != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestPing(t *testing.T) {
	clk := clock.NewFake(epoch)
	d := memconn.New(clk, memconn.Config{PingLatency: 10 * time.Millisecond})
	c := dial(clk, d).conn
	var got []error
	var at []time.Duration
	ping := func(timeout time.Duration) {
		c.Ping(timeout, func(err error) { got, at = append(got, err), append(at, clk.Now().Sub(epoch)) })
	}
	ping(time.Second) // answered after the latency
	clk.Advance(time.Second)
	ping(5 * time.Millisecond) // slower than the timeout
	clk.Advance(time.Second)
	c.Blackhole()
	ping(time.Second) // silent
	clk.Advance(time.Second)
	c.ClosePeer()
	ping(time.Second) // gone: fails at once
	want := []error{nil, memconn.ErrPingTimeout, memconn.ErrPingTimeout, memconn.ErrPeerClosed}
	wantAt := []time.Duration{10 * time.Millisecond, 1005 * time.Millisecond, 3 * time.Second, 3 * time.Second}
	for i := range want {
		if i >= len(got) || !errors.Is(got[i], want[i]) || at[i] != wantAt[i] {
			t.Fatalf("probes: %v at %v; want %v at %v", got, at, want, wantAt)
		}
	}
	if c.Pings() != 4 || c.Usable() {
		t.Fatalf("pings %d, usable %v", c.Pings(), c.Usable())
	}
}

func TestCloseCountsOnce(t *testing.T) {
	clk := clock.NewFake(epoch)
	d := memconn.New(clk, memconn.Config{})
	a, b := dial(clk, d).conn, dial(clk, d).conn
	a.Close()
	a.Close()
	if !a.Closed() || a.Usable() || b.Closed() {
		t.Fatal("Close state wrong")
	}
	if s := d.Stats(); s.Open != 1 || s.MaxOpen != 2 {
		t.Fatalf("stats %+v, want 1 open of at most 2", s)
	}
}

// The simulator opens up to ~10^6 connections: a dial must stay small.
func BenchmarkDialClose(b *testing.B) {
	d := memconn.New(clock.NewFake(epoch), memconn.Config{})
	var c pool.Conn
	done := func(got pool.Conn, _ error) { c = got }
	b.ReportAllocs()
	for b.Loop() {
		d.Dial("x", done)
		c.Close()
	}
}
