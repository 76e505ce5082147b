//go:build !linux

package load

import "time"

// lockPacer does nothing where there is no thread timer slack to set.
func lockPacer() (unlock func()) { return func() {} }

// sleepUntil sleeps with Go's timers until time.Since(start) >= at.
func sleepUntil(start time.Time, at time.Duration) {
	if w := at - time.Since(start); w > 0 {
		time.Sleep(w)
	}
}
