package balance

import (
	"testing"
	"time"
)

// Reconfigure changes the policy and thresholds in place: an ejected
// endpoint stays ejected with its clock, latency estimates and in-flight
// counts carry over, the new policy picks at once, and an invalid config
// changes nothing.
func TestReconfigureKeepsEndpointState(t *testing.T) {
	ms := members(5)
	cfg := DefaultConfig()
	cfg.SlowStart.Window = 0
	f := newFixture(t, cfg, ms, 3)
	p := f.o.NewPicker(nil)
	defer p.Close()
	bad := f.o.Endpoint(ms[0].Address)
	for range 3 {
		bad.active.Add(1)
		bad.Done(time.Millisecond, ServerError)
	}
	slow := f.o.Endpoint(ms[1].Address)
	slow.active.Add(1)
	slow.Done(500*time.Millisecond, Success)
	before := slow.Status().EWMALatency
	held := f.o.Endpoint(ms[2].Address)
	held.active.Add(1) // a request in flight across the change

	rr := cfg
	rr.Policy = RoundRobin
	if err := f.o.Reconfigure(rr); err != nil {
		t.Fatal(err)
	}
	if st := bad.Status(); !st.Ejected || f.o.Ejected() != 1 {
		t.Fatalf("after Reconfigure the ejected endpoint is %+v, %d ejected", st, f.o.Ejected())
	}
	if got := slow.Status().EWMALatency; got != before {
		t.Errorf("latency estimate %v after Reconfigure, was %v", got, before)
	}
	if held.Active() != 1 {
		t.Errorf("in-flight count %d after Reconfigure, want 1", held.Active())
	}
	if st := f.o.Status(); st.Policy != RoundRobin {
		t.Errorf("policy %s after Reconfigure, want round_robin", st.Policy)
	}
	// Round robin over the four in service: each exactly twice in 8 picks.
	n := map[string]int{}
	for range 8 {
		ep, err := p.Pick()
		if err != nil {
			t.Fatal(err)
		}
		n[ep.Address()]++
		ep.Done(0, Shed)
	}
	for _, m := range ms[1:] {
		if n[m.Address] != 2 {
			t.Fatalf("round robin after Reconfigure: %v, want every endpoint in service twice", n)
		}
	}
	invalid := rr
	invalid.Choices = 0
	if err := f.o.Reconfigure(invalid); err == nil || f.o.Status().Policy != RoundRobin {
		t.Fatalf("an invalid config: %v, policy %s; want an error and nothing changed", err, f.o.Status().Policy)
	}
	held.Done(time.Millisecond, Success)
}
