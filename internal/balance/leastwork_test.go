package balance

import (
	"math"
	"testing"
	"time"

	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/workload"
)

// heavyCost is the default mix's heavy class's cost: 140 ms ÷ 15 ms.
var heavyCost = workload.Default().Costs()[1]

// TestHeavyRequestDoesNotMakeAnEndpointLookSlow: of two identical
// endpoints, one answers only heavy requests (140 ms, cost 9.33) and the
// other only light ones (15 ms, cost 1). Their latency per unit of cost is
// the same 15 ms, so least_work sees them as equals (a tie: load decides),
// where peak_ewma's estimate reads the first as 9.3× slower.
func TestHeavyRequestDoesNotMakeAnEndpointLookSlow(t *testing.T) {
	ms := members(2)
	f := newFixture(t, policyConfig(LeastWork), ms, 1)
	a, b := f.o.Endpoint(ms[0].Address), f.o.Endpoint(ms[1].Address)
	p := f.o.NewPicker([]string{ms[0].Address})
	q := f.o.NewPicker([]string{ms[1].Address})
	for range 100 {
		ep, tk, _ := p.PickCost(heavyCost)
		f.clk.Advance(140 * time.Millisecond)
		ep.End(tk, 140*time.Millisecond, Success)
		ep, tk, _ = q.PickCost(1)
		f.clk.Advance(15 * time.Millisecond)
		ep.End(tk, 15*time.Millisecond, Success)
	}
	sa, sb := a.Status(), b.Status()
	if r := float64(sa.CostLatency) / float64(sb.CostLatency); math.Abs(r-1) > 0.02 {
		t.Fatalf("latency per unit of cost: heavy-only %v, light-only %v (ratio %.3f), want equal", sa.CostLatency, sb.CostLatency, r)
	}
	if r := float64(sa.EWMALatency) / float64(sb.EWMALatency); r < 5 {
		t.Errorf("the per-request estimate should tell them apart (%v vs %v), or the test shows nothing", sa.EWMALatency, sb.EWMALatency)
	}
	// Both answering at their usual speed: the next picks, over both, follow
	// the load alone and alternate.
	both := f.o.NewPicker(nil)
	count := map[*Endpoint]int{}
	for range 1000 {
		ep, tk, _ := both.PickCost(1)
		count[ep]++
		f.clk.Advance(time.Millisecond)
		ep.End(tk, 15*time.Millisecond, Success)
	}
	if d := count[a] - count[b]; d < -50 || d > 50 {
		t.Errorf("picks %d vs %d: the heavy-only endpoint is treated as different", count[a], count[b])
	}
}

// TestLoadCountsCosts: one endpoint holds a heavy request (work 9.33), the
// other three light ones (work 3). least_work sends the next request to
// the second — the less work, though more requests — where least_request
// (and p2c) send it to the first.
func TestLoadCountsCosts(t *testing.T) {
	for _, tc := range []struct {
		pol       Policy
		wantLight bool // the next pick goes to the endpoint holding the light requests
	}{{LeastWork, true}, {LeastRequest, false}, {P2C, false}} {
		t.Run(string(tc.pol), func(t *testing.T) {
			ms := members(2)
			f := newFixture(t, policyConfig(tc.pol), ms, 3)
			heavy, light := f.o.Endpoint(ms[0].Address), f.o.Endpoint(ms[1].Address)
			ph := f.o.NewPicker([]string{ms[0].Address})
			pl := f.o.NewPicker([]string{ms[1].Address})
			if ep, _, _ := ph.PickCost(heavyCost); ep != heavy {
				t.Fatal("subset picker went elsewhere")
			}
			for range 3 {
				pl.PickCost(1)
			}
			if w := heavy.Status().Work; math.Abs(w-heavyCost) > 0.01 {
				t.Fatalf("work in flight at the heavy endpoint %.3f, want %.3f", w, heavyCost)
			}
			if w := light.Status().Work; w != 3 {
				t.Fatalf("work in flight at the light endpoint %.3f, want 3", w)
			}
			both := f.o.NewPicker(nil)
			for i := range 20 {
				ep, tk, _ := both.PickCost(1)
				if (ep == light) != tc.wantLight {
					t.Fatalf("pick %d went to %s (heavy: work %.2f in 1 request; light: work %.2f in 3)", i, ep.Address(), heavy.Status().Work, light.Status().Work)
				}
				ep.End(tk, 0, Shed)
			}
		})
	}
}

