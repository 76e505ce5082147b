package slo

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeBalancer is the guard's view of a balancer: zone latencies set by the
// test, and the zone it was told to penalize.
type fakeBalancer struct {
	mu        sync.Mutex
	lat       map[string]time.Duration
	penalized string
	calls     int
}

func (b *fakeBalancer) ZoneLatencies() map[string]time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]time.Duration{}
	for z, d := range b.lat {
		out[z] = d
	}
	return out
}

func (b *fakeBalancer) PenalizeZone(z string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.penalized = z
	b.calls++
}

var epoch = time.Unix(1_700_000_000, 0)

// TestGuardHysteresis: a class over its budget engages the guard after
// EnterAfter ticks (not before), sheds low priority and penalizes the
// slowest zone; it stays engaged while the p99 is between 0.8× and 1×
// the budget, and leaves after LeaveAfter ticks under 0.8×; the zone stays
// penalized while it is ZoneRatio slower than the others, and is lifted
// once it is not.
func TestGuardHysteresis(t *testing.T) {
	clk := clock.NewFake(epoch)
	bal := &fakeBalancer{lat: map[string]time.Duration{"a": 20 * time.Millisecond, "b": 21 * time.Millisecond, "c": 60 * time.Millisecond}}
	m := NewMonitor("pay", Config{Heavy: -1, Classes: []Class{{Name: "light", P99: 20 * time.Millisecond}, {Name: "heavy"}}}, clk, bal, nil)
	defer m.Close()
	second := func(d time.Duration) {
		for range 200 {
			m.Record(0, d)
			m.Record(1, 10*d)
		}
		clk.Advance(Tick)
	}
	for range 10 {
		second(10 * time.Millisecond)
	}
	if m.ShedLow() || bal.penalized != "" {
		t.Fatal("guard engaged under budget")
	}
	for i := 1; i <= EnterAfter; i++ {
		second(30 * time.Millisecond)
		if got, want := m.ShedLow(), i == EnterAfter; got != want {
			t.Fatalf("after %d ticks over budget ShedLow = %v, want %v", i, got, want)
		}
	}
	v := m.View()
	if bal.penalized != "c" || v.PenalizedZone != "c" || !v.Classes[0].Guarded || v.Classes[1].Guarded {
		t.Fatalf("engaged: penalized %q, view %+v; want zone c, light guarded, heavy not (it has no budget)", bal.penalized, v)
	}
	// Between 0.8× and 1× of the budget (18 ms) for a long time: still
	// guarded, once the 30 ms samples have left the window.
	for range Slots*int(SlotLength/Tick) + 5 {
		second(18 * time.Millisecond)
	}
	if !m.ShedLow() {
		t.Fatal("the guard left with the p99 at 0.9× its budget")
	}
	// Under 0.8×: it leaves after LeaveAfter ticks.
	for range LeaveAfter - 1 {
		second(10 * time.Millisecond)
		// the window still holds 18 ms samples for a while: the count
		// starts when the p99 is under 16 ms
	}
	for i := 0; m.ShedLow(); i++ {
		if i > Slots*int(SlotLength/Tick) {
			t.Fatal("the guard never left with the p99 at half its budget")
		}
		second(10 * time.Millisecond)
	}
	if bal.penalized != "c" {
		t.Fatalf("zone c, still 3× slower, was lifted (%q) when the guard left", bal.penalized)
	}
	bal.mu.Lock()
	bal.lat["c"] = 25 * time.Millisecond
	bal.mu.Unlock()
	second(10 * time.Millisecond)
	if bal.penalized != "" {
		t.Fatalf("zone c is back within %v× of the others and still penalized", ZoneRatio)
	}
}

// TestScaleOutTiming: the signal rises at the For-th second in a row above
// the threshold and not before; a second at or below resets the count; it
// clears after For seconds at or below. Each change is one event.
func TestScaleOutTiming(t *testing.T) {
	clk := clock.NewFake(epoch)
	var events []Event
	m := NewMonitor("pay", Config{Heavy: 1, Classes: []Class{{Name: "light"}, {Name: "heavy"}},
		ScaleOut: ScaleOut{AbovePercent: 45, For: 30 * time.Second}}, clk, nil, func(e Event) { events = append(events, e) })
	defer m.Close()
	second := func(heavy int) {
		for i := range 10 {
			c := 0
			if i < heavy {
				c = 1
			}
			m.Record(c, time.Millisecond)
		}
		clk.Advance(Tick)
	}
	for range 40 {
		second(3)
	}
	for range 29 {
		second(5)
	}
	second(4) // 40 %: resets
	for i := 1; i <= 30; i++ {
		second(5)
		if got := m.View().ScaleOut.Signal; got != (i == 30) {
			t.Fatalf("%d s above after a reset: signal %v", i, got)
		}
	}
	if len(events) != 1 || !events[0].Signal || events[0].HeavyPercent != 50 || events[0].At != epoch.Add(100*time.Second) {
		t.Fatalf("events %+v, want one raise at t=100s at 50 %%", events)
	}
	for range 30 {
		second(3)
	}
	if m.View().ScaleOut.Signal || len(events) != 2 || events[1].Signal {
		t.Fatalf("after 30 s at 30 %%: signal %v, events %+v; want cleared, one clear event", m.View().ScaleOut.Signal, events)
	}
}

// TestNotifierRetries: a webhook that fails twice gets the event on the
// third post, after backoffs on the notifier's clock; a full queue drops
// and counts; Close stops the sender.
func TestNotifierRetries(t *testing.T) {
	var posts atomic.Int64
	got := make(chan Event, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if posts.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var e Event
		json.NewDecoder(r.Body).Decode(&e)
		select {
		case got <- e:
		default:
			// Nobody reads past the first event: a blocking send would
			// hold the sender's post, and so n.Close and srv.Close, for
			// ever once the queue-filling events below fill got.
		}
	}))
	defer srv.Close()
	clk := clock.NewFake(epoch)
	var drops atomic.Int64
	n := NewNotifier(srv.URL, clk, nil, func() { drops.Add(1) })
	defer n.Close()
	if !n.Notify(Event{Type: "scale_out", Origin: "pay", Signal: true}) {
		t.Fatal("the first event was not queued")
	}
	for posts.Load() < 3 {
		// each backoff waits on the fake clock: advance it until the
		// third post is made
		waitPending(t, clk, func() bool { return posts.Load() >= 3 })
		clk.Advance(10 * Backoff)
	}
	select {
	case e := <-got:
		if e.Origin != "pay" || !e.Signal {
			t.Fatalf("webhook got %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the third post never arrived")
	}
	// The sender is idle now; fill the queue past its bound without
	// letting it post (the server holds nothing: posts succeed fast, so
	// count drops only from the overflow).
	dropped := 0
	for range 3 * QueueSize {
		if !n.Notify(Event{Type: "scale_out"}) {
			dropped++
		}
	}
	if dropped == 0 || drops.Load() != int64(dropped) || n.Dropped.Load() != uint64(dropped) {
		t.Fatalf("%d events refused, %d counted by onDrop, %d by Dropped; want some, all counted", dropped, drops.Load(), n.Dropped.Load())
	}
}

// waitPending waits until the fake clock has a timer armed (the notifier's
// backoff) or the post it would wait for has been made.
func waitPending(t *testing.T, clk *clock.Fake, done func() bool) {
	deadline := time.Now().Add(10 * time.Second)
	for clk.Pending() == 0 && !done() {
		if time.Now().After(deadline) {
			t.Fatal("the notifier never armed its backoff")
		}
		time.Sleep(time.Millisecond)
	}
}
