// Package waitfor waits, in tests, for a fact that other goroutines or the
// other end of a socket establish without signalling it: a connection
// closed at an origin, an ACK at a control plane, a membership applied.
//
// It polls every millisecond; the deadline only turns a hang into a
// failure and says nothing about speed, so no test asserts how fast the
// fact arrives.
package waitfor

import (
	"testing"
	"time"
)

// Timeout bounds Until.
const Timeout = 10 * time.Second

// Until polls cond until it holds, failing t if it does not within
// Timeout; what names the fact in the failure.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Timeout, what, cond)
}

// Within is Until with its own deadline.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}
