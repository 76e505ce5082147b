package balance

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// finish picks through p, checks that it got want, and ends the request
// with out.
func finish(t *testing.T, p *Picker, want string, out Outcome) {
	t.Helper()
	ep, err := p.Pick()
	if err != nil {
		t.Fatal(err)
	}
	if ep.Address() != want {
		t.Fatalf("picked %s, want %s", ep.Address(), want)
	}
	ep.Done(5*time.Millisecond, out)
}

// failRun ends three requests to addr with 5xx through a picker that only
// has addr, ejecting it.
func failRun(t *testing.T, o *Origin, addr string) {
	t.Helper()
	p := o.NewPicker([]string{addr})
	defer p.Close()
	for range 3 {
		finish(t, p, addr, ServerError)
	}
}

func ejectedNow(o *Origin, addr string) bool { return o.Endpoint(addr).Status().Ejected }

func TestEjectionAtExactlyTheThirdFailure(t *testing.T) {
	ms := members(10)
	x := ms[0].Address
	for _, tc := range []struct {
		name  string
		seq   []Outcome // only the last may eject
		eject bool
	}{
		{"three 5xx", []Outcome{ServerError, ServerError, ServerError}, true},
		{"connect failures count", []Outcome{ConnectFailure, ServerError, ConnectFailure}, true},
		{"shed counts for nothing", []Outcome{ServerError, Shed, ServerError, Shed, ServerError}, true},
		{"a success resets the run", []Outcome{ServerError, ServerError, Success, ServerError, ServerError}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, DefaultConfig(), ms, 31)
			p := f.o.NewPicker([]string{x})
			for i, out := range tc.seq {
				finish(t, p, x, out)
				last := i == len(tc.seq)-1
				if got := ejectedNow(f.o, x); got != (last && tc.eject) {
					t.Fatalf("after outcome %d: ejected = %v", i+1, got)
				}
			}
			if !tc.eject {
				return
			}
			st := f.o.Endpoint(x).Status()
			if want := f.clk.Now().Add(30 * time.Second); !st.EjectedUntil.Equal(want) {
				t.Errorf("ejected until %v, want %v", st.EjectedUntil, want)
			}
			if want := []string{x + " consecutive_5xx 30s"}; !slices.Equal(f.obs.ejections, want) {
				t.Errorf("observer saw %v, want %v", f.obs.ejections, want)
			}
			if slices.Contains(p.Candidates(), x) {
				t.Errorf("ejected endpoint still a candidate: %v", p.Candidates())
			}
		})
	}
}

// TestEjectionReturnsAfterBaseTime: the endpoint is out for exactly
// base_ejection_time and comes back in slow start.
func TestEjectionReturnsAfterBaseTime(t *testing.T) {
	ms := members(10)
	x := ms[0].Address
	f := newFixture(t, DefaultConfig(), ms, 32)
	p := f.o.NewPicker(addrs(ms[:3]))
	failRun(t, f.o, x)
	if slices.Contains(p.Candidates(), x) {
		t.Fatal("ejected endpoint is a candidate")
	}
	f.clk.Advance(30*time.Second - time.Millisecond)
	if !ejectedNow(f.o, x) {
		t.Fatal("returned before base_ejection_time")
	}
	f.clk.Advance(time.Millisecond)
	st := f.o.Endpoint(x).Status()
	if st.Ejected {
		t.Fatal("still ejected after base_ejection_time")
	}
	if st.EffectiveWeight != 0.1 {
		t.Errorf("effective weight on return %v, want 0.1 (slow start)", st.EffectiveWeight)
	}
	if !slices.Equal(p.Candidates(), addrs(ms[:3])) {
		t.Errorf("candidates %v, want the whole subset back", p.Candidates())
	}
	if want := []int{1, 0}; !slices.Equal(f.obs.ejectedCounts, want) {
		t.Errorf("ejected counts %v, want %v", f.obs.ejectedCounts, want)
	}
}

