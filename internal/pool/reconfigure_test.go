package pool_test

import (
	"testing"

	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
)

// Lowering max_connections retires only the connections above the cap:
// idle ones at once, least recently used first, a busy one when it comes
// back; raising it opens nothing by itself; the streams in use carry on.
func TestReconfigureLowersTheCapGently(t *testing.T) {
	c := cfg()
	c.MaxConnections = 4
	e := newEnv(t, c, memconn.Config{})
	rs := []*result{e.mustAcquire(), e.mustAcquire(), e.mustAcquire(), e.mustAcquire()}
	e.release(rs[0]) // idle, least recently used
	e.release(rs[1]) // idle
	// rs[2], rs[3] stay busy.
	low := c
	low.MaxConnections = 1
	if err := e.p.Reconfigure(low, nil); err != nil {
		t.Fatal(err)
	}
	if s := e.d.Stats(); s.Open != 2 || e.obs.Closed(pool.ReasonEviction) != 2 {
		t.Fatalf("after lowering the cap to 1: %d open, %d evicted; want the two idle ones closed, the busy ones open", s.Open, e.obs.Closed(pool.ReasonEviction))
	}
	e.release(rs[2])
	e.release(rs[3])
	if s := e.d.Stats(); s.Open != 1 || e.p.Stats().Idle != 1 || e.obs.Closed(pool.ReasonEviction) != 3 {
		t.Fatalf("once the busy ones came back: %d open, %d idle, %d evicted; want one kept at the cap", s.Open, e.p.Stats().Idle, e.obs.Closed(pool.ReasonEviction))
	}
	high := c
	high.MaxConnections = 8
	if err := e.p.Reconfigure(high, nil); err != nil {
		t.Fatal(err)
	}
	if s := e.d.Stats(); s.Created != 4 {
		t.Fatalf("raising the cap dialled: %d created, want still 4", s.Created)
	}
	// The new cap serves: two at once need a second connection now.
	a, b := e.mustAcquire(), e.mustAcquire()
	e.release(a)
	e.release(b)
	if s := e.d.Stats(); s.Created != 5 {
		t.Fatalf("under the raised cap: %d created, want 5", s.Created)
	}
}

// A new dialer serves the dials from then on; open connections stay.
func TestReconfigureSwapsTheDialer(t *testing.T) {
	e := newEnv(t, cfg(), memconn.Config{})
	first := e.mustAcquire()
	other := memconn.New(e.clk, memconn.Config{})
	if err := e.p.Reconfigure(cfg(), other); err != nil {
		t.Fatal(err)
	}
	second := e.mustAcquire() // the first is busy: a new dial
	if other.Stats().Created != 1 || e.d.Stats().Created != 1 || e.d.Stats().Open != 1 {
		t.Fatalf("new dialer created %d, old %d (open %d); want the new dial on the new dialer and the old connection kept",
			other.Stats().Created, e.d.Stats().Created, e.d.Stats().Open)
	}
	e.release(first)
	e.release(second)
	bad := cfg()
	bad.MaxConnections = 0
	if err := e.p.Reconfigure(bad, nil); err == nil {
		t.Fatal("an invalid config was applied")
	}
}
