package discovery

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/corput/corput/internal/clock"
)

// applied is one apply call as the test saw it.
type applied struct {
	at time.Duration // since epoch
	u  Update
}

func newTestDebouncer() (*Debouncer, *clock.Fake, *[]applied) {
	clk := clock.NewFake(epoch)
	var got []applied
	d := NewDebouncer(clk, func(u Update) { got = append(got, applied{clk.Now().Sub(epoch), u}) })
	return d, clk, &got
}

// member returns a distinct one-endpoint membership per n.
func member(n int) []Endpoint { return eps(fmt.Sprintf("10.0.%d.%d:80", n/250, n%250)) }

func TestDebounceFirstUpdateAppliesAtOnce(t *testing.T) {
	d, _, got := newTestDebouncer()
	defer d.Close()
	d.Offer(Update{Origin: "a", Endpoints: member(1)})
	if len(*got) != 1 || (*got)[0].at != 0 {
		t.Fatalf("first update: %v; want one apply at t=0", *got)
	}
}

func TestDebounceHundredChangesInOneWindowApplyOnce(t *testing.T) {
	d, clk, got := newTestDebouncer()
	defer d.Close()
	d.Offer(Update{Origin: "a", Endpoints: member(0)})
	*got = nil
	// 100 changes, 15 ms apart: all inside one 2 s window of each other.
	for i := 1; i <= 100; i++ {
		d.Offer(Update{Origin: "a", Endpoints: member(i)})
		clk.Advance(15 * time.Millisecond)
	}
	if len(*got) != 0 {
		t.Fatalf("applied %d updates while flapping; want none yet", len(*got))
	}
	last := 99 * 15 * time.Millisecond // the time of the 100th offer
	clk.Advance(time.Minute)
	if len(*got) != 1 {
		t.Fatalf("applied %d updates; want exactly 1", len(*got))
	}
	if a := (*got)[0]; a.at != last+DefaultDebounce || !slices.Equal(a.u.Endpoints, member(100)) {
		t.Fatalf("applied %v at %v; want the 100th membership at %v (a quiet window after it)", a.u.Endpoints, a.at, last+DefaultDebounce)
	}
}

func TestDebounceMaxWaitBoundsContinuousFlapping(t *testing.T) {
	d, clk, got := newTestDebouncer()
	defer d.Close()
	d.SetWindow("a", time.Second, 3*time.Second)
	d.Offer(Update{Origin: "a", Endpoints: member(0)})
	*got = nil
	// A change every 500 ms for 10 s never leaves a quiet second.
	for i := 1; i <= 20; i++ {
		d.Offer(Update{Origin: "a", Endpoints: member(i)})
		clk.Advance(500 * time.Millisecond)
	}
	// Pending since 0 → applied at 3 s (the 6th offer, made at 2.5 s,
	// is the latest); pending since 3.0 s → 6 s; since 6.0 s → 9 s.
	want := []applied{
		{3 * time.Second, Update{Origin: "a", Endpoints: member(6)}},
		{6 * time.Second, Update{Origin: "a", Endpoints: member(12)}},
		{9 * time.Second, Update{Origin: "a", Endpoints: member(18)}},
	}
	if len(*got) != len(want) {
		t.Fatalf("applied %v; want %v", *got, want)
	}
	for i := range want {
		if (*got)[i].at != want[i].at || !slices.Equal((*got)[i].u.Endpoints, want[i].u.Endpoints) {
			t.Fatalf("apply %d = %v at %v; want %v at %v", i, (*got)[i].u.Endpoints, (*got)[i].at, want[i].u.Endpoints, want[i].at)
		}
	}
}

func TestDebounceSkipsUpdateEqualToApplied(t *testing.T) {
	d, clk, got := newTestDebouncer()
	defer d.Close()
	d.Offer(Update{Origin: "a", Endpoints: eps("x:1", "y:1")})
	*got = nil
	d.Offer(Update{Origin: "a", Endpoints: eps("x:1")})
	d.Offer(Update{Origin: "a", Endpoints: eps("y:1", "x:1")}) // back where it was, other order
	clk.Advance(time.Minute)
	if len(*got) != 0 {
		t.Fatalf("a flap back to the applied membership applied %v", *got)
	}
	d.Offer(Update{Origin: "a", Endpoints: eps("y:1", "x:1")})
	clk.Advance(time.Minute)
	if len(*got) != 0 {
		t.Fatalf("re-offering the applied membership applied %v", *got)
	}
}

func TestDebounceOriginsAreIndependent(t *testing.T) {
	d, clk, got := newTestDebouncer()
	defer d.Close()
	d.SetWindow("b", 5*time.Second, 0)
	d.Offer(Update{Origin: "a", Endpoints: member(0)})
	d.Offer(Update{Origin: "b", Endpoints: member(0)})
	*got = nil
	d.Offer(Update{Origin: "a", Endpoints: member(1)})
	d.Offer(Update{Origin: "b", Endpoints: member(1)})
	clk.Advance(time.Minute)
	if len(*got) != 2 || (*got)[0].u.Origin != "a" || (*got)[0].at != 2*time.Second ||
		(*got)[1].u.Origin != "b" || (*got)[1].at != 5*time.Second {
		t.Fatalf("applied %v; want a at 2s (default window) and b at 5s", *got)
	}
}

func TestDebounceZeroWindowAppliesAtOnce(t *testing.T) {
	d, _, got := newTestDebouncer()
	defer d.Close()
	d.SetWindow("a", 0, 0)
	for i := range 3 {
		d.Offer(Update{Origin: "a", Endpoints: member(i)})
	}
	d.Offer(Update{Origin: "a", Endpoints: member(2)})
	if len(*got) != 3 {
		t.Fatalf("applied %d; want 3 (every distinct update, the repeat skipped)", len(*got))
	}
}

func TestDebounceCloseDropsPending(t *testing.T) {
	d, clk, got := newTestDebouncer()
	d.Offer(Update{Origin: "a", Endpoints: member(0)})
	d.Offer(Update{Origin: "a", Endpoints: member(1)})
	d.Close()
	if clk.Pending() != 0 {
		t.Fatalf("%d timers armed after Close", clk.Pending())
	}
	d.Offer(Update{Origin: "a", Endpoints: member(2)})
	clk.Advance(time.Minute)
	if len(*got) != 1 {
		t.Fatalf("applied %d after Close; want only the first update", len(*got))
	}
}

func TestDebounceApplyGetsItsOwnCopy(t *testing.T) {
	d, clk, got := newTestDebouncer()
	defer d.Close()
	d.Offer(Update{Origin: "a", Endpoints: eps("x:1")})
	(*got)[0].u.Endpoints[0].Address = "mutated:1"
	d.Offer(Update{Origin: "a", Endpoints: eps("x:1")})
	clk.Advance(time.Minute)
	if len(*got) != 1 {
		t.Fatal("a consumer's edit of its copy changed the debouncer's applied membership")
	}
}

func BenchmarkDebouncerOffer(b *testing.B) {
	clk := clock.NewFake(epoch)
	d := NewDebouncer(clk, func(Update) {})
	defer d.Close()
	sets := [2][]Endpoint{member(1), member(2)}
	d.Offer(Update{Origin: "a", Endpoints: sets[0]})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		d.Offer(Update{Origin: "a", Endpoints: sets[i&1]})
	}
}
