package balance

import (
	"testing"
	"time"
)

// Between endpoints that tie on latency and load, the one with a
// connection ready on the loop (Picker.SetWarm) takes the request; with
// no warm function the picks spread as before.
func TestWarmEndpointWinsATie(t *testing.T) {
	const n, endpoints = 4_000, 8
	cfg := DefaultConfig()
	cfg.SlowStart.Window = 0
	ms := members(endpoints)
	f := newFixture(t, cfg, ms, 3)
	p := f.o.NewPicker(nil)
	defer p.Close()
	ready := ms[3].Address
	p.SetWarm(func(e *Endpoint) bool { return e.Address() == ready })
	// The first pick of each endpoint has no latency to tie on yet.
	if got := shares(t, p, n, 15*time.Millisecond)[ready]; got < 0.99 {
		t.Errorf("the one endpoint with a ready connection got %.1f%% of tied picks, want all but the first few", 100*got)
	}
	p.SetWarm(nil)
	if got := shares(t, p, n, 15*time.Millisecond)[ready]; got > 2.0/endpoints {
		t.Errorf("without a warm function one endpoint got %.1f%% of the picks, want about %.1f%%", 100*got, 100.0/endpoints)
	}
}
