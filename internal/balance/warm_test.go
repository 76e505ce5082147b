package balance

import (
	"testing"
	"time"
)

// Between endpoints that tie on latency and load, the one with a stream
// ready on the loop (NewWarmPicker) takes the request over those whose
// connections are all busy; endpoints that hold no connection at all are
// neutral, so they keep their share (a dead endpoint is still tried, and
// ejected); with no warm function the picks spread as before. Both
// policies that compare latency have the rule.
func TestWarmEndpointWinsATie(t *testing.T) {
	for _, pol := range []Policy{PeakEWMA, LeastWork} {
		t.Run(string(pol), func(t *testing.T) { testWarmEndpointWinsATie(t, pol) })
	}
}

func testWarmEndpointWinsATie(t *testing.T, pol Policy) {
	const n, endpoints = 4_000, 8
	cfg := policyConfig(pol)
	cfg.SlowStart.Window = 0
	ms := members(endpoints)
	f := newFixture(t, cfg, ms, 3)
	ready := ms[3].Address
	readyOnly := func(e *Endpoint) (bool, bool) { return e.Address() == ready, true }
	p := f.o.NewWarmPicker(nil, readyOnly)
	// The first pick of each endpoint has no latency to tie on yet.
	if got := shares(t, p, n, 15*time.Millisecond)[ready]; got < 0.99 {
		t.Errorf("the one endpoint with a stream ready got %.1f%% of tied picks, want all but the first few", 100*got)
	}
	p.Close()

	// Half the endpoints hold nothing: they are neutral, so each keeps
	// about its fair share; the busy half lose theirs to the ready one.
	empty := func(e *Endpoint) bool { return e.Address() >= ms[4].Address }
	p = f.o.NewWarmPicker(nil, func(e *Endpoint) (bool, bool) {
		return e.Address() == ready, !empty(e)
	})
	got := shares(t, p, n, 15*time.Millisecond)
	p.Close()
	for _, m := range ms[4:] {
		if s := got[m.Address]; s < 0.5/endpoints {
			t.Errorf("endpoint %s with no connection got %.1f%% of the picks, want about its fair %.1f%% (neutral)", m.Address, 100*s, 100.0/endpoints)
		}
	}
	for _, m := range ms[:4] {
		if s := got[m.Address]; m.Address != ready && s > 0.5/endpoints {
			t.Errorf("busy endpoint %s got %.1f%% of the picks, want little beside a ready one", m.Address, 100*s)
		}
	}

	p = f.o.NewPicker(nil)
	defer p.Close()
	if got := shares(t, p, n, 15*time.Millisecond)[ready]; got > 2.0/endpoints {
		t.Errorf("without a warm function one endpoint got %.1f%% of the picks, want about %.1f%%", 100*got, 100.0/endpoints)
	}
}
