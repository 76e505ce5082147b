package balance

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestAdmissionBound(t *testing.T) {
	f := newFixture(t, DefaultConfig(), members(1), 51)
	ep := f.o.Endpoints()[0]
	for i := range 50 {
		if !ep.TryAdmit() {
			t.Fatalf("admission %d refused below the bound of 50", i+1)
		}
	}
	if ep.TryAdmit() {
		t.Fatal("51st request admitted")
	}
	if ep.Pending() != 50 {
		t.Fatalf("pending %d, want 50", ep.Pending())
	}
	ep.Release()
	if !ep.TryAdmit() {
		t.Fatal("refused after a release")
	}
	var se *ShedError
	if !errors.As(ErrPendingFull, &se) || se.Reason != "pending_full" {
		t.Fatalf("ErrPendingFull reason %q", se.Reason)
	}
}

// TestAdmissionBoundUnderContention: goroutines racing for 5 slots never
// hold more than 5 at once.
func TestAdmissionBoundUnderContention(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxPending = 5
	f := newFixture(t, cfg, members(1), 52)
	ep := f.o.Endpoints()[0]
	var held, peak, refused atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				if !ep.TryAdmit() {
					refused.Add(1)
					continue
				}
				n := held.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				held.Add(-1)
				ep.Release()
			}
		})
	}
	wg.Wait()
	if peak.Load() > 5 {
		t.Fatalf("%d held at once, bound is 5", peak.Load())
	}
	if ep.Pending() != 0 {
		t.Fatalf("pending %d after all released", ep.Pending())
	}
	t.Logf("peak %d, refused %d", peak.Load(), refused.Load())
}
