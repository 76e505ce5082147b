package pool

import (
	"time"

	"github.com/corput/corput/internal/clock"
)

type waiterState uint8

const (
	waiterQueued waiterState = iota // on p.waiters
	waiterHanded                    // a stream was taken for it; apply delivers it
	waiterDone                      // failed, timed out or withdrawn
)

// waiter is a request queued for a stream. It settles the race between a
// released stream, a finished dial, its acquire timer and its caller giving
// up: whichever takes it off the queue under the lock first wins.
type waiter struct {
	p     *Pool
	cb    func(Lease, error) // AcquireAsync's callback, or nil for Acquire
	ch    chan acquired      // Acquire's hand-over, buffered
	start time.Time

	// guarded by p.mu until the waiter leaves the queue
	timer clock.Timer // AcquireTimeout; nil while a dial in flight covers it (armWaitersLocked)

	// guarded by p.mu
	ln       links[waiter] // on p.waiters
	state    waiterState
	timedOut bool // the timer fired while a hand-out was being checked
	gaveUp   bool // cancel was called while a hand-out was being checked
}

type acquired struct {
	lease Lease
	err   error
}

func (w *waiter) links() *links[waiter] { return &w.ln }

// expire is the acquire timer's callback.
func (w *waiter) expire() {
	p := w.p
	p.mu.Lock()
	switch w.state {
	case waiterQueued:
		p.waiters.remove(w)
		w.state = waiterDone
		p.mu.Unlock()
		w.finish(Lease{}, ErrAcquireTimeout)
		return
	case waiterHanded:
		w.timedOut = true // honoured if the hand-out turns out dead
	}
	p.mu.Unlock()
}

// cancel withdraws a queued waiter; false when it was already settled.
func (w *waiter) cancel() bool {
	p := w.p
	p.mu.Lock()
	if w.state != waiterQueued {
		w.gaveUp = w.state == waiterHanded // honoured if the hand-out turns out dead
		p.mu.Unlock()
		return false
	}
	p.waiters.remove(w)
	w.state = waiterDone
	p.mu.Unlock()
	w.stop()
	return true
}

// stop stops the acquire timer, if it was armed; the waiter is off the
// queue, so its timer no longer changes.
func (w *waiter) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// finish reports the outcome to the caller, without the lock.
func (w *waiter) finish(l Lease, err error) {
	w.stop()
	w.p.obs.AcquireWait(clock.Since(w.p.clk, w.start), err)
	if w.cb != nil {
		w.cb(l, err)
		return
	}
	w.ch <- acquired{l, err}
}
