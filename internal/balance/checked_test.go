package balance

import (
	"slices"
	"testing"
	"time"
)

// TestCheckedEjectionKeepsTheCap: 3 of 10 endpoints failing their health
// checks — at most 2 (20 %) are ejected, the third is failing (in service,
// unhealthy for panic), and takes the slot that frees when one passes.
func TestCheckedEjectionKeepsTheCap(t *testing.T) {
	ms := members(10)
	f := newFixture(t, DefaultConfig(), ms, 51)
	for _, m := range ms[:3] {
		if !f.o.SetChecked(m.Address, false) {
			t.Fatalf("SetChecked(%s, false) changed nothing", m.Address)
		}
	}
	if f.o.Ejected() != 2 {
		t.Fatalf("3 of 10 failing their checks: %d ejected, want 2 (the 20 %% cap)", f.o.Ejected())
	}
	third := f.o.Endpoint(ms[2].Address).Status()
	if third.Ejected || !third.Failing || third.EjectedBy != ReasonHealthCheck {
		t.Fatalf("the third: %+v; want failing (cap full), by health_check", third)
	}
	if want := ms[0].Address + " health_check 0s"; !slices.Contains(f.obs.ejections, want) {
		t.Errorf("observer saw %v, want %q", f.obs.ejections, want)
	}
	// 7 of 10 healthy is below panic_threshold_percent 80: panic, as for
	// passive ejection.
	if !f.o.Panic() {
		t.Error("7 of 10 healthy: panic is off")
	}
	f.o.SetChecked(ms[0].Address, true)
	if !ejectedNow(f.o, ms[2].Address) || ejectedNow(f.o, ms[0].Address) || f.o.Ejected() != 2 {
		t.Fatalf("after one passes: ejected %d, the third ejected %v; want the freed slot taken by the third",
			f.o.Ejected(), ejectedNow(f.o, ms[2].Address))
	}
}

// TestCheckedPanicRoutesOverAll: 3 of 4 failing their checks — one is
// ejected (the cap), the origin panics and every endpoint is picked.
func TestCheckedPanicRoutesOverAll(t *testing.T) {
	ms := members(4)
	f := newFixture(t, DefaultConfig(), ms, 52)
	for _, m := range ms[:3] {
		f.o.SetChecked(m.Address, false)
	}
	if !f.o.Panic() || f.o.Ejected() != 1 {
		t.Fatalf("3 of 4 failing: panic %v, ejected %d; want panic, 1", f.o.Panic(), f.o.Ejected())
	}
	p := f.o.NewPicker(nil)
	defer p.Close()
	got := shares(t, p, 4000, 5*time.Millisecond)
	for _, m := range ms {
		if got[m.Address] < 0.1 {
			t.Errorf("panic: %s got %.3f of the picks; want all four routed", m.Address, got[m.Address])
		}
	}
}

// TestPassingProbeNeverShortensPassiveEjection: an endpoint ejected by live
// failures stays out its whole base_ejection_time though its checks pass;
// one whose checks fail stays out past that time, until they pass, and
// then returns through slow start.
func TestPassingProbeNeverShortensPassiveEjection(t *testing.T) {
	ms := members(10)
	x := ms[0].Address
	f := newFixture(t, DefaultConfig(), ms, 53)
	failRun(t, f.o, x)
	f.o.SetChecked(x, false)
	f.o.SetChecked(x, true) // passes again at once
	if !ejectedNow(f.o, x) {
		t.Fatal("a passing check ended a passive ejection early")
	}
	f.clk.Advance(30 * time.Second)
	if ejectedNow(f.o, x) {
		t.Fatal("not back after base_ejection_time with its checks passing")
	}

	y := ms[1].Address
	failRun(t, f.o, y)
	f.o.SetChecked(y, false)
	f.clk.Advance(time.Hour)
	st := f.o.Endpoint(y).Status()
	if !st.Ejected || st.EjectedBy != ReasonHealthCheck {
		t.Fatalf("passive time over, checks failing: %+v; want ejected by health_check", st)
	}
	f.o.SetChecked(y, true)
	st = f.o.Endpoint(y).Status()
	if st.Ejected || st.EffectiveWeight > 0.11 {
		t.Fatalf("checks pass: ejected %v, effective weight %.3f; want back at slow start's floor (0.1)", st.Ejected, st.EffectiveWeight)
	}
	f.clk.Advance(30 * time.Second)
	if w := f.o.Endpoint(y).Status().EffectiveWeight; w < 0.45 || w > 0.55 {
		t.Fatalf("30 s into slow start: effective weight %.3f, want 0.5 (linear over 60 s)", w)
	}
}

