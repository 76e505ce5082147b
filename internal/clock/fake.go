package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Fake is a manually advanced clock. Time moves only when Advance, AdvanceTo
// or Step is called; due timers then fire in deadline order (ties in the
// order they were armed), synchronously on the advancing goroutine, each
// seeing Now equal to its own deadline. Callbacks run without the Fake's lock
// held, so they may read the time and arm or stop timers.
//
// A Fake doubles as the lab simulator's event queue: Step jumps to the
// earliest pending timer and fires everything due at that instant.
type Fake struct {
	mu     sync.Mutex // guards following
	now    time.Time
	timers timerHeap
	seq    uint64
}

// NewFake returns a Fake reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now implements Clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// AfterFunc implements Clock.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, fn: fn, index: -1}
	f.armLocked(t, d)
	return t
}

func (f *Fake) armLocked(t *fakeTimer, d time.Duration) {
	if d < 0 {
		d = 0
	}
	f.seq++
	t.when = f.now.Add(d)
	t.seq = f.seq
	heap.Push(&f.timers, t)
}

// Advance moves the clock forward by d, firing every timer due on the way.
func (f *Fake) Advance(d time.Duration) { f.AdvanceTo(f.Now().Add(d)) }

// AdvanceTo moves the clock to t (never backwards), firing every timer due
// at or before t, including timers armed by the callbacks themselves.
func (f *Fake) AdvanceTo(t time.Time) {
	for {
		f.mu.Lock()
		if len(f.timers) == 0 || f.timers[0].when.After(t) {
			if t.After(f.now) {
				f.now = t
			}
			f.mu.Unlock()
			return
		}
		f.fireNextLocked() // unlocks
	}
}

// Step jumps to the earliest pending timer and fires every timer due at that
// instant. It reports false, without moving time, when nothing is pending.
func (f *Fake) Step() bool {
	next, ok := f.Next()
	if !ok {
		return false
	}
	f.AdvanceTo(next)
	return true
}

// Next returns the deadline of the earliest pending timer.
func (f *Fake) Next() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return time.Time{}, false
	}
	return f.timers[0].when, true
}

// Pending returns the number of armed timers.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// fireNextLocked pops the earliest timer, sets the time to its deadline,
// releases the lock and runs it.
func (f *Fake) fireNextLocked() {
	t := heap.Pop(&f.timers).(*fakeTimer)
	if t.when.After(f.now) {
		f.now = t.when
	}
	fn := t.fn
	f.mu.Unlock()
	fn()
}

type fakeTimer struct {
	f     *Fake
	fn    func()
	when  time.Time
	seq   uint64
	index int // in the heap; -1 when not pending
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.f.timers, t.index)
	return true
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	pending := t.index >= 0
	if pending {
		heap.Remove(&t.f.timers, t.index)
	}
	t.f.armLocked(t, d)
	return pending
}

type timerHeap []*fakeTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].when.Equal(h[j].when) {
		return h[i].seq < h[j].seq
	}
	return h[i].when.Before(h[j].when)
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*fakeTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
