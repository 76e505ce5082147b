package balance

import (
	"errors"
	"testing"
	"time"
)

// A retry after a failure that sent nothing must go to an endpoint the
// request has not tried. The endpoints that just failed fast are the ones
// Peak EWMA likes best (no new latency, no requests in flight), so the
// policy's own choice keeps landing on them; PickAvoiding still never
// returns one while another candidate is left, and says so when none is.
func TestPickAvoidingNeverReturnsATriedEndpoint(t *testing.T) {
	for _, policy := range Policies() {
		t.Run(string(policy), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Policy = policy
			ms := members(6)
			f := newFixture(t, cfg, ms, 7)
			p := f.o.NewPicker(nil)
			defer p.Close()
			// Load every endpoint but the two that failed: those are
			// the cheapest by far.
			var held []*Endpoint
			for range 60 {
				ep, err := p.Pick()
				if err != nil {
					t.Fatal(err)
				}
				ep.Done(20*time.Millisecond, Success)
				if a := ep.Address(); a != ms[0].Address && a != ms[1].Address {
					ep.active.Add(1)
					held = append(held, ep)
				}
			}
			avoid := []*Endpoint{f.o.Endpoint(ms[0].Address), f.o.Endpoint(ms[1].Address)}
			seen := map[string]int{}
			for range 500 {
				ep, err := p.PickAvoiding(avoid)
				if err != nil {
					t.Fatal(err)
				}
				if ep == avoid[0] || ep == avoid[1] {
					t.Fatalf("PickAvoiding returned the tried endpoint %s", ep.Address())
				}
				seen[ep.Address()]++
				ep.Done(0, Shed)
			}
			if len(seen) != 4 {
				t.Errorf("PickAvoiding chose among %v, want the 4 untried endpoints", seen)
			}
			for _, ep := range held {
				ep.Done(0, Shed)
			}
			for _, e := range f.o.Endpoints() {
				if a := e.Active(); a != 0 {
					t.Errorf("%s: %d active after every pick was done: PickAvoiding counted a rejected draw", e.Address(), a)
				}
			}

			all := f.o.Endpoints()
			if ep, err := p.PickAvoiding(all); !errors.Is(err, ErrAllTried) || ep != nil {
				t.Fatalf("every endpoint avoided: got %v, %v; want ErrAllTried", ep, err)
			}
			if ep, err := p.PickAvoiding(all[1:]); err != nil || ep != all[0] {
				t.Fatalf("one endpoint left: got %v, %v; want %s", ep, err, all[0].Address())
			} else {
				ep.Done(0, Shed)
			}
		})
	}
}

func TestPickAvoidingAllocatesNothing(t *testing.T) {
	ms := members(6)
	f := newFixture(t, DefaultConfig(), ms, 3)
	p := f.o.NewPicker(nil)
	defer p.Close()
	avoid := []*Endpoint{f.o.Endpoint(ms[0].Address), f.o.Endpoint(ms[1].Address)}
	if n := testing.AllocsPerRun(200, func() {
		ep, err := p.PickAvoiding(avoid)
		if err != nil {
			t.Fatal(err)
		}
		ep.Done(0, Shed)
	}); n != 0 {
		t.Fatalf("PickAvoiding allocates %v times per call, want 0", n)
	}
}
