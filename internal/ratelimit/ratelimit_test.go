package ratelimit

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/corput/corput/internal/clock"
)

// offer sends requests at offered a second for d on clk, through allow,
// and returns how many passed.
func offer(clk *clock.Fake, offered int, d time.Duration, allow func() bool) (passed, total int) {
	gap := time.Second / time.Duration(offered)
	for at := time.Duration(0); at < d; at += gap {
		if allow() {
			passed++
		}
		total++
		clk.Advance(gap)
	}
	return passed, total
}

// TestRateOverTenSeconds: 1,000 a second with a burst of 200, offered
// 5,000 a second for 10 s, lets 10 × 1,000 + 200 through (one more for
// the request at the window's end, which finds a token).
func TestRateOverTenSeconds(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		clk := clock.NewFake(time.Unix(1000, 0))
		l := New(Settings{Rate: 1000, Burst: 200, Keyed: keyed, MaxKeys: 1024}, clk)
		a := netip.MustParseAddr("192.0.2.1")
		allow := l.Allow
		if keyed {
			allow = func() bool { return l.AllowAddr(a) }
		}
		passed, total := offer(clk, 5000, 10*time.Second, allow)
		want := 10*1000 + 200
		if passed < want-1 || passed > want+1 {
			t.Errorf("keyed=%v: %d of %d passed, want %d ± 1", keyed, passed, total, want)
		}
		if total != 50000 {
			t.Errorf("offered %d, want 50000", total)
		}
	}
}

func TestBurstThenRate(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	l := New(Settings{Rate: 10, Burst: 3}, clk)
	for i := range 3 {
		if !l.Allow() {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	if l.Allow() {
		t.Fatal("a fourth request at once passed a burst of 3")
	}
	clk.Advance(99 * time.Millisecond)
	if l.Allow() {
		t.Fatal("passed before a token came back (100 ms at 10/s)")
	}
	clk.Advance(time.Millisecond)
	if !l.Allow() || l.Allow() {
		t.Fatal("one token after 100 ms, exactly")
	}
	clk.Advance(time.Hour)
	for i := range 3 {
		if !l.Allow() {
			t.Fatalf("after a quiet hour, request %d refused: the bucket must be full, and no fuller", i)
		}
	}
	if l.Allow() {
		t.Fatal("a quiet hour filled the bucket above its burst")
	}
}

func TestKeysApart(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	l := New(Settings{Rate: 1, Burst: 1, Keyed: true, MaxKeys: 1024}, clk)
	if !l.AllowBytes([]byte("alice")) || l.AllowBytes([]byte("alice")) {
		t.Fatal("alice: one, then refused")
	}
	if !l.AllowBytes([]byte("bob")) {
		t.Fatal("bob paid for alice")
	}
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("::ffff:192.0.2.1")
	if !l.AllowAddr(a) || l.AllowAddr(b) {
		t.Fatal("an address and its IPv4-mapped spelling are one client")
	}
}

// TestBoundedTable: a million keys keep the table at its slots, and a key
// that emptied its bucket keeps it while a million newcomers, each of
// which took one token, come and go: eviction takes the fuller bucket.
func TestBoundedTable(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	l := New(Settings{Rate: 1, Burst: 10, Keyed: true, MaxKeys: 4096}, clk)
	if l.Slots() != 4096 {
		t.Fatalf("slots %d, want 4096", l.Slots())
	}
	hot := netip.MustParseAddr("198.51.100.1")
	for range 10 {
		l.AllowAddr(hot)
	}
	for i := range 1_000_000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		l.AllowAddr(a)
		if i%100_000 == 0 && l.AllowAddr(hot) {
			t.Fatalf("after %d newcomers the hot key's bucket was refilled", i)
		}
	}
	used := 0
	for i := range l.shards {
		for _, s := range l.shards[i].slots {
			if s.key != 0 {
				used++
			}
		}
	}
	if used > l.Slots() {
		t.Fatalf("%d keys held in %d slots", used, l.Slots())
	}
}

func TestConcurrent(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	for _, keyed := range []bool{false, true} {
		l := New(Settings{Rate: 1, Burst: 1000, Keyed: keyed, MaxKeys: 64}, clk)
		var mu sync.Mutex
		passed := 0
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				n := 0
				for range 500 {
					if (!keyed && l.Allow()) || (keyed && l.AllowBytes([]byte("k"))) {
						n++
					}
				}
				mu.Lock()
				passed += n
				mu.Unlock()
			})
		}
		wg.Wait()
		if passed != 1000 {
			t.Fatalf("keyed=%v: %d of 4000 concurrent requests passed a burst of 1000 with the clock stopped", keyed, passed)
		}
	}
}

// BenchmarkAllowKnownKey is the per-request cost of a keyed limit for a
// client already in the table: 0 allocs/op.
func BenchmarkAllowKnownKey(b *testing.B) {
	l := New(Settings{Rate: 1e9, Burst: 1e9, Keyed: true, MaxKeys: 65536}, nil)
	a := netip.MustParseAddr("192.0.2.1")
	b.ReportAllocs()
	for b.Loop() {
		l.AllowAddr(a)
	}
}

func BenchmarkAllowHeaderKey(b *testing.B) {
	l := New(Settings{Rate: 1e9, Burst: 1e9, Keyed: true, MaxKeys: 65536}, nil)
	k := []byte("key-0123456789")
	b.ReportAllocs()
	for b.Loop() {
		l.AllowBytes(k)
	}
}

func BenchmarkAllowRoute(b *testing.B) {
	l := New(Settings{Rate: 1e9, Burst: 1e9}, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Allow()
		}
	})
}
