package balance

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/rng"
)

func stickyConfig(p Policy) Config {
	c := DefaultConfig()
	c.Policy = p
	return c
}

// keyOfInt is the key of request key number i.
func keyOfInt(i int) Key { return KeyOfString(fmt.Sprintf("key-%d", i)) }

// pickKey places a request of key k and ends it at once.
func pickKey(t testing.TB, p *Picker, k Key) *Endpoint {
	t.Helper()
	ep, tk, err := p.PickKeyed(1, k)
	if err != nil {
		t.Fatal(err)
	}
	ep.End(tk, time.Millisecond, Success)
	return ep
}

// ownerCounts counts the table's slots per endpoint address.
func ownerCounts(tab *keyTable) map[string]int {
	out := map[string]int{}
	for _, i := range tab.seq {
		out[tab.eps[i].addr]++
	}
	return out
}

// maxOverMean is the largest count over the mean count of n endpoints.
func maxOverMean(counts map[string]int, n int) float64 {
	total, most := 0, 0
	for _, c := range counts {
		total += c
		most = max(most, c)
	}
	return float64(most) / (float64(total) / float64(n))
}

// TestMaglevTableN100: with N = 100 and M = 65,537 (docs/decisions.md,
// "Sticky routing", maglev's table size): slots and 10^6 seeded random keys per endpoint, max/mean
// ≤ 1.05; when one endpoint leaves, the keys that move beyond the ones it
// held are ≤ 1.5 %, for each of 10 endpoints taken out in turn.
func TestMaglevTableN100(t *testing.T) {
	const n, keys = 100, 1_000_000
	ms := members(n)
	f := newFixture(t, stickyConfig(Maglev), ms, 1)
	tab := f.o.tab
	if len(tab.seq) != config.DefaultTableSize {
		t.Fatalf("table size %d, want %d", len(tab.seq), config.DefaultTableSize)
	}
	slots := ownerCounts(tab)
	if len(slots) != n {
		t.Fatalf("%d endpoints own slots, want %d", len(slots), n)
	}
	r := rng.New(21)
	hs := make([]uint64, keys)
	byKey := map[string]int{}
	for i := range hs {
		hs[i] = r.Uint64()
		byKey[tab.eps[tab.seq[tab.start(hs[i])]].addr]++
	}
	slotRatio, keyRatio := maxOverMean(slots, n), maxOverMean(byKey, n)
	t.Logf("N=%d M=%d: slots per endpoint max/mean %.4f; %d random keys per endpoint max/mean %.4f", n, len(tab.seq), slotRatio, keys, keyRatio)
	if slotRatio > 1.05 || keyRatio > 1.05 {
		t.Errorf("max/mean: slots %.4f, keys %.4f; want ≤ 1.05", slotRatio, keyRatio)
	}
	worst := 0.0
	for _, gone := range []int{0, 7, 19, 33, 42, 50, 61, 77, 88, 99} {
		rest := slices.Delete(slices.Clone(ms), gone, gone+1)
		g := newFixture(t, stickyConfig(Maglev), rest, 2)
		after := g.o.tab
		moved := 0
		for _, h := range hs {
			was := tab.eps[tab.seq[tab.start(h)]].addr
			now := after.eps[after.seq[after.start(h)]].addr
			if was != now && was != ms[gone].Address {
				moved++
			}
		}
		frac := float64(moved) / keys
		worst = max(worst, frac)
		if frac > 0.015 {
			t.Errorf("%s leaves: %.3f %% of keys move beyond its own, want ≤ 1.5 %%", ms[gone].Address, 100*frac)
		}
	}
	t.Logf("one endpoint of %d leaving: at most %.3f %% of keys move beyond its own (10 endpoints tried)", n, 100*worst)
}

// TestRingHashSpreadN100 reports the ring's spread beside maglev's (the
// figures docs/balancing.md compares): 10^6 seeded keys over 100 endpoints
// of 100 points each; ketama's spread is wider than maglev's by design.
func TestRingHashSpreadN100(t *testing.T) {
	const n, keys = 100, 1_000_000
	tab := newFixture(t, stickyConfig(RingHash), members(n), 1).o.tab
	r := rng.New(21)
	byKey := map[string]int{}
	for range keys {
		byKey[tab.eps[tab.seq[tab.start(r.Uint64())]].addr]++
	}
	ratio := maxOverMean(byKey, n)
	t.Logf("ring_hash N=%d, %d points: %d random keys per endpoint max/mean %.4f", n, len(tab.seq), keys, ratio)
	if len(byKey) != n || ratio > 1.6 {
		t.Errorf("%d endpoints reached, max/mean %.4f; want all %d, ≤ 1.6", len(byKey), ratio, n)
	}
}

