package balance

import (
	"fmt"
	"testing"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/rng"
)

// benchPicker is a picker over n endpoints on the wall clock. weighted gives
// them weights 1..4, which sends round_robin and least_request down the EDF
// path.
func benchPicker(b *testing.B, pol Policy, n int, weighted bool) *Picker {
	ms := members(n)
	if weighted {
		for i := range ms {
			ms[i].Weight = 1 + i%4
		}
	}
	o, err := NewOrigin("bench", policyConfig(pol), ms, Options{Clock: clock.Real(), Rand: rng.New(1)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(o.Close)
	return o.NewPicker(nil)
}

// BenchmarkPick measures Pick (ended with a Shed Done, which only undoes the
// in-flight count) for every policy at 8, 50 and 1000 endpoints; the sticky
// policies pick with a key (PickKeyed) from 1024 keys in turn, so that the
// walk starts at another slot each time.
func BenchmarkPick(b *testing.B) {
	keys := make([]Key, 1024)
	for i := range keys {
		keys[i] = KeyOfString(fmt.Sprintf("merchant-%d", i))
	}
	for _, pol := range append(Policies(), StickyPolicies()...) {
		for _, weighted := range []bool{false, true} {
			for _, n := range []int{8, 50, 1000} {
				name := fmt.Sprintf("%s/n=%d", pol, n)
				if weighted {
					name = fmt.Sprintf("%s/weighted/n=%d", pol, n)
				}
				b.Run(name, func(b *testing.B) {
					p := benchPicker(b, pol, n, weighted)
					b.ReportAllocs()
					if pol.Sticky() {
						i := 0
						for b.Loop() {
							ep, tk, _ := p.PickKeyed(1, keys[i&1023])
							ep.End(tk, 0, Shed)
							i++
						}
						return
					}
					for b.Loop() {
						ep, _ := p.Pick()
						ep.Done(0, Shed)
					}
				})
			}
		}
	}
}

// BenchmarkPickChecked is Pick and a successful Done with active health
// checks configured: the live-failure hook set, one endpoint in 50
// ejected by its checks, and every Done recording its live outcome for
// them (Endpoint.Live).
func BenchmarkPickChecked(b *testing.B) {
	for _, pol := range []Policy{LeastWork, PeakEWMA} {
		b.Run(string(pol), func(b *testing.B) {
			ms := members(50)
			o, err := NewOrigin("bench", policyConfig(pol), ms, Options{Clock: clock.Real(), Rand: rng.New(1)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(o.Close)
			o.OnLiveFailure(func(string) {})
			o.SetChecked(ms[0].Address, false)
			p := o.NewPicker(nil)
			b.ReportAllocs()
			for b.Loop() {
				ep, _ := p.Pick()
				ep.Done(time.Millisecond, Success)
			}
		})
	}
}

// BenchmarkPickParallel is Pick from every P at once on one loop's picker:
// the lock-free path under contention.
func BenchmarkPickParallel(b *testing.B) {
	for _, pol := range Policies() {
		b.Run(string(pol), func(b *testing.B) {
			p := benchPicker(b, pol, 50, false)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ep, _ := p.Pick()
					ep.Done(0, Shed)
				}
			})
		})
	}
}

// BenchmarkDone is the result callback of a successful request: the Peak
// EWMA update and the outlier bookkeeping.
func BenchmarkDone(b *testing.B) {
	p := benchPicker(b, PeakEWMA, 50, false)
	b.ReportAllocs()
	for b.Loop() {
		ep, _ := p.Pick()
		ep.Done(12*time.Millisecond, Success)
	}
}

// BenchmarkTryAdmit is an admission and its release.
func BenchmarkTryAdmit(b *testing.B) {
	ep := benchPicker(b, PeakEWMA, 8, false).origin.Endpoints()[0]
	b.ReportAllocs()
	for b.Loop() {
		if ep.TryAdmit() {
			ep.Release()
		}
	}
}

// BenchmarkPickWarm is Pick on a loop's warm picker (NewWarmPicker) over
// 50 endpoints that have all answered, so that the warm rule reads each
// candidate's pools: all ready (the common case: one reading per
// candidate) and all busy (the worst: the scan reads up to 8 more). The
// Warm function here costs nothing; the gateway's reads two pools.
func BenchmarkPickWarm(b *testing.B) {
	for _, pol := range []Policy{LeastWork, PeakEWMA} {
		for _, ready := range []bool{true, false} {
			name := fmt.Sprintf("%s/ready=%v", pol, ready)
			b.Run(name, func(b *testing.B) {
				o, err := NewOrigin("bench", policyConfig(pol), members(50), Options{Clock: clock.Real(), Rand: rng.New(1)})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(o.Close)
				p := o.NewWarmPicker(nil, func(*Endpoint) (bool, bool) { return ready, true })
				for range 50 * trustSamples {
					ep, _ := p.Pick()
					ep.Done(time.Millisecond, Success)
				}
				b.ReportAllocs()
				for b.Loop() {
					ep, _ := p.Pick()
					ep.Done(0, Shed)
				}
			})
		}
	}
}