// TestCheckedReturnRampsThroughSlowStart: an endpoint ejected by its checks
// alone returns at the check that passes, at slow start's floor; its share
// of the picks in its first 30 s stays below an even share (round robin,
// whose shares are the weights).
func TestCheckedReturnRampsThroughSlowStart(t *testing.T) {
	ms := members(10)
	x := ms[0].Address
	f := newFixture(t, policyConfig(RoundRobin), ms, 54)
	f.o.SetChecked(x, false)
	if !ejectedNow(f.o, x) {
		t.Fatal("not ejected by its checks")
	}
	p := f.o.NewPicker(nil)
	defer p.Close()
	if got := shares(t, p, 1000, 5*time.Millisecond)[x]; got != 0 {
		t.Fatalf("ejected endpoint got %.3f of the picks", got)
	}
	f.o.SetChecked(x, true)
	var picks, total int
	for range 30 {
		for range 200 {
			ep, err := p.Pick()
			if err != nil {
				t.Fatal(err)
			}
			total++
			if ep.Address() == x {
				picks++
			}
			ep.Done(5*time.Millisecond, Success)
		}
		f.clk.Advance(time.Second)
	}
	share := float64(picks) / float64(total)
	t.Logf("share of the returning endpoint in its first 30 s: %.3f (even share 0.100)", share)
	if share >= 0.1 || share == 0 {
		t.Fatalf("first 30 s share %.3f; want ramping (0 < share < 0.1)", share)
	}
}

// TestProbesCountForNothing: a probe's pick and end leave the balancer
// alone — no failure run, no ejection, no live outcome — while a live
// failure tells OnLiveFailure once per run.
func TestProbesCountForNothing(t *testing.T) {
	ms := members(4)
	x := ms[0].Address
	f := newFixture(t, DefaultConfig(), ms, 55)
	var heard []string
	f.o.OnLiveFailure(func(a string) { heard = append(heard, a) })
	pr := NewProbe(f.o.Endpoint(x))
	for range 5 {
		ep, tk, err := pr.PickKeyed(1, Key{})
		if err != nil || ep.Address() != x {
			t.Fatalf("probe pick: %v %v", ep, err)
		}
		ep.End(tk, time.Second, ServerError)
	}
	if ejectedNow(f.o, x) || f.o.Endpoint(x).Active() != 0 {
		t.Fatal("probes' failures ejected the endpoint or left a request in flight")
	}
	if ok, fail := f.o.Endpoint(x).Live(); !ok.IsZero() || !fail.IsZero() || len(heard) != 0 {
		t.Fatalf("probes counted as live: ok %v fail %v heard %v", ok, fail, heard)
	}
	p := f.o.NewPicker([]string{x})
	defer p.Close()
	finish(t, p, x, Success)
	if ok, _ := f.o.Endpoint(x).Live(); !ok.Equal(f.clk.Now()) {
		t.Fatalf("live success at %v, recorded %v", f.clk.Now(), ok)
	}
	finish(t, p, x, ServerError)
	finish(t, p, x, ServerError)
	if !slices.Equal(heard, []string{x}) {
		t.Fatalf("OnLiveFailure heard %v; want %s once for the run", heard, x)
	}
	if _, _, err := pr.PickKeyedAvoiding(nil, 1, Key{}); err != ErrAllTried {
		t.Fatalf("a probe offers another endpoint: %v", err)
	}
}
