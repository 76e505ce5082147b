package slo

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// The histogram's buckets are log-linear, as HdrHistogram's: values in
// microseconds below 2^subBits are counted exactly; above, each range
// [2^k, 2^(k+1)) is split into 2^subBits equal sub-buckets. A bucket's
// width is at most 1/64 of its lower bound, so its midpoint is within
// 1/128 (0.8 %) of any value in it. Values at or above 2^maxExp µs (67 s)
// share the last bucket.
const (
	subBits    = 6
	subCount   = 1 << subBits
	maxExp     = 26
	numBuckets = subCount + (maxExp-subBits)*subCount
)

// bucketOf is the bucket of a value of us microseconds.
func bucketOf(us uint64) int {
	if us < subCount {
		return int(us)
	}
	k := bits.Len64(us) - 1
	if k >= maxExp {
		return numBuckets - 1
	}
	sub := int(us>>(k-subBits)) - subCount
	return subCount + (k-subBits)*subCount + sub
}

// bucketMid is the midpoint of bucket i, in microseconds.
func bucketMid(i int) float64 {
	if i < subCount {
		return float64(i)
	}
	k := (i-subCount)/subCount + subBits
	sub := (i - subCount) % subCount
	width := uint64(1) << (k - subBits)
	low := uint64(1)<<k + uint64(sub)*width
	return float64(low) + float64(width-1)/2
}

// slot is one period's counts. Writers add with atomics; the ticker
// clears a slot before it becomes current again.
type slot struct {
	counts [numBuckets]atomic.Uint32
	n      atomic.Uint64
}

// Window is a rolling latency histogram: a ring of slots of SlotLength,
// the current one written by Record and the last Slots−1 complete ones
// summed by Quantiles. Record takes no lock and allocates nothing; Rotate
// and Quantiles belong to one goroutine (the monitor's ticker).
type Window struct {
	ring []slot
	cur  atomic.Int64 // index of the slot being written, in the ring
	sum  []uint64     // Quantiles' scratch
}

// NewWindow returns a window of slots slots, all empty.
func NewWindow(slots int) *Window {
	return &Window{ring: make([]slot, slots), sum: make([]uint64, numBuckets)}
}

// Record counts one latency.
func (w *Window) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	s := &w.ring[w.cur.Load()]
	s.counts[bucketOf(uint64(d/time.Microsecond))].Add(1)
	s.n.Add(1)
}

// Rotate starts a new slot: the oldest is cleared and becomes current, so
// what it held leaves the window.
func (w *Window) Rotate() {
	next := (w.cur.Load() + 1) % int64(len(w.ring))
	s := &w.ring[next]
	for i := range s.counts {
		s.counts[i].Store(0)
	}
	s.n.Store(0)
	w.cur.Store(next)
}

// Quantiles returns the count and the nearest-rank quantiles qs of what the
// window holds, every slot included, written to out (len(out) ≥ len(qs)).
// With no sample every quantile is 0.
func (w *Window) Quantiles(qs []float64, out []time.Duration) (n uint64) {
	clear(w.sum)
	for i := range w.ring {
		s := &w.ring[i]
		if s.n.Load() == 0 {
			continue
		}
		for b := range s.counts {
			c := uint64(s.counts[b].Load())
			w.sum[b] += c
			n += c
		}
	}
	for j, q := range qs {
		out[j] = 0
		if n == 0 {
			continue
		}
		rank := uint64(q * float64(n))
		if float64(rank) < q*float64(n) {
			rank++ // ceil(q·n)
		}
		rank = max(rank, 1)
		var seen uint64
		for b, c := range w.sum {
			seen += c
			if seen >= rank {
				out[j] = time.Duration(bucketMid(b) * float64(time.Microsecond))
				break
			}
		}
	}
	return n
}
