package balance

import (
	"math"
	"testing"
	"time"
)

func TestEffectiveWeightFormula(t *testing.T) {
	for _, tc := range []struct {
		aggression float64
		t          time.Duration
		want       float64 // of a weight-2 endpoint, 60 s window, 10 % floor
	}{
		{1, 0, 0.2},
		{1, 3 * time.Second, 0.2}, // 5 % is below the floor
		{1, 6 * time.Second, 0.2},
		{1, 30 * time.Second, 1.0},
		{1, 45 * time.Second, 1.5},
		{1, 60 * time.Second, 2},
		{1, time.Hour, 2},
		{2, 15 * time.Second, 2 * math.Sqrt(0.25)},
		{0.5, 30 * time.Second, 2 * 0.25},
	} {
		c := DefaultConfig()
		c.SlowStart.Aggression = tc.aggression
		p := newParams(c)
		if got := p.effective(2, 0, int64(tc.t)); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("aggression %v at %v: %v, want %v", tc.aggression, tc.t, got, tc.want)
		}
	}
	p := newParams(DefaultConfig())
	if got := p.effective(3, warm, 0); got != 3 {
		t.Errorf("warm endpoint: %v, want 3", got)
	}
}

// TestSlowStartShares: an endpoint joining 4 warm ones gets
// w_eff / (4 + w_eff) of the picks — 2.44 % at 6 s (the 10 % floor), 11.1 %
// at 30 s, 20 % at 60 s — ±1 pp over 10^5 picks, for the policies whose
// share follows weight when nothing is in flight.
func TestSlowStartShares(t *testing.T) {
	for _, pol := range []Policy{LeastRequest, RoundRobin, Random} {
		t.Run(string(pol), func(t *testing.T) {
			ms := members(4)
			f := newFixture(t, policyConfig(pol), ms, 21)
			p := f.o.NewPicker(nil)
			joined := f.clk.Now()
			fresh := Member{Address: "10.0.0.9:80", Weight: 1}
			if err := f.o.Update(append(ms, fresh)); err != nil {
				t.Fatal(err)
			}
			for _, at := range []time.Duration{6 * time.Second, 30 * time.Second, 60 * time.Second} {
				f.clk.AdvanceTo(joined.Add(at))
				w := max(at.Seconds()/60, 0.1)
				got := shares(t, p, 100_000, 10*time.Millisecond)
				within(t, at.String(), got[fresh.Address], w/(4+w), 0.01)
				if st := f.o.Endpoint(fresh.Address).Status(); math.Abs(st.EffectiveWeight-w) > 1e-9 {
					t.Errorf("at %v: effective weight %v, want %v", at, st.EffectiveWeight, w)
				}
			}
		})
	}
}

// TestSlowStartOff: with window 0 a new endpoint gets its full share at once.
func TestSlowStartOff(t *testing.T) {
	cfg := policyConfig(RoundRobin)
	cfg.SlowStart.Window = 0
	ms := members(4)
	f := newFixture(t, cfg, ms, 22)
	fresh := Member{Address: "10.0.0.9:80", Weight: 1}
	if err := f.o.Update(append(ms, fresh)); err != nil {
		t.Fatal(err)
	}
	got := shares(t, f.o.NewPicker(nil), 10_000, time.Millisecond)
	within(t, fresh.Address, got[fresh.Address], 0.2, 0.001)
}

// TestFirstMembershipOfAnEmptyOriginIsWarm: an origin created empty (one
// whose endpoints come from discovery) takes its first membership as warm,
// as NewOrigin takes its members; an endpoint that joins later ramps up,
// and so do endpoints that come after the origin was emptied.
func TestFirstMembershipOfAnEmptyOriginIsWarm(t *testing.T) {
	f := newFixture(t, DefaultConfig(), nil, 23)
	f.clk.Advance(time.Second)
	ms := members(4)
	if err := f.o.Update(ms); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if w := f.o.Endpoint(m.Address).Status().EffectiveWeight; w != 1 {
			t.Errorf("%s of the first membership: effective weight %v, want 1 (warm)", m.Address, w)
		}
	}
	late := Member{Address: "10.0.0.9:80", Weight: 1}
	if err := f.o.Update(append(ms, late)); err != nil {
		t.Fatal(err)
	}
	if w := f.o.Endpoint(late.Address).Status().EffectiveWeight; w != 0.1 {
		t.Errorf("an endpoint joining later: effective weight %v, want 0.1 (slow start)", w)
	}
	if err := f.o.Update(nil); err != nil {
		t.Fatal(err)
	}
	if err := f.o.Update(ms[:1]); err != nil {
		t.Fatal(err)
	}
	if w := f.o.Endpoint(ms[0].Address).Status().EffectiveWeight; w != 0.1 {
		t.Errorf("an endpoint joining an emptied origin: effective weight %v, want 0.1 (slow start)", w)
	}
}
