package balance

import (
	"math"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/workload"
)

// sim is a small open-loop event simulation on a clock.Fake: Poisson
// arrivals at rate per second, each request of a class drawn from the mix,
// served by its endpoint in latency(endpoint, class latency, now) with no
// queueing (an endpoint's latency does not depend on its load). It drives
// the real Picker and Endpoint code from one goroutine.
type sim struct {
	clk     *clock.Fake
	r       *rng.Source
	p       *Picker
	rate    float64
	mix     workload.Mix
	latency func(ep *Endpoint, base time.Duration) time.Duration
	onPick  func(ep *Endpoint) // after the pick, before the request ends
	picks   map[string]int
	started bool
	// costed: requests are placed with PickCost at their class's cost
	// (workload.Mix.Costs) and ended with End, as the gateway does;
	// heavy counts the picks of the mix's last class per address.
	costed bool
	heavy  map[string]int
	// placed: after each costed pick, with its ticket
	placed func(ep *Endpoint, t Ticket)
	// workers: each endpoint serves at most this many requests at once,
	// the rest wait in its FIFO queue (latency, drawn when a request
	// starts, then counts from its pick); 0: no limit and no queueing.
	workers int
	queues  map[*Endpoint]*workerQueue
}

// workerQueue is one endpoint's workers in use and requests waiting.
type workerQueue struct {
	busy    int
	waiting []func()
}

// serve runs start now if one of ep's workers is free, else once one is.
func (s *sim) serve(ep *Endpoint, start func()) {
	if s.queues == nil {
		s.queues = map[*Endpoint]*workerQueue{}
	}
	q := s.queues[ep]
	if q == nil {
		q = &workerQueue{}
		s.queues[ep] = q
	}
	if q.busy == s.workers {
		q.waiting = append(q.waiting, start)
		return
	}
	q.busy++
	start()
}

// served frees a worker of ep for the next request waiting there.
func (s *sim) served(ep *Endpoint) {
	q := s.queues[ep]
	if len(q.waiting) == 0 {
		q.busy--
		return
	}
	next := q.waiting[0]
	q.waiting = q.waiting[1:]
	next()
}

func (s *sim) arrive() {
	c := s.mix.Pick(s.r.Float64())
	var ep *Endpoint
	var t Ticket
	var err error
	k, _ := s.mix.Index(c.Name)
	if s.costed {
		ep, t, err = s.p.PickCost(s.mix.Costs()[k])
	} else {
		ep, err = s.p.Pick()
		t = unitTicket
	}
	if err == nil {
		d := s.latency(ep, c.Latency)
		s.picks[ep.Address()]++
		if k == len(s.mix.Classes)-1 {
			s.heavy[ep.Address()]++
		}
		if s.onPick != nil {
			s.onPick(ep)
		}
		if s.placed != nil && s.costed {
			s.placed(ep, t)
		}
		if s.workers == 0 {
			s.clk.AfterFunc(d, func() { ep.End(t, d, Success) })
		} else {
			picked := s.clk.Now()
			s.serve(ep, func() {
				// The service time as of its start (a warming endpoint's).
				s.clk.AfterFunc(s.latency(ep, c.Latency), func() {
					ep.End(t, s.clk.Now().Sub(picked), Success)
					s.served(ep)
				})
			})
		}
	}
	gap := -math.Log(1-s.r.Float64()) / s.rate
	s.clk.AfterFunc(time.Duration(gap*float64(time.Second)), s.arrive)
}

// run simulates until the clock reads until and returns the picks per
// address made meanwhile. Arrivals go on across runs.
func (s *sim) run(until time.Time) map[string]int {
	s.picks, s.heavy = map[string]int{}, map[string]int{}
	if !s.started {
		s.started = true
		s.clk.AfterFunc(0, s.arrive)
	}
	s.clk.AdvanceTo(until)
	return s.picks
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