// TestEjectionTimeGrowsCapsAndDecays: back-to-back ejections last base × n up
// to 300 s; each base_ejection_time spent in service forgets one.
func TestEjectionTimeGrowsCapsAndDecays(t *testing.T) {
	ms := members(10)
	x := ms[0].Address
	f := newFixture(t, DefaultConfig(), ms, 33)
	var got []time.Duration
	for range 12 {
		failRun(t, f.o, x)
		until := f.o.Endpoint(x).Status().EjectedUntil
		got = append(got, until.Sub(f.clk.Now()))
		f.clk.AdvanceTo(until)
	}
	want := []time.Duration{30, 60, 90, 120, 150, 180, 210, 240, 270, 300, 300, 300}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(got, want) {
		t.Errorf("ejection times %v, want %v", got, want)
	}
	// 12 in a row; 10 base periods (300 s) in service forget 10 of them.
	f.clk.Advance(300 * time.Second)
	if n := f.o.Endpoint(x).Status().TimesEjected; n != 2 {
		t.Errorf("times ejected after 300 s clean: %d, want 2", n)
	}
	failRun(t, f.o, x)
	if d := f.o.Endpoint(x).Status().EjectedUntil.Sub(f.clk.Now()); d != 90*time.Second {
		t.Errorf("next ejection %v, want 90s (3rd after decay)", d)
	}
}

// TestEjectionCapAndPanic: with 10 of 20 endpoints failing, at most 4 (20 %)
// are ejected; the other 6 make the healthy share 50 % < 80 %, so the origin
// routes over all endpoints in panic. When they recover, panic ends.
func TestEjectionCapAndPanic(t *testing.T) {
	ms := members(20)
	f := newFixture(t, DefaultConfig(), ms, 34)
	p := f.o.NewPicker(nil)
	failing := map[string]bool{}
	for _, m := range ms[:10] {
		failing[m.Address] = true
	}
	drive := func(n int) {
		for range n {
			ep, err := p.Pick()
			if err != nil {
				t.Fatal(err)
			}
			out := Success
			if failing[ep.Address()] {
				out = ServerError
			}
			ep.Done(5*time.Millisecond, out)
			if e := f.o.Ejected(); e > 4 {
				t.Fatalf("%d endpoints ejected, cap is 4", e)
			}
			f.clk.Advance(time.Millisecond)
		}
	}
	drive(2000)
	if e := f.o.Ejected(); e != 4 {
		t.Errorf("ejected %d, want 4", e)
	}
	if !f.o.Panic() {
		t.Error("no panic with 10 of 20 endpoints failing")
	}
	if c := p.Candidates(); len(c) != 20 {
		t.Errorf("in panic the loop routes over %d endpoints, want all 20", len(c))
	}
	clear(failing)
	drive(2000) // the 6 failing-but-not-ejected recover; the ejected return after 30 s
	f.clk.Advance(30 * time.Second)
	if f.o.Panic() || f.o.Ejected() != 0 {
		t.Errorf("after recovery: panic %v, ejected %d", f.o.Panic(), f.o.Ejected())
	}
	if want := []bool{true, false}; !slices.Equal(f.obs.panics, want) {
		t.Errorf("panic transitions %v, want %v", f.obs.panics, want)
	}
}

// TestPanicBoundary: 4 of 20 ejected leaves exactly 80 % healthy (no panic);
// a 5th failing endpoint cannot be ejected and tips the origin into panic.
func TestPanicBoundary(t *testing.T) {
	ms := members(20)
	f := newFixture(t, DefaultConfig(), ms, 35)
	for _, m := range ms[:4] {
		failRun(t, f.o, m.Address)
	}
	if f.o.Ejected() != 4 || f.o.Panic() {
		t.Fatalf("4 failing: ejected %d, panic %v; want 4, false", f.o.Ejected(), f.o.Panic())
	}
	failRun(t, f.o, ms[4].Address)
	st := f.o.Endpoint(ms[4].Address).Status()
	if st.Ejected || !st.Failing || f.o.Ejected() != 4 || !f.o.Panic() {
		t.Fatalf("5th failing: ejected=%v failing=%v origin ejected %d panic %v", st.Ejected, st.Failing, f.o.Ejected(), f.o.Panic())
	}
	// When a slot frees, the failing endpoint is ejected at its next failure.
	f.clk.Advance(30 * time.Second)
	p := f.o.NewPicker([]string{ms[4].Address})
	finish(t, p, ms[4].Address, ServerError)
	if !ejectedNow(f.o, ms[4].Address) {
		t.Error("failing endpoint not ejected once the cap had room")
	}
}

