package balance

import (
	"math"
	"sync/atomic"
)

// latencyEstimate is one endpoint's peak-sensitive, exponentially weighted
// moving average of latency (Finagle's and linkerd's Peak EWMA), lock-free.
//
// The estimate and the instant it was last written share one 64-bit word:
// the high half is the estimate in ns as a float32 (24 bits of precision),
// the low half the instant in ms since the origin's epoch, mod 2^32. Readers
// load the word once; writers CAS it. The estimate at instant t is the stored
// value decayed by exp(−Δ/τ), Δ = t − stamp, so it falls toward zero while
// the endpoint is idle and a slow endpoint is tried again. A sample above the
// current estimate replaces it at once (the peak); a lower one is blended in
// with weight 1 − exp(−Δ/τ).
//
// Δ is computed as a signed 32-bit difference of ms stamps: an estimate left
// untouched for more than 24.8 days stops decaying until its next sample.
type latencyEstimate struct {
	word atomic.Uint64
}

func packEWMA(estNs float64, ms uint32) uint64 {
	return uint64(math.Float32bits(float32(estNs)))<<32 | uint64(ms)
}

func unpackEWMA(w uint64) (estNs float64, ms uint32) {
	return float64(math.Float32frombits(uint32(w >> 32))), uint32(w)
}

func msOf(nowNs int64) uint32 { return uint32(nowNs / 1e6) }

// decay is exp(−Δ/τ) for the ms elapsed from stamp to now; 1 when none has
// (or when a concurrent writer stamped a later instant).
func decay(now, stamp uint32, tauMs float64) float64 {
	d := int32(now - stamp)
	if d <= 0 {
		return 1
	}
	return math.Exp(-float64(d) / tauMs)
}

func (p *latencyEstimate) reset(estNs float64, nowNs int64) {
	p.word.Store(packEWMA(estNs, msOf(nowNs)))
}

// at returns the estimate in ns at instant nowNs.
func (p *latencyEstimate) at(nowNs int64, tauMs float64) float64 {
	est, stamp := unpackEWMA(p.word.Load())
	return est * decay(msOf(nowNs), stamp, tauMs)
}

// observe folds in a latency sample taken at nowNs.
func (p *latencyEstimate) observe(sampleNs float64, nowNs int64, tauMs float64) {
	ms := msOf(nowNs)
	for {
		old := p.word.Load()
		est, stamp := unpackEWMA(old)
		w := decay(ms, stamp, tauMs)
		next := sampleNs
		if cur := est * w; sampleNs <= cur {
			next = cur + sampleNs*(1-w)
		}
		if int32(ms-stamp) < 0 {
			ms = stamp // a concurrent writer stamped a later instant: keep it
		}
		if p.word.CompareAndSwap(old, packEWMA(next, ms)) {
			return
		}
	}
}

// meanEstimate is one endpoint's typical latency, lock-free: the average
// of its samples so far, then a moving average of about its last
// meanWindow samples (weight max(1/(n+1), 1/meanWindow) for the n-th). No
// peak and no decay while idle: peakEWMA uses it to tell a real difference
// between endpoints from noise, which the peak estimate — lifted for
// seconds by one slow sample, lowered by idleness — cannot. The estimate
// (float32 ns) and the sample count share one 64-bit word, written by CAS.
type meanEstimate struct {
	word atomic.Uint64
}

// meanWindow is how many recent samples the mean averages, once it has
// seen that many: enough that identical endpoints' means stay within a
// few per cent of each other under noisy latency, few enough that a
// change of an endpoint's speed shows within its next few dozen requests.
const meanWindow = 64

func (m *meanEstimate) reset(estNs float64) {
	m.word.Store(packEWMA(estNs, 0))
}

// load returns the mean in ns.
func (m *meanEstimate) load() float64 {
	est, _ := unpackEWMA(m.word.Load())
	return est
}

// observe blends in one sample: the first replaces the default estimate.
func (m *meanEstimate) observe(sampleNs float64) {
	for {
		old := m.word.Load()
		est, n := unpackEWMA(old)
		w := max(1/float64(n+1), 1.0/meanWindow)
		next := est + (sampleNs-est)*w
		if m.word.CompareAndSwap(old, packEWMA(next, min(n+1, meanWindow))) {
			return
		}
	}
}

// loadN returns the mean in ns and how many samples it has seen (up to
// meanWindow), read together.
func (m *meanEstimate) loadN() (float64, uint32) { return unpackEWMA(m.word.Load()) }

// samples is how many samples the mean has seen, up to meanWindow (0: it
// is still the value reset gave it).
func (m *meanEstimate) samples() uint32 {
	_, n := unpackEWMA(m.word.Load())
	return n
}

// raise lifts the mean to v if it is lower (a connect failure's penalty:
// the endpoint must look expensive however noisy the others are).
func (m *meanEstimate) raise(v float64) { m.raiseCounted(v, 0) }

// raiseCounted is raise that also counts the mean as averaged over at
// least n samples, so that a rule which trusts only a mean of n samples or
// more (least_work's tie, trustSamples) reads the penalty instead of
// taking the endpoint for an unmeasured one.
func (m *meanEstimate) raiseCounted(v float64, n uint32) {
	for {
		old := m.word.Load()
		est, k := unpackEWMA(old)
		if (est >= v && k >= n) || m.word.CompareAndSwap(old, packEWMA(max(est, v), max(k, n))) {
			return
		}
	}
}
