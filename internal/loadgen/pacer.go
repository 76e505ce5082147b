package loadgen

import (
	"math"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/corput/corput/internal/rng"
)

// Poisson is a vegeta.Pacer for open-loop Poisson arrivals: the gaps
// between requests are exponential with mean 1/rate, drawn from a seeded
// source, so a run's arrival schedule is fixed by its seed and does not
// depend on how fast the target answers. When the attacker falls behind the
// schedule, Pace returns 0 until it has caught up.
//
// One Poisson paces one attack: hits must only grow.
type Poisson struct {
	perSec float64
	mean   float64 // mean gap in nanoseconds
	src    *rng.Source

	mu   sync.Mutex    // guards following
	n    uint64        // index of the next arrival
	next time.Duration // its time since the start
}

var _ vegeta.Pacer = (*Poisson)(nil)

// NewPoisson paces perSec arrivals per second on average (perSec > 0).
func NewPoisson(perSec float64, src *rng.Source) *Poisson {
	p := &Poisson{perSec: perSec, mean: 1e9 / perSec, src: src}
	p.next = p.gap()
	return p
}

// gap draws one exponential inter-arrival time.
func (p *Poisson) gap() time.Duration {
	return time.Duration(-math.Log1p(-p.src.Float64()) * p.mean)
}

// Pace implements vegeta.Pacer: the wait from elapsed until arrival number
// hits.
func (p *Poisson) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if !(p.perSec > 0) {
		return 0, true
	}
	p.mu.Lock()
	for p.n < hits {
		p.next += p.gap()
		p.n++
	}
	wait := p.next - elapsed
	p.mu.Unlock()
	return max(wait, 0), false
}

// Rate implements vegeta.Pacer: the mean rate, the same at every instant.
func (p *Poisson) Rate(time.Duration) float64 { return p.perSec }
