package subset

import (
	"math/bits"

	"github.com/corput/corput/internal/rng"
)

// Position returns the ring position in [0, 1) of endpoint index i: the
// binary Van der Corput value of i, whose bits are i's bits mirrored behind
// the binary point (0, .5, .25, .75, .125, …).
func Position(i int) float64 {
	return float64(bits.Reverse64(uint64(i))>>11) / (1 << 53)
}

// arcOf returns the arc, among 2^log2S equal arcs, that holds position
// VdC(i). Only the low log2S bits of i matter, so it is also the arc of the
// residue i mod 2^log2S. For log2S = 0 the shift is 64 and the result 0.
func arcOf(i uint64, log2S int) int {
	return int(bits.Reverse64(i) >> (64 - log2S))
}

// hashString is a stable 64-bit hash of s (FNV-1a, finished with the
// SplitMix64 mixer so that short, similar strings spread well). It is the
// same on every machine and in every process, which the ring shuffle and the
// comparators rely on.
func hashString(s string) uint64 { return rng.Mix64(rng.FNV(s)) }

// shuffle permutes s in place with a Fisher–Yates shuffle drawn from src.
func shuffle[T any](s []T, src *rng.Source) {
	for i := len(s) - 1; i > 0; i-- {
		j := src.IntN(i + 1)
		s[i], s[j] = s[j], s[i]
	}
}