// TestRingHashMovesOnlyTheLeaversKeys: on the ring, only the keys of an
// endpoint that leaves move; points per endpoint follow the weights.
func TestRingHashMovesOnlyTheLeaversKeys(t *testing.T) {
	ms := members(20)
	ms[3].Weight = 3
	f := newFixture(t, stickyConfig(RingHash), ms, 1)
	tab := f.o.tab
	pts := ownerCounts(tab)
	if got, one := pts[ms[3].Address], pts[ms[0].Address]; got != 300 || one != 100 {
		t.Errorf("points: %d for weight 3, %d for weight 1; want 300 and 100", got, one)
	}
	rest := slices.Delete(slices.Clone(ms), 5, 6)
	after := newFixture(t, stickyConfig(RingHash), rest, 2).o.tab
	r := rng.New(5)
	for range 100_000 {
		h := r.Uint64()
		was := tab.eps[tab.seq[tab.start(h)]].addr
		now := after.eps[after.seq[after.start(h)]].addr
		if was != now && was != ms[5].Address {
			t.Fatalf("key %x moved from %s to %s, though only %s left", h, was, now, ms[5].Address)
		}
	}
}

// TestStickySameEverywhere: a key's endpoint depends on the membership
// only — not on the loop's subset, the gateway's seed or the order the
// members are listed in.
func TestStickySameEverywhere(t *testing.T) {
	for _, pol := range StickyPolicies() {
		t.Run(string(pol), func(t *testing.T) {
			ms := members(30)
			rev := slices.Clone(ms)
			slices.Reverse(rev)
			a := newFixture(t, stickyConfig(pol), ms, 1)
			b := newFixture(t, stickyConfig(pol), rev, 99)
			pickers := []*Picker{a.o.NewPicker(nil), a.o.NewPicker(addrs(ms[:5])), b.o.NewPicker(addrs(ms[20:])), b.o.NewPicker(nil)}
			spread := map[string]bool{}
			for i := range 2000 {
				k := keyOfInt(i)
				want := pickKey(t, pickers[0], k).Address()
				spread[want] = true
				for j, p := range pickers[1:] {
					if got := pickKey(t, p, k).Address(); got != want {
						t.Fatalf("key %d: picker %d chose %s, picker 0 %s", i, j+1, got, want)
					}
				}
			}
			if len(spread) != len(ms) {
				t.Errorf("2000 keys reached %d of %d endpoints", len(spread), len(ms))
			}
		})
	}
}

// TestStickyEjection: the keys of an ejected endpoint go to the next
// endpoint of their order (the same from every loop), the other keys stay,
// and all come back when it returns.
func TestStickyEjection(t *testing.T) {
	for _, pol := range StickyPolicies() {
		t.Run(string(pol), func(t *testing.T) {
			cfg := stickyConfig(pol)
			cfg.SlowStart.Window = 0
			f := newFixture(t, cfg, members(10), 1)
			p, q := f.o.NewPicker(nil), f.o.NewPicker(addrs(members(10)[:3]))
			home := map[int]string{}
			for i := range 500 {
				home[i] = pickKey(t, p, keyOfInt(i)).Address()
			}
			victim := home[0]
			ep := f.o.Endpoint(victim)
			for range cfg.Outlier.Consecutive5xx {
				ep, tk, _ := p.PickKeyed(1, keyOfInt(0))
				ep.End(tk, time.Millisecond, ServerError)
			}
			if !ep.Status().Ejected {
				t.Fatalf("%s not ejected after %d failures", victim, cfg.Outlier.Consecutive5xx)
			}
			moved := 0
			for i := range 500 {
				got := pickKey(t, p, keyOfInt(i)).Address()
				if other := pickKey(t, q, keyOfInt(i)).Address(); other != got {
					t.Fatalf("key %d: loops disagree during the ejection: %s and %s", i, got, other)
				}
				switch {
				case home[i] == victim && got == victim:
					t.Fatalf("key %d still goes to ejected %s", i, victim)
				case home[i] == victim:
					moved++
				case got != home[i]:
					t.Fatalf("key %d moved from %s to %s though its endpoint is in service", i, home[i], got)
				}
			}
			if moved == 0 {
				t.Fatal("no key belonged to the ejected endpoint")
			}
			f.clk.Advance(cfg.Outlier.BaseEjectionTime)
			for i := range 500 {
				if got := pickKey(t, p, keyOfInt(i)).Address(); got != home[i] {
					t.Fatalf("after the return: key %d at %s, want its endpoint %s", i, got, home[i])
				}
			}
		})
	}
}

