// Package rng is corput's seeded, lock-free random source. Balancers, pool
// jitter and the lab draw from it so that every run with the same seed makes
// the same choices when driven from one goroutine, while concurrent callers
// (many downstream connections on one loop) never take a lock.
//
// The generator is SplitMix64: the state advances by a fixed odd gamma with
// one atomic add, and the output is a bijective mix of the new state. It is
// fast and statistically sound for load-balancing draws; it is not for
// cryptography.
package rng

import (
	"math"
	"math/bits"
	"sync/atomic"
)

const gamma = 0x9e3779b97f4a7c15

// Source is a concurrency-safe seeded random source. The zero value is a
// valid source seeded with 0.
type Source struct {
	state atomic.Uint64
}

// New returns a Source seeded with seed.
func New(seed uint64) *Source {
	s := &Source{}
	s.state.Store(seed)
	return s
}

// Uint64 returns a uniformly distributed 64-bit value.
func (s *Source) Uint64() uint64 {
	z := s.state.Add(gamma)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// IntN returns a uniform value in [0, n). It panics if n <= 0.
func (s *Source) IntN(n int) int {
	if n <= 0 {
		panic("rng: IntN with n <= 0")
	}
	// Lemire's multiply-shift with rejection: unbiased, one multiply on
	// the fast path.
	un := uint64(n)
	hi, lo := bits.Mul64(s.Uint64(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(s.Uint64(), un)
		}
	}
	return int(hi)
}

// Float64 returns a uniform value in [0, 1).
func (s *Source) Float64() float64 {
	return float64(s.Uint64()>>11) / (1 << 53)
}

// Mix64 is the SplitMix64 finaliser: a stateless, well-spread hash of x,
// for deterministic per-key seeds (for example a ring shuffle seeded by an
// origin's name).
func Mix64(x uint64) uint64 {
	x += gamma
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// FNV is the 64-bit FNV-1a hash of s: the same on every machine and in
// every process, for seeds derived from names (an origin's, an address).
func FNV(s string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}

// Normal returns a standard normal draw (Box–Muller).
func (s *Source) Normal() float64 {
	u1, u2 := max(s.Float64(), 1e-12), s.Float64()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}