// TestLeastWorkAvoidsASlowEndpoint: under the seed's 70/30 mix with each
// request's cost, an endpoint 5× slower than its 7 peers gets few requests
// (under 3 %) — and almost no heavy one, whose cost makes it 5× × 9.33
// dearer there —
// yet is probed in every 10 s window, and gets its share again once fast.
func TestLeastWorkAvoidsASlowEndpoint(t *testing.T) {
	ms := members(8)
	slow := ms[3].Address
	f := newFixture(t, policyConfig(LeastWork), ms, 1)
	factor := 5.0
	s := &sim{clk: f.clk, r: rng.New(2), p: f.o.NewPicker(nil), rate: 400, mix: workload.Default(), costed: true,
		latency: func(ep *Endpoint, base time.Duration) time.Duration {
			if ep.Address() == slow {
				return time.Duration(float64(base) * factor)
			}
			return base
		}}
	s.run(epoch.Add(20 * time.Second))
	for w := range 6 {
		got := s.run(f.clk.Now().Add(10 * time.Second))
		share := float64(got[slow]) / float64(total(got))
		heavy := float64(s.heavy[slow]) / float64(total(s.heavy))
		t.Logf("window %d: slow endpoint %d of %d picks (%.2f %%), %.2f %% of the heavy ones", w, got[slow], total(got), 100*share, 100*heavy)
		if share >= 0.03 || heavy >= 0.002 {
			t.Errorf("window %d: slow endpoint share %.2f %% (want < 3 %%), of heavy requests %.2f %% (want < 0.2 %%)", w, 100*share, 100*heavy)
		}
		if got[slow] == 0 {
			t.Errorf("window %d: slow endpoint never probed", w)
		}
	}
	factor = 1
	checkRecovered(t, s, f.clk.Now(), slow)
}

// TestLeastWorkIdenticalEndpointsEven: identical endpoints under the 70/30
// mix with costs each get 20 % ± 1 pp of the requests, and of the heavy
// ones.
func TestLeastWorkIdenticalEndpointsEven(t *testing.T) {
	ms := members(5)
	f := newFixture(t, policyConfig(LeastWork), ms, 7)
	s := &sim{clk: f.clk, r: rng.New(8), p: f.o.NewPicker(nil), rate: 2000, mix: workload.Default(), costed: true,
		latency: func(_ *Endpoint, base time.Duration) time.Duration { return base }}
	got := s.run(epoch.Add(50 * time.Second))
	n, nh := total(got), total(s.heavy)
	if n < 95_000 {
		t.Fatalf("only %d picks", n)
	}
	for _, m := range ms {
		within(t, m.Address, float64(got[m.Address])/float64(n), 0.2, 0.01)
		within(t, m.Address+" (heavy)", float64(s.heavy[m.Address])/float64(nh), 0.2, 0.01)
	}
}

