package lab

import (
	"math"
	"time"

	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/workload"
)

// instance is one origin server: the only part of the lab that is a model.
// It has a finite number of workers and a FIFO queue in front of them, like
// internal/origin's test server: a request holds a worker for its class's
// service time × slowdown × the warm-up factor at the instant it starts, and
// is answered 500 with probability errRate (drawn when it starts, after the
// full service time, as the real origin does).
type instance struct {
	e        *engine
	id       int // dense, in creation order: pools are indexed by it
	addr     string
	zone     string // "" when the run has no zones
	workers  int
	slowdown float64
	warmup   workload.Warmup
	errRate  float64
	born     time.Time
	dialer   *memconn.Dialer // the origin's side of the connections

	busy     int        // workers in use
	serving  []*request // in service (request.slot is the index)
	dead     bool       // killed: it serves nothing more
	queue    []*request // waiting for a worker; cancelled ones are skipped
	head     int        // first live index of queue
	inFlight int        // queued + in service: the origin-side concurrency

	received int64 // requests that reached the instance
	failed   int64 // answered 500
	maxConc  int
	trace    *concTrace // set for the endpoint whose cold start is watched
}

// concTrace records an instance's highest concurrency per bucket of step
// after from, over len(max) buckets.
type concTrace struct {
	from time.Time
	step time.Duration
	max  []int
}

func (e *engine) newInstance(addr string, slowdown float64, w workload.Warmup, errRate float64) *instance {
	in := &instance{
		e: e, id: len(e.insts), addr: addr, workers: e.o.workers,
		slowdown: slowdown, warmup: w, errRate: errRate, born: e.clk.Now(),
		dialer: memconn.New(e.clk, e.o.conn),
	}
	e.insts = append(e.insts, in)
	e.byAddr[addr] = in
	return in
}

// serviceTime is how long a request of base latency takes if it starts now:
// × a log-normal draw e^(σN) when the run's service times are noisy (the
// median stays base), or e^(σN − σ²/2) on the variance model (the mean
// stays base).
func (in *instance) serviceTime(base time.Duration, now time.Time) time.Duration {
	d := float64(base) * in.slowdown * in.warmup.At(now.Sub(in.born))
	if s := in.e.o.noise; s > 0 {
		d *= math.Exp(s * in.e.rnd.Normal())
	}
	if s := in.e.o.variance; s > 0 {
		d *= math.Exp(s*in.e.rnd.Normal() - s*s/2)
	}
	return time.Duration(d)
}

// accept takes a request that reached the instance.
func (in *instance) accept(r *request) {
	r.visits++
	in.received++
	in.inFlight++
	in.noteConc()
	if in.busy < in.workers {
		in.start(r)
		return
	}
	in.queue = append(in.queue, r)
}

func (in *instance) start(r *request) {
	in.busy++
	r.started = true
	r.slot = len(in.serving)
	in.serving = append(in.serving, r)
	now := in.e.clk.Now()
	r.fail = in.errRate >= 1 || (in.errRate > 0 && in.e.rnd.Float64() < in.errRate)
	if r.fail {
		in.failed++
	}
	if d := in.serviceTime(r.base, now); r.service == nil {
		r.service = in.e.clk.AfterFunc(d, r.served)
	} else {
		r.service.Reset(d)
	}
}

// served frees r's worker and starts the next live request in line.
func (in *instance) served(r *request) {
	last := in.serving[len(in.serving)-1]
	in.serving[r.slot], last.slot = last, r.slot
	in.serving = in.serving[:len(in.serving)-1]
	in.busy--
	in.inFlight--
	in.noteConc()
	for in.head < len(in.queue) {
		r := in.queue[in.head]
		in.queue[in.head] = nil
		in.head++
		if !r.cancelled {
			in.start(r)
			break
		}
		r.recycle() // its client gave up while it waited
	}
	if in.head == len(in.queue) {
		in.queue, in.head = in.queue[:0], 0
	}
}

// cancel withdraws a queued request whose client gave up (the gateway's
// timeout closed its connection); one in service runs to the end.
func (in *instance) cancel(r *request) {
	if r.started || r.cancelled {
		return
	}
	r.cancelled = true
	in.inFlight--
	in.noteConc()
}

func (in *instance) noteConc() {
	in.maxConc = max(in.maxConc, in.inFlight)
	if t := in.trace; t != nil {
		if i := int(in.e.clk.Now().Sub(t.from) / t.step); i >= 0 && i < len(t.max) {
			t.max[i] = max(t.max[i], in.inFlight)
		}
	}
}

// kill terminates the instance as a pod's SIGKILL does: its dials are
// refused and its connections are gone from then on, and every request
// queued or in service there is never answered by it — the gateway sees its
// connection break under the request (forward.Broken): it retries a
// replayable one elsewhere and answers the others 502 upstream_reset.
func (in *instance) kill() {
	in.dead = true
	in.dialer.SetDown(true)
	var lost []*request
	for _, r := range in.serving {
		r.service.Stop()
		lost = append(lost, r)
	}
	for _, r := range in.queue[in.head:] {
		if r != nil && !r.cancelled {
			lost = append(lost, r)
		}
	}
	in.serving, in.queue, in.head, in.busy, in.inFlight = nil, nil, 0, 0, 0
	for _, r := range lost {
		r.broken()
	}
}
