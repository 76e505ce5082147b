package clock

import (
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
// earliest pending timer and fires everything due at that instant. The queue
// is a binary heap keyed by (deadline in nanoseconds, arming order), so it
// orders a million timers without comparing time.Time values.
type Fake struct {
	mu     sync.Mutex // guards following
	base   time.Time  // the start; deadlines are nanoseconds after it
	now    int64
	timers []*fakeTimer // binary min-heap
	seq    uint64
}

// NewFake returns a Fake reading start.
func NewFake(start time.Time) *Fake { return &Fake{base: start} }

// Now implements Clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.base.Add(time.Duration(f.now))
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
	t.when = f.now + int64(d)
	t.seq = f.seq
	f.pushLocked(t)
}

// Advance moves the clock forward by d, firing every timer due on the way.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	to := f.now + int64(d)
	f.mu.Unlock()
	f.advanceTo(to)
}

// AdvanceTo moves the clock to t (never backwards), firing every timer due
// at or before t, including timers armed by the callbacks themselves.
func (f *Fake) AdvanceTo(t time.Time) { f.advanceTo(int64(t.Sub(f.base))) }

func (f *Fake) advanceTo(to int64) {
	for {
		f.mu.Lock()
		if len(f.timers) == 0 || f.timers[0].when > to {
			if to > f.now {
				f.now = to
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
	f.mu.Lock()
	if len(f.timers) == 0 {
		f.mu.Unlock()
		return false
	}
	next := f.timers[0].when
	f.mu.Unlock()
	f.advanceTo(next)
	return true
}

// Next returns the deadline of the earliest pending timer.
func (f *Fake) Next() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return time.Time{}, false
	}
	return f.base.Add(time.Duration(f.timers[0].when)), true
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
	t := f.removeLocked(0)
	if t.when > f.now {
		f.now = t.when
	}
	fn := t.fn
	f.mu.Unlock()
	fn()
}

type fakeTimer struct {
	f     *Fake
	fn    func()
	when  int64 // nanoseconds after f.base
	seq   uint64
	index int // in the heap; -1 when not pending
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if t.index < 0 {
		return false
	}
	t.f.removeLocked(t.index)
	return true
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	pending := t.index >= 0
	if pending {
		t.f.removeLocked(t.index)
	}
	t.f.armLocked(t, d)
	return pending
}

// before orders timers by deadline, then by arming order.
func before(a, b *fakeTimer) bool {
	return a.when < b.when || (a.when == b.when && a.seq < b.seq)
}

func (f *Fake) pushLocked(t *fakeTimer) {
	t.index = len(f.timers)
	f.timers = append(f.timers, t)
	f.upLocked(t.index)
}

// removeLocked takes the timer at heap index i out of the heap.
func (f *Fake) removeLocked(i int) *fakeTimer {
	h := f.timers
	t := h[i]
	last := len(h) - 1
	if i != last {
		h[i] = h[last]
		h[i].index = i
	}
	h[last] = nil
	f.timers = h[:last]
	if i != last {
		if !f.downLocked(i) {
			f.upLocked(i)
		}
	}
	t.index = -1
	return t
}

func (f *Fake) upLocked(i int) {
	h := f.timers
	t := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !before(t, h[p]) {
			break
		}
		h[i] = h[p]
		h[i].index = i
		i = p
	}
	h[i] = t
	t.index = i
}

// downLocked sifts the timer at i down and reports whether it moved.
func (f *Fake) downLocked(i0 int) bool {
	h := f.timers
	n := len(h)
	t := h[i0]
	i := i0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && before(h[r], h[c]) {
			c = r
		}
		if !before(h[c], t) {
			break
		}
		h[i] = h[c]
		h[i].index = i
		i = c
	}
	h[i] = t
	t.index = i
	return i > i0
}