// TestNewcomerStartsFromTheMedian: an endpoint that joins starts with the
// origin's median latency per unit of cost among the endpoints that have
// answered (not default_rtt) and their median concurrency limit.
func TestNewcomerStartsFromTheMedian(t *testing.T) {
	ms := members(3)
	f := newFixture(t, policyConfig(LeastWork), ms, 5)
	for i, lat := range []time.Duration{12 * time.Millisecond, 20 * time.Millisecond, 90 * time.Millisecond} {
		p := f.o.NewPicker([]string{ms[i].Address})
		for range 200 {
			ep, tk, _ := p.PickCost(2) // latency per unit of cost: lat / 2
			ep.End(tk, lat, Success)
		}
	}
	fresh := Member{Address: "10.0.0.9:80", Weight: 1}
	if err := f.o.Update(append(ms, fresh)); err != nil {
		t.Fatal(err)
	}
	st := f.o.Endpoint(fresh.Address).Status()
	if want := 10 * time.Millisecond; absDur(st.CostLatency-want) > 100*time.Microsecond {
		t.Errorf("newcomer's latency per unit of cost %v, want the median %v (default_rtt is %v)", st.CostLatency, want, DefaultConfig().DefaultRTT)
	}
	if st.Concurrency < 1 {
		t.Errorf("newcomer's concurrency limit %v", st.Concurrency)
	}

	// With no endpoint measured, a newcomer starts at default_rtt.
	g := newFixture(t, policyConfig(LeastWork), members(2), 5)
	if err := g.o.Update(append(members(2), fresh)); err != nil {
		t.Fatal(err)
	}
	if got := g.o.Endpoint(fresh.Address).Status().CostLatency; got != DefaultConfig().DefaultRTT {
		t.Errorf("newcomer of an unmeasured origin: %v, want default_rtt", got)
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// TestSlowStartBoundsTheNewcomersWork: a newcomer in slow start, as fast
// as its peers, and so with the least work in flight, is given a request
// only while it holds none, or while the request keeps its work within
// its slow-start factor × its fair share of the work in flight (10 % × a
// fifth at first). Its share of the picks is another matter: it may take
// many light requests within that work — and by the end of slow start it
// holds its share.
func TestSlowStartBoundsTheNewcomersWork(t *testing.T) {
	ms := members(4)
	f := newFixture(t, policyConfig(LeastWork), ms, 9)
	s := &sim{clk: f.clk, r: rng.New(10), p: f.o.NewPicker(nil), rate: 2000, mix: workload.Default(), costed: true,
		latency: func(_ *Endpoint, base time.Duration) time.Duration { return base }}
	s.run(epoch.Add(10 * time.Second))
	fresh := Member{Address: "10.0.0.9:80", Weight: 1}
	joined := f.clk.Now()
	if err := f.o.Update(append(ms, fresh)); err != nil {
		t.Fatal(err)
	}
	newcomer := f.o.Endpoint(fresh.Address)
	var given, over int
	var peak float64 // the newcomer's work ÷ its peers' mean, at its highest
	s.placed = func(ep *Endpoint, tk Ticket) {
		var all float64
		for _, e := range f.o.Endpoints() {
			all += float64(e.work.Load()) / workScale
		}
		mine := float64(newcomer.work.Load()) / workScale
		if ep != newcomer {
			if now := f.clk.Now(); now.Sub(joined) < 6*time.Second {
				peak = max(peak, mine/((all-mine)/4))
			}
			return
		}
		given++
		factor := f.o.t().prm.effective(1, joined.Sub(epoch).Nanoseconds(), f.clk.Now().Sub(epoch).Nanoseconds())
		if before := mine - tk.Cost(); before > 0 && mine > factor*all/5+1e-9 {
			over++
		}
	}
	s.run(joined.Add(60 * time.Second))
	s.placed = nil
	late := s.run(joined.Add(70 * time.Second))
	t.Logf("newcomer: %d requests in its slow start, %d over its share of the work; its work at most %.2f× its peers' in its first 6 s; %.2f %% of the picks after",
		given, over, peak, 100*float64(late[fresh.Address])/float64(total(late)))
	if over > given/1000 {
		t.Errorf("%d of %d requests took the newcomer above its slow-start share of the work in flight", over, given)
	}
	if peak > 0.15 {
		t.Errorf("the newcomer held %.2f× its peers' work at a 10 %% weight, want ≤ 0.15×", peak)
	}
	within(t, "after slow start", float64(late[fresh.Address])/float64(total(late)), 0.2, 0.02)
}

// TestQueueSignalRaisesTheScoreAtOnce: two endpoints with the same
// history (15 ms per light request) each hold one light request; A's has
// been in flight for 200 ms — far beyond what its latency explains, so
// something waits there — B's for 1 ms. least_work sends every next
// request to B at once, before any answer shows A's slowness; peak_ewma,
// which sees two equal endpoints with one request each, keeps sending A
// its share.
func TestQueueSignalRaisesTheScoreAtOnce(t *testing.T) {
	for _, tc := range []struct {
		pol     Policy
		avoided bool
	}{{LeastWork, true}, {PeakEWMA, false}} {
		t.Run(string(tc.pol), func(t *testing.T) {
			ms := members(2)
			f := newFixture(t, policyConfig(tc.pol), ms, 13)
			a, b := f.o.Endpoint(ms[0].Address), f.o.Endpoint(ms[1].Address)
			pa, pb := f.o.NewPicker([]string{ms[0].Address}), f.o.NewPicker([]string{ms[1].Address})
			for range 100 {
				for _, p := range []*Picker{pa, pb} {
					ep, tk, _ := p.PickCost(1)
					f.clk.Advance(time.Millisecond)
					ep.End(tk, 15*time.Millisecond, Success)
				}
			}
			_, ta, _ := pa.PickCost(1)
			f.clk.Advance(200 * time.Millisecond)
			_, tb, _ := pb.PickCost(1)
			f.clk.Advance(time.Millisecond)
			both := f.o.NewPicker(nil)
			toA := 0
			for range 100 {
				ep, tk, _ := both.PickCost(1)
				if ep == a {
					toA++
				}
				ep.End(tk, 0, Shed)
			}
			a.End(ta, 0, Shed)
			b.End(tb, 0, Shed)
			t.Logf("%s: %d of 100 requests to the endpoint whose request is 200 ms old", tc.pol, toA)
			if tc.avoided && toA != 0 {
				t.Errorf("A got %d of 100 requests: its ageing request did not raise its score", toA)
			}
			if !tc.avoided && toA < 20 {
				t.Errorf("peak_ewma gave A only %d: the test would show nothing", toA)
			}
		})
	}
}

// TestConcurrencyLimitLearned: an endpoint that answers at its usual speed
// with up to 8 requests in flight, and 3× slower beyond, learns a limit of
// 8; when it later slows down from 4 in flight on, the limit falls toward
// 4 (to below 6: the mean it is judged against rises with the slow
// answers, and stops calling them slow).
func TestConcurrencyLimitLearned(t *testing.T) {
	ms := members(1)
	f := newFixture(t, policyConfig(LeastWork), ms, 17)
	p := f.o.NewPicker(nil)
	ep := f.o.Endpoint(ms[0].Address)
	burst := func(n, knee int) {
		var tickets []Ticket
		for range n {
			_, tk, _ := p.PickCost(1)
			tickets = append(tickets, tk)
		}
		for i, tk := range tickets {
			lat := 15 * time.Millisecond
			if i >= knee { // waited for a worker
				lat = 45 * time.Millisecond
			}
			ep.End(tk, lat, Success)
		}
	}
	for range 50 {
		burst(12, 8)
	}
	if l := ep.Status().Concurrency; l < 8 || l > 9 {
		t.Fatalf("learned limit %.2f, want 8 (the knee)", l)
	}
	for range 50 {
		burst(12, 4)
	}
	if l := ep.Status().Concurrency; l >= 6 {
		t.Errorf("limit %.2f after the knee moved to 4, want < 6", l)
	}
}

// TestPickCostDoesNotAllocate: least_work's pick and end, light and heavy,
// allocate nothing.
func TestPickCostDoesNotAllocate(t *testing.T) {
	cfg := zoneConfig("a")
	cfg.Policy = LeastWork
	ms := members(12, "a", "b")
	f := newFixture(t, cfg, ms[:10], 73)
	if err := f.o.Update(ms); err != nil { // two endpoints in slow start
		t.Fatal(err)
	}
	p := f.o.NewPicker(nil)
	for _, cost := range []float64{1, heavyCost} {
		allocs := testing.AllocsPerRun(1000, func() {
			ep, tk, err := p.PickCost(cost)
			if err != nil {
				t.Fatal(err)
			}
			f.clk.Advance(time.Millisecond)
			ep.End(tk, 10*time.Millisecond, Success)
		})
		if allocs != 0 {
			t.Errorf("cost %.2f: %.1f allocs per PickCost+End, want 0", cost, allocs)
		}
	}
}

// TestSlowStartBoundsTheNewcomersRequests is bench/peers' cold join on
// the injected clock: a fifth endpoint, 10× slow and warming over 40 s
// (workload.Cold), joins four (one 5× slow) under 300 req/s of the 70/30
// mix. In slow start it is given a request only while that keeps its
// requests in flight within max(1, its slow-start factor × its learned
// concurrency limit) — the limit its peers taught (8 here: the most they
// hold at their usual speed) — so over its first 30 s it holds at most 4,
// as HAProxy's slowstart held it, where the work bound alone let it reach
// its peers' limit; and it still takes its fair fifth once warm.
func TestSlowStartBoundsTheNewcomersRequests(t *testing.T) {
	ms := members(4)
	f := newFixture(t, policyConfig(LeastWork), ms, 31)
	slow, cold := ms[0].Address, "10.0.0.9:80"
	var joined time.Time
	s := &sim{clk: f.clk, r: rng.New(32), p: f.o.NewPicker(nil), rate: 300, mix: workload.Default(), costed: true, workers: 8,
		latency: func(ep *Endpoint, base time.Duration) time.Duration {
			switch ep.Address() {
			case slow:
				return 5 * base
			case cold:
				return time.Duration(float64(base) * workload.Cold().At(f.clk.Now().Sub(joined)))
			}
			return base
		}}
	s.run(epoch.Add(20 * time.Second))
	joined = f.clk.Now()
	if err := f.o.Update(append(ms, Member{Address: cold, Weight: 1})); err != nil {
		t.Fatal(err)
	}
	newcomer := f.o.Endpoint(cold)
	seed := newcomer.limitNow()
	var peak, over int64
	s.placed = func(ep *Endpoint, _ Ticket) {
		if ep != newcomer {
			return
		}
		now := f.clk.Now()
		n := ep.Active()
		if now.Sub(joined) < 30*time.Second {
			peak = max(peak, n)
		}
		factor := f.o.t().prm.effective(1, joined.Sub(epoch).Nanoseconds(), now.Sub(epoch).Nanoseconds())
		if float64(n) > ep.rampCap(factor) {
			over++
		}
	}
	early := s.run(joined.Add(30 * time.Second))
	s.run(joined.Add(60 * time.Second))
	s.placed = nil
	late := s.run(joined.Add(75 * time.Second))
	share := 5 * float64(late[cold]) / float64(total(late))
	t.Logf("newcomer: limit seeded at %.2f; %d of %d requests in its first 30 s, at most %d in flight; %d picks over its bound; from 60 s %.2f× a fair fifth",
		seed, early[cold], total(early), peak, over, share)
	if seed < 4 {
		t.Errorf("the newcomer's limit was seeded at %.2f: the peers' learned limits should be near their 8", seed)
	}
	if over > 0 {
		t.Errorf("%d picks took the newcomer above max(1, factor × limit) requests in flight", over)
	}
	if peak > 4 {
		t.Errorf("the newcomer held %d requests in flight in its first 30 s, want ≤ 4", peak)
	}
	if early[cold] == 0 {
		t.Error("the newcomer got nothing in its first 30 s")
	}
	if share < 0.8 {
		t.Errorf("the newcomer's share from 60 to 75 s is %.2f× a fair fifth, want ≥ 0.8×", share)
	}
}
