package waitfor

import (
	"fmt"
	"strings"
	"testing"
)

func TestUntilReturnsOnceCondHolds(t *testing.T) {
	calls := 0
	Until(t, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
}

// recorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, as the real one does.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

func TestWithinFailsNamingTheFact(t *testing.T) {
	r := &recorder{}
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("Within did not fail: recovered %v", p)
			}
		}()
		Within(r, 0, "the impossible", func() bool { return false })
	}()
	if !strings.Contains(r.msg, "waiting for the impossible") {
		t.Fatalf("failure %q does not name what it waited for", r.msg)
	}
}
