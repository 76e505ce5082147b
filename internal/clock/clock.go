// Package clock is corput's source of time. Every component that reads the
// time or arms a timer (pools, balancers, discovery debounce, the lab) takes a
// Clock, so the same code runs on the wall clock when serving, on a Fake in
// tests, and on the simulator's virtual time in the lab.
//
// The interface is deliberately tiny: reading the time and running a function
// later. Blocking waits are built from AfterFunc and a channel (Sleep), so a
// Fake never has to reason about sleeping goroutines.
package clock

import (
	"context"
	"time"
)

// Sleep waits d on c, or until ctx ends; it reports whether the wait ran
// its course. It is the one blocking wait built from AfterFunc.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	done := make(chan struct{})
	t := c.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// Clock tells the time and runs functions later.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f once, d after now, on a goroutine of the clock's
	// choosing (a new one for the wall clock; the goroutine that advances
	// a Fake). A d <= 0 fires as soon as the clock can: at once on a new
	// goroutine for the wall clock, at the next Advance or Step on a Fake.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not happened yet and reports
	// whether it did so.
	Stop() bool
	// Reset re-arms the timer to fire d after now, and reports whether
	// it was still pending.
	Reset(d time.Duration) bool
}

// Since is c.Now().Sub(t), spelled once.
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
