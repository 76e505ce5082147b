package discovery

import (
	"time"

	"github.com/corput/corput/internal/rng"
)

// backoff is capped exponential backoff with "equal jitter": attempt n
// waits a uniform time in [c/2, c] where c = min(max, base·2ⁿ). The random
// half spreads a fleet's reconnects after a control-plane restart; the
// fixed half keeps the wait from collapsing to zero.
type backoff struct {
	base, max time.Duration
	rand      *rng.Source
}

func (b backoff) delay(attempt int) time.Duration {
	c := b.max
	if attempt < 62 && b.base<<attempt > 0 && b.base<<attempt < b.max {
		c = b.base << attempt
	}
	half := c / 2
	return half + time.Duration(b.rand.IntN(int(c-half)+1))
}
