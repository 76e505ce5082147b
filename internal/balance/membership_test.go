package balance

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUpdateKeepsSurvivors: survivors keep their shared state (the same
// *Endpoint, its in-flight count and estimate) and take new zone and weight;
// new endpoints enter slow start; removed ones leave every picker at once and
// requests in flight to them still end cleanly.
func TestUpdateKeepsSurvivors(t *testing.T) {
	ms := members(4)
	f := newFixture(t, DefaultConfig(), ms, 61)
	p := f.o.NewPicker(nil)
	q := f.o.NewPicker(addrs(ms[2:]))
	a := f.o.Endpoint(ms[0].Address)
	gone := f.o.Endpoint(ms[3].Address)
	a.active.Add(2) // two requests in flight, as if picked
	gone.active.Add(1)
	a.Done(400*time.Millisecond, Success)
	a.active.Add(1)

	next := []Member{{Address: ms[0].Address, Zone: "z", Weight: 3}, ms[1], ms[2], {Address: "10.0.0.9:80", Weight: 1}}
	if err := f.o.Update(next); err != nil {
		t.Fatal(err)
	}
	if f.o.Endpoint(ms[0].Address) != a {
		t.Fatal("survivor replaced by a new Endpoint")
	}
	st := a.Status()
	if st.Active != 2 || st.EWMALatency != 400*time.Millisecond || st.Zone != "z" || st.Weight != 3 || st.EffectiveWeight != 3 {
		t.Errorf("survivor status %+v", st)
	}
	if w := f.o.Endpoint("10.0.0.9:80").Status().EffectiveWeight; w != 0.1 {
		t.Errorf("new endpoint effective weight %v, want 0.1", w)
	}
	if f.o.Endpoint(ms[3].Address) != nil {
		t.Error("removed endpoint still a member")
	}
	if got, want := p.Candidates(), addrs(next); !slices.Equal(got, want) {
		t.Errorf("candidates %v, want %v", got, want)
	}
	if got := q.Candidates(); !slices.Equal(got, []string{ms[2].Address}) {
		t.Errorf("subset candidates %v, want only %s", got, ms[2].Address)
	}
	gone.Done(time.Millisecond, ServerError)
	if gone.Active() != 0 {
		t.Errorf("removed endpoint active %d after Done", gone.Active())
	}
	// An address that joins later is picked up by a subset naming it.
	q.SetSubset([]string{ms[2].Address, "10.0.0.7:80"})
	if err := f.o.Update(append(next, Member{Address: "10.0.0.7:80"})); err != nil {
		t.Fatal(err)
	}
	if got := q.Candidates(); !slices.Equal(got, []string{ms[2].Address, "10.0.0.7:80"}) {
		t.Errorf("after join: %v", got)
	}
}

// TestRemovingEjectedEndpointFreesTheCap: a removed ejected endpoint no longer
// counts, and its return timer is stopped.
func TestRemovingEjectedEndpointFreesTheCap(t *testing.T) {
	ms := members(10)
	f := newFixture(t, DefaultConfig(), ms, 62)
	failRun(t, f.o, ms[0].Address)
	if err := f.o.Update(ms[1:]); err != nil {
		t.Fatal(err)
	}
	if f.o.Ejected() != 0 {
		t.Fatalf("ejected %d after removing the ejected endpoint", f.o.Ejected())
	}
	if f.clk.Pending() != 0 {
		t.Errorf("%d timers still armed", f.clk.Pending())
	}
	if want := []int{1, 0}; !slices.Equal(f.obs.ejectedCounts, want) {
		t.Errorf("ejected counts %v, want %v", f.obs.ejectedCounts, want)
	}
}

func TestInvalidMembersChangeNothing(t *testing.T) {
	ms := members(3)
	f := newFixture(t, DefaultConfig(), ms, 63)
	for _, bad := range [][]Member{
		{{Address: ""}},
		{ms[0], ms[0]},
		{{Address: "10.0.0.1:80", Weight: -1}},
	} {
		err := f.o.Update(bad)
		if err == nil || !strings.Contains(err.Error(), "endpoints[") {
			t.Errorf("Update(%v) = %v, want an error naming the entry", bad, err)
		}
	}
	if len(f.o.Endpoints()) != 3 {
		t.Error("a refused update changed the membership")
	}
}

func TestClosedPickerFails(t *testing.T) {
	f := newFixture(t, DefaultConfig(), members(3), 64)
	p := f.o.NewPicker(nil)
	p.Close()
	if _, err := p.Pick(); err != ErrNoHealthy {
		t.Fatalf("Pick on a closed picker: %v", err)
	}
	failRun(t, f.o, "10.0.0.0:80") // a rebuild must not resurrect it
	if _, err := p.Pick(); err != ErrNoHealthy {
		t.Fatalf("Pick on a closed picker after a rebuild: %v", err)
	}
}

func TestStatusJSON(t *testing.T) {
	f := newFixture(t, DefaultConfig(), members(2, "a"), 65)
	failRun(t, f.o, "10.0.0.1:80")
	b, err := json.Marshal(f.o.Status())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"policy":"least_work"`, `"effective_weight":1`, `"ejected":true`, `"ejected_until":"2026-01-01T00:00:30Z"`, `"ewma_latency_ns":`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("status JSON lacks %s: %s", want, b)
		}
	}
}
