// Package ratelimit is a route's local rate limit (routes[].rate_limit): a
// token bucket, one for the route or one per key (the client's address, or
// a request header's value), answered 429 rate_limited over the limit.
//
// A bucket is kept as GCRA's one number, its theoretical arrival time
// (TAT): a request at now is let through when max(TAT, now) + interval
// stays within burst × interval of now, and TAT moves on by one interval.
// It is exactly a token bucket of Burst tokens refilled at Rate a second.
//
// Invariants:
//   - No global lock. The route's single bucket is one atomic word
//     (compare-and-swap); keyed buckets live in a fixed table of shards,
//     each with its own mutex, chosen by the key's hash.
//   - Memory is bounded: the keyed table has MaxKeys slots (rounded up to a
//     power of two), 16 bytes each, allocated once. A key is placed in a
//     set of four slots by its hash; a new key takes the slot of its set
//     whose TAT is the oldest. A slot whose TAT has passed holds a full
//     bucket, the same as no slot at all, so that eviction loses nothing;
//     only when all four keys of a set are being limited at once does a
//     newcomer give one of them a fresh bucket (it fails open, as nginx's
//     limit_req does when its zone is full, rather than refusing everyone).
//   - Allow allocates nothing, for a known key or a new one.
//   - Keys are 64-bit hashes (seeded per limiter): two clients share a
//     bucket only if their hashes collide.
package ratelimit

import (
	"hash/maphash"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/clock"
)

// Settings are a limiter's rate and size.
type Settings struct {
	Rate    float64 // tokens a second, > 0
	Burst   int     // the bucket's size, ≥ 1
	Keyed   bool    // one bucket per key (else one for all)
	MaxKeys int     // keyed: the table's slots (rounded up to a power of two, at least 64)
}

// Limiter is a token bucket, or a bounded table of them.
type Limiter struct {
	set       Settings
	clk       clock.Clock
	base      time.Time
	interval  int64 // ns a token
	tolerance int64 // burst × interval

	one    atomic.Int64 // the unkeyed bucket's TAT (ns since base)
	shards []shard
	setsIn uint64 // sets a shard (a power of two)
	seed   maphash.Seed
}

const (
	numShards = 64
	ways      = 4
)

type shard struct {
	mu    sync.Mutex
	slots []slot
	_     [40]byte // a shard to a cache line
}

type slot struct {
	key uint64 // 0: empty
	tat int64
}

// New returns a limiter for s, timed by clk (nil: the wall clock).
func New(s Settings, clk clock.Clock) *Limiter {
	if clk == nil {
		clk = clock.Real()
	}
	s.Burst = max(s.Burst, 1)
	interval := int64(math.Round(float64(time.Second) / s.Rate))
	l := &Limiter{set: s, clk: clk, base: clk.Now(), interval: max(interval, 1), seed: maphash.MakeSeed()}
	l.tolerance = int64(s.Burst) * l.interval
	if s.Keyed {
		n := max(s.MaxKeys, numShards*ways)
		slots := 1
		for slots < n {
			slots <<= 1
		}
		per := slots / numShards
		l.setsIn = uint64(per / ways)
		l.shards = make([]shard, numShards)
		for i := range l.shards {
			l.shards[i].slots = make([]slot, per)
		}
	}
	return l
}

// Settings are the limiter's settings.
func (l *Limiter) Settings() Settings { return l.set }

// Slots is the keyed table's number of slots (0 when unkeyed).
func (l *Limiter) Slots() int { return len(l.shards) * int(l.setsIn) * ways }

func (l *Limiter) now() int64 { return int64(l.clk.Now().Sub(l.base)) }

// take decides a request at now on a bucket whose TAT is tat: the new TAT,
// and whether the request passes.
func (l *Limiter) take(tat, now int64) (int64, bool) {
	next := max(tat, now) + l.interval
	if next-now > l.tolerance {
		return tat, false
	}
	return next, true
}

// Allow takes a token from the route's bucket (an unkeyed limiter).
func (l *Limiter) Allow() bool {
	now := l.now()
	for {
		tat := l.one.Load()
		next, ok := l.take(tat, now)
		if !ok {
			return false
		}
		if l.one.CompareAndSwap(tat, next) {
			return true
		}
	}
}

// AllowBytes takes a token from the bucket of key b.
func (l *Limiter) AllowBytes(b []byte) bool { return l.allowKey(maphash.Bytes(l.seed, b)) }

// AllowAddr takes a token from the bucket of address a.
func (l *Limiter) AllowAddr(a netip.Addr) bool {
	b := a.Unmap().As16()
	return l.allowKey(maphash.Bytes(l.seed, b[:]))
}

func (l *Limiter) allowKey(h uint64) bool {
	if h == 0 {
		h = 1
	}
	sh := &l.shards[h%numShards]
	set := sh.slots[((h/numShards)&(l.setsIn-1))*ways:][:ways]
	now := l.now()
	sh.mu.Lock()
	victim := 0
	for i := range set {
		if set[i].key == h {
			next, ok := l.take(set[i].tat, now)
			set[i].tat = next
			sh.mu.Unlock()
			return ok
		}
		if set[i].tat < set[victim].tat {
			victim = i
		}
	}
	next, ok := l.take(0, now) // a new key: a full bucket
	set[victim] = slot{key: h, tat: next}
	sh.mu.Unlock()
	return ok
}