// holdKey places a request of key k and keeps it in flight.
func holdKey(t *testing.T, p *Picker, k Key) (*Endpoint, Ticket) {
	t.Helper()
	ep, tk, err := p.PickKeyed(1, k)
	if err != nil {
		t.Fatal(err)
	}
	return ep, tk
}

// ceilDiv is ⌈a/b⌉ for positive integers.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// TestBoundedLoad: requests held in flight, half of them of one hot key:
// at every pick, the endpoint chosen had fewer than ⌈c·(m+1)/n⌉ in flight
// (c = 1.25 = 5/4, m the origin's requests in flight before it), the hot
// key's endpoint fills to its bound and the overflow walks the same order
// from two loops.
func TestBoundedLoad(t *testing.T) {
	for _, pol := range StickyPolicies() {
		t.Run(string(pol), func(t *testing.T) {
			const n = 8
			f := newFixture(t, stickyConfig(pol), members(n), 1)
			loops := []*Picker{f.o.NewPicker(nil), f.o.NewPicker(nil)}
			hot := KeyOfString("merchant-42")
			home := pickKey(t, loops[0], hot)
			type held struct {
				ep *Endpoint
				tk Ticket
			}
			var inFlight []held
			r := rng.New(3)
			overflow := 0
			for i := range 400 {
				k := hot
				if i%2 == 1 {
					k = keyOfInt(int(r.Uint64() % 1e6))
				}
				m := int64(len(inFlight))
				if f.o.inflight.Load() != m {
					t.Fatalf("origin counts %d in flight, the test holds %d", f.o.inflight.Load(), m)
				}
				ep, tk := holdKey(t, loops[i%2], k)
				bound := ceilDiv(5*(m+1), 4*n)
				if before := ep.Active() - 1; before >= bound {
					t.Fatalf("pick %d: %s had %d in flight, bound ⌈1.25·%d/%d⌉ = %d", i, ep.Address(), before, m+1, n, bound)
				}
				if k == hot && ep != home {
					overflow++
				}
				inFlight = append(inFlight, held{ep, tk})
				if len(inFlight) > 40 { // end a random one
					j := r.IntN(len(inFlight))
					inFlight[j].ep.End(inFlight[j].tk, time.Millisecond, Success)
					inFlight = slices.Delete(inFlight, j, j+1)
				}
			}
			if overflow == 0 {
				t.Error("the hot key never overflowed its endpoint: the bound was never reached")
			}
			if home.Active() < ceilDiv(5*40, 4*n)-1 {
				t.Errorf("hot endpoint holds %d, want it near its bound %d", home.Active(), ceilDiv(5*41, 4*n))
			}
			for _, h := range inFlight {
				h.ep.End(h.tk, time.Millisecond, Success)
			}
			if f.o.inflight.Load() != 0 {
				t.Errorf("%d in flight after every request ended", f.o.inflight.Load())
			}
		})
	}
}

// TestStickySlowStart: a joining endpoint ramps through its bound, not by
// a rebuild: the order is the same object through the ramp, the
// newcomer's keys go to it while it is under its scaled bound, and
// overflow moves on.
func TestStickySlowStart(t *testing.T) {
	cfg := stickyConfig(Maglev)
	f := newFixture(t, cfg, members(4), 1)
	p := f.o.NewPicker(nil)
	if err := f.o.Update(members(5)); err != nil {
		t.Fatal(err)
	}
	tab := f.o.tab
	fresh := f.o.Endpoint(members(5)[4].Address)
	var mine Key
	for i := range 1000 {
		if k := keyOfInt(i); pickKey(t, p, k) == fresh {
			mine = k
			break
		}
	}
	if !mine.ok {
		t.Fatal("no key belongs to the newcomer")
	}
	// 39 requests of other keys in flight, then the newcomer's key: its
	// bound at the 10 % floor is ⌈1.25 × 40 × 0.1 / 4.1⌉ = 2.
	var held []Ticket
	var eps []*Endpoint
	for i := 0; len(held) < 39; i++ {
		if k := keyOfInt(10_000 + i); k != mine {
			ep, tk := holdKey(t, p, k)
			if ep == fresh {
				ep.End(tk, time.Millisecond, Success)
				continue
			}
			eps, held = append(eps, ep), append(held, tk)
		}
	}
	got := []string{}
	for range 3 {
		ep, tk := holdKey(t, p, mine)
		got = append(got, ep.Address())
		eps, held = append(eps, ep), append(held, tk)
	}
	if got[0] != fresh.Address() || got[1] != fresh.Address() || got[2] == fresh.Address() {
		t.Errorf("newcomer's key at 10 %% of its ramp: %v; want the newcomer twice (bound 2), then the next endpoint", got)
	}
	f.clk.Advance(cfg.SlowStart.Window / 2)
	if f.o.tab != tab {
		t.Error("the ramp rebuilt the table")
	}
	for i := range held {
		eps[i].End(held[i], time.Millisecond, Success)
	}
}

