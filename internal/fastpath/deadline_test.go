package fastpath

import (
	"testing"
	"time"
)

func TestKeepDeadline(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name string
		rdl  time.Time
		wait time.Duration
		keep bool
	}{
		{"none set", time.Time{}, 5 * time.Second, false},
		{"set later than wanted", now.Add(6 * time.Second), 5 * time.Second, false},
		{"half a second early, 5 s wait", now.Add(4500 * time.Millisecond), 5 * time.Second, true},
		{"a second early, 5 s wait", now.Add(4 * time.Second), 5 * time.Second, false},
		{"equal", now.Add(5 * time.Second), 5 * time.Second, true},
		// A 300 ms idle timeout: the set deadline may be at most 150 ms
		// early, so a read always has half the wait in front of it.
		{"100 ms early, 300 ms wait", now.Add(200 * time.Millisecond), 300 * time.Millisecond, true},
		{"200 ms early, 300 ms wait", now.Add(100 * time.Millisecond), 300 * time.Millisecond, false},
		// The case the bound is for: a request served for longer than
		// the idle timeout left the old deadline in the past.
		{"already passed, 300 ms wait", now.Add(-50 * time.Millisecond), 300 * time.Millisecond, false},
	} {
		got := keepDeadline(tc.rdl, now.Add(tc.wait), tc.wait)
		if got != tc.keep {
			t.Errorf("%s: keepDeadline = %v, want %v", tc.name, got, tc.keep)
		}
	}
}