// TestAtLeastOneMayBeEjected: 20 % of 2 rounds down to 0, but one endpoint
// may always be ejected.
func TestAtLeastOneMayBeEjected(t *testing.T) {
	ms := members(2)
	f := newFixture(t, DefaultConfig(), ms, 36)
	failRun(t, f.o, ms[0].Address)
	if f.o.Ejected() != 1 {
		t.Fatalf("ejected %d, want 1", f.o.Ejected())
	}
	failRun(t, f.o, ms[1].Address)
	if f.o.Ejected() != 1 {
		t.Fatalf("ejected %d after the second failed, want still 1", f.o.Ejected())
	}
}

// TestSubsetSkipsEjected: an ejected endpoint leaves the loop's candidates
// without a new subset; a loop whose whole subset is ejected falls back to
// the origin's endpoints that are in service.
func TestSubsetSkipsEjected(t *testing.T) {
	ms := members(20) // cap 4; 3 ejected leave 85 % healthy, no panic
	f := newFixture(t, DefaultConfig(), ms, 37)
	sub := addrs(ms[:3])
	p := f.o.NewPicker(sub)
	failRun(t, f.o, sub[1])
	if want := []string{sub[0], sub[2]}; !slices.Equal(p.Candidates(), want) {
		t.Fatalf("candidates %v, want %v", p.Candidates(), want)
	}
	for range 1000 {
		ep, _ := p.Pick()
		if ep.Address() == sub[1] {
			t.Fatal("picked the ejected endpoint")
		}
		ep.Done(time.Millisecond, Success)
	}

	q := f.o.NewPicker(addrs(ms[3:5]))
	failRun(t, f.o, ms[3].Address)
	failRun(t, f.o, ms[4].Address)
	if f.o.Ejected() != 3 || f.o.Panic() {
		t.Fatalf("ejected %d, panic %v; want 3, false", f.o.Ejected(), f.o.Panic())
	}
	got := q.Candidates()
	want := slices.Concat(addrs(ms[:3]), addrs(ms[5:]))
	want = slices.DeleteFunc(want, func(a string) bool { return a == sub[1] })
	if !slices.Equal(got, want) {
		t.Errorf("fallback candidates %v, want the origin's in-service endpoints %v", got, want)
	}
	if _, err := q.Pick(); err != nil {
		t.Errorf("Pick with the whole subset ejected: %v", err)
	}
}

// TestNoHealthy: with panic routing off and every endpoint ejected, Pick
// fails with ErrNoHealthy (reason no_healthy) at once.
func TestNoHealthy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PanicThresholdPercent = 0
	cfg.Outlier.MaxEjectionPercent = 100
	ms := members(3)
	f := newFixture(t, cfg, ms, 38)
	p := f.o.NewPicker(nil)
	for _, m := range ms {
		ep, err := p.Pick()
		if err != nil {
			t.Fatalf("Pick with %d ejected: %v", f.o.Ejected(), err)
		}
		ep.Done(0, Shed)
		failRun(t, f.o, m.Address)
	}
	_, err := p.Pick()
	var se *ShedError
	if !errors.Is(err, ErrNoHealthy) || !errors.As(err, &se) || se.Reason != ReasonNoHealthy {
		t.Fatalf("Pick = %v, want ErrNoHealthy", err)
	}
}

// TestFailingWithoutPanicKeepsSnapshots: an endpoint turning failing (cap
// full) or healthy again changes no candidate set, so while panic does not
// flip the loops keep their snapshots.
func TestFailingWithoutPanicKeepsSnapshots(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Outlier.MaxEjectionPercent = 0 // cap: one
	ms := members(20)
	f := newFixture(t, cfg, ms, 39)
	failRun(t, f.o, ms[0].Address)
	p := f.o.NewPicker(nil)
	before := p.snap.Load()
	failRun(t, f.o, ms[1].Address)
	if st := f.o.Endpoint(ms[1].Address).Status(); !st.Failing || f.o.Panic() {
		t.Fatalf("failing %v, panic %v; want true, false", st.Failing, f.o.Panic())
	}
	q := f.o.NewPicker([]string{ms[1].Address})
	finish(t, q, ms[1].Address, Success)
	if f.o.Endpoint(ms[1].Address).Status().Failing {
		t.Fatal("still failing after a success")
	}
	if p.snap.Load() != before {
		t.Error("snapshot republished for a change that moved no candidate")
	}
}