// TestStickyWithoutKey: a request without a key takes the fallback over the
// whole origin.
func TestStickyWithoutKey(t *testing.T) {
	f := newFixture(t, stickyConfig(Maglev), members(6), 1)
	sh := shares(t, f.o.NewPicker(addrs(members(6)[:2])), 6000, time.Millisecond)
	if len(sh) != 6 {
		t.Errorf("requests without a key reached %d of 6 endpoints: %v", len(sh), sh)
	}
}

// TestStickyRetryAvoids: a retry goes to the next endpoint of the key's
// order that it has not tried.
func TestStickyRetryAvoids(t *testing.T) {
	for _, pol := range StickyPolicies() {
		f := newFixture(t, stickyConfig(pol), members(6), 1)
		p := f.o.NewPicker(nil)
		k := KeyOfString("retry-me")
		var tried []*Endpoint
		for range 6 {
			ep, tk, err := p.PickKeyedAvoiding(tried, 1, k)
			if err != nil {
				t.Fatal(err)
			}
			ep.End(tk, 0, Shed)
			if slices.Contains(tried, ep) {
				t.Fatalf("%s: retry went back to %s", pol, ep.Address())
			}
			tried = append(tried, ep)
		}
		if _, _, err := p.PickKeyedAvoiding(tried, 1, k); err != ErrAllTried {
			t.Errorf("%s: every endpoint tried: %v, want ErrAllTried", pol, err)
		}
	}
}

// TestPickKeyedDoesNotAllocate: a keyed pick and its end allocate nothing.
func TestPickKeyedDoesNotAllocate(t *testing.T) {
	for _, pol := range StickyPolicies() {
		f := newFixture(t, stickyConfig(pol), members(50), 1)
		p := f.o.NewPicker(nil)
		k := KeyOfString("merchant-7")
		if allocs := testing.AllocsPerRun(1000, func() {
			ep, tk, _ := p.PickKeyed(1, k)
			ep.End(tk, time.Millisecond, Success)
		}); allocs != 0 {
			t.Errorf("%s: %.1f allocs per keyed pick, want 0", pol, allocs)
		}
	}
}

func TestStickyConfigValidate(t *testing.T) {
	c := stickyConfig(Maglev)
	c.Fallback, c.BalanceFactor, c.TableSize = RingHash, 0.5, 65536
	err := c.Validate()
	for _, want := range []string{"balancer.fallback", "balancer.balance_factor", "balancer.table_size"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	if n := tableSize(65537, 1000); n < 100_000 || !config.IsPrime(n) {
		t.Errorf("1000 endpoints: table of %d, want a prime ≥ 100,000", n)
	}
	if math.Abs(float64(tableSize(65537, 10))-65537) > 0 {
		t.Error("10 endpoints: the configured size should stand")
	}
}

// TestReconfigureToSticky: a reload to maglev builds the table and widens
// every loop to the whole origin; back to peak_ewma, the loop's subset
// returns and the table goes.
func TestReconfigureToSticky(t *testing.T) {
	ms := members(8)
	f := newFixture(t, DefaultConfig(), ms, 1)
	p := f.o.NewPicker(addrs(ms[:3]))
	if err := f.o.Reconfigure(stickyConfig(Maglev)); err != nil {
		t.Fatal(err)
	}
	if f.o.tab == nil || len(p.Candidates()) != 8 {
		t.Fatalf("after the reload to maglev: table %v, %d candidates; want a table and all 8", f.o.tab != nil, len(p.Candidates()))
	}
	k := KeyOfString("m")
	want := pickKey(t, p, k)
	if got := pickKey(t, f.o.NewPicker(nil), k); got != want {
		t.Errorf("key at %s from the reloaded loop, %s from a new one", want.Address(), got.Address())
	}
	held, tk := holdKey(t, p, k) // counted on maglev, ended on peak_ewma
	if err := f.o.Reconfigure(DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	if f.o.tab != nil || len(p.Candidates()) != 3 {
		t.Errorf("back to peak_ewma: table %v, %d candidates; want none and the subset's 3", f.o.tab != nil, len(p.Candidates()))
	}
	other, tk2 := holdKey(t, p, k) // not counted, ended on maglev
	held.End(tk, time.Millisecond, Success)
	if err := f.o.Reconfigure(stickyConfig(Maglev)); err != nil {
		t.Fatal(err)
	}
	other.End(tk2, time.Millisecond, Success)
	if m := f.o.inflight.Load(); m != 0 {
		t.Errorf("in flight %d after every request ended across reloads, want 0", m)
	}
}
