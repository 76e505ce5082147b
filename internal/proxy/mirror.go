package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/replay"
)

// Mirroring (routes[].mirror; docs/gateway.md, "Mirroring"): a sampled
// share of a route's requests is also sent to a shadow origin, fire and
// forget, its answer read and dropped.
//
// Invariants:
//   - A request not sampled costs one random draw and nothing else (no
//     allocation: bench/hotpath); a route without a mirror costs a nil
//     check.
//   - The primary never waits for its mirror: its path copies the request
//     head (a sampled request only, into a pooled job), takes its body's
//     kept copy when it is whole (replay.Body.Take: no copy), and hands the
//     job off without blocking, once its own answer is done.
//   - A route has at most MaxInFlight mirrors in flight: over the cap a
//     mirror is dropped and counted, never queued.
//   - Every sampled request is counted once: mirrored (the shadow
//     answered) or dropped by reason (DropInFlight, DropBody, DropFailed).
//   - A mirror goes through the shadow origin's own driver, pools and
//     balancing and the one exchange (exchange.State.Do) with a Client
//     that drops the answer, under the shadow's time limits; its kept body
//     stays under limits.replay_buffers_bytes until it ends.
//   - Shadows.Close cuts the mirrors in flight and waits for their
//     goroutines: none outlives the gateway.

// Why a sampled request's mirror was dropped.
const (
	DropInFlight = iota // max_in_flight mirrors of the route were in flight
	DropBody            // its body was not kept whole within the bound
	DropFailed          // the shadow gave no answer
	NumDrops
)

// DropReasons are the reason labels, by DropInFlight, DropBody, DropFailed.
var DropReasons = [NumDrops]string{"max_in_flight", "body", "failed"}

// Mirror is one route's mirroring, built at each reload. Its fields are
// set before it is published, then only read.
type Mirror struct {
	// Shadow is the shadow origin.
	Shadow *cluster.Origin
	// MaxInFlight caps the route's mirrors in flight (≥ 1).
	MaxInFlight int64
	// MaxBody is the largest body mirrored; 0: the request's
	// retry.replay_buffer.
	MaxBody int64
	// InFlight counts the route's mirrors in flight; a reload that keeps
	// the route passes the old one, so the cap holds across it. nil: the
	// Mirror's own.
	InFlight *atomic.Int64
	// Rand draws the sample; nil: math/rand/v2's (lock-free, per thread).
	// Tests pass a seeded one; it must be safe for concurrent use.
	Rand func() uint64
	// Mirrored and Dropped are the route's counters, bound at reload.
	Mirrored prometheus.Counter
	Dropped  [NumDrops]prometheus.Counter
	// Runner runs the mirrors (the gateway's one).
	Runner *Shadows

	all    bool   // percent 100
	thresh uint64 // a draw below it is sampled
	own    atomic.Int64
}

// SetPercent sets the share of requests mirrored, in [0, 100].
func (m *Mirror) SetPercent(p float64) {
	m.all, m.thresh = p >= 100, 0
	if p > 0 && p < 100 {
		m.thresh = uint64(math.Ldexp(p/100, 64))
	}
}

// sample reports whether this request is mirrored.
func (m *Mirror) sample() bool {
	switch {
	case m.all:
		return true
	case m.thresh == 0:
		return false
	case m.Rand != nil:
		return m.Rand() < m.thresh
	}
	return rand.Uint64() < m.thresh
}

func (m *Mirror) inFlight() *atomic.Int64 {
	if m.InFlight != nil {
		return m.InFlight
	}
	return &m.own
}

func (m *Mirror) drop(why int) {
	if c := m.Dropped[why]; c != nil {
		c.Inc()
	}
}

// mirrorOf is route rt's Mirror, nil for none.
func (t *Table) mirrorOf(index int) *Mirror {
	if index < len(t.Mirrors) {
		return t.Mirrors[index]
	}
	return nil
}

// Shadows runs the gateway's mirrors: their goroutines, their jobs'
// buffers, and their end at Close.
type Shadows struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	live   map[*mirrorJob]struct{}
	jobs   sync.Pool
}

// NewShadows returns a ready runner.
func NewShadows() *Shadows {
	ctx, cancel := context.WithCancel(context.Background())
	return &Shadows{ctx: ctx, cancel: cancel, live: map[*mirrorJob]struct{}{}}
}

// Close cuts the mirrors in flight (their waits end, their connections
// close) and waits for their goroutines to end. Later handoffs are
// dropped (DropFailed).
func (r *Shadows) Close() {
	r.mu.Lock()
	r.closed = true
	r.cancel()
	for j := range r.live {
		j.cut()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// InFlight is the mirrors in flight now, all routes together.
func (r *Shadows) InFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.live)
}

// mirrorJob is one mirrored request: its copied head, its taken body,
// its exchange's state. Jobs are pooled.
type mirrorJob struct {
	m      *Mirror
	run    *Shadows
	req    exchange.Request
	fields []hpack.HeaderField
	arena  []byte // the head's bytes; req's strings are views of it
	body   replay.Kept
	rd     bytes.Reader
	x      exchange.State
	a      forward.Attempt

	mu     sync.Mutex // guards up and cutOff
	up     io.Closer  // the connection watched while the head is awaited
	cutOff atomic.Bool
	status int
}

// beginMirror copies req's head for m's shadow when the request is
// sampled, into a job the request's Stream holds until endMirror. A body
// is to be kept up to the mirror's bound (replay.Body.KeepUpTo, in
// Stream.replay).
func (s *Stream) beginMirror(m *Mirror, req *exchange.Request) {
	if req.Upgrade != "" { // an upgrade is a conversation, not a request
		m.drop(DropBody)
		return
	}
	r := m.Runner
	j, _ := r.jobs.Get().(*mirrorJob)
	if j == nil {
		j = &mirrorJob{run: r}
	}
	j.m = m
	n := len(req.Method) + len(req.Target) + len(req.Host) + len(req.Scheme)
	for i := range req.Fields {
		n += len(req.Fields[i].Name) + len(req.Fields[i].Value)
	}
	if cap(j.arena) < n {
		j.arena = make([]byte, 0, n)
	}
	a := j.arena[:0]
	view := func(v string) string {
		at := len(a)
		a = append(a, v...)
		return h1.View(a[at:len(a):len(a)])
	}
	q := &j.req
	*q = exchange.Request{
		Method: view(req.Method), Target: view(req.Target), Host: view(req.Host), Scheme: view(req.Scheme),
		TE: req.TE, MaxHead: m.Shadow.MaxResponseHead(),
	}
	j.fields = j.fields[:0]
	for i := range req.Fields {
		f := &req.Fields[i]
		j.fields = append(j.fields, hpack.HeaderField{Name: view(f.Name), Value: view(f.Value)})
	}
	j.arena = a
	q.Fields = j.fields
	s.mirror = j
}

// mirrorBody is the body bound of a sampled request with a replay buffer
// of replayBuffer bytes.
func (m *Mirror) mirrorBody(replayBuffer int) int64 {
	if m.MaxBody > 0 {
		return m.MaxBody
	}
	return int64(replayBuffer)
}

// endMirror hands the request's mirror off, once the primary's answer
// is done: with its body taken whole from the replay buffer, or dropped.
// It never blocks.
func (s *Stream) endMirror(req *exchange.Request, maxBody int64) {
	j := s.mirror
	s.mirror = nil
	m := j.m
	if req.Body != nil && req.Length != 0 {
		if req.Length < 0 || req.Length > maxBody || !s.bodyOn {
			j.release()
			m.drop(DropBody)
			return
		}
		k, ok := s.body.Take(req.Length)
		if !ok {
			j.release()
			m.drop(DropBody)
			return
		}
		j.body = k
		j.req.Length = req.Length
	}
	in := m.inFlight()
	if in.Add(1) > m.MaxInFlight {
		in.Add(-1)
		j.release()
		m.drop(DropInFlight)
		return
	}
	r := j.run
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		in.Add(-1)
		j.release()
		m.drop(DropFailed)
		return
	}
	r.live[j] = struct{}{}
	r.wg.Add(1)
	r.mu.Unlock()
	go j.send()
}

// release gives the job's body back and the job to the pool.
func (j *mirrorJob) release() {
	j.body.Release()
	j.req.Body = nil
	j.m, j.up, j.status = nil, nil, 0
	j.cutOff.Store(false)
	j.run.jobs.Put(j)
}

// cut ends the job's exchange: its watched connection closes, its next
// write fails. r.mu is held.
func (j *mirrorJob) cut() {
	j.cutOff.Store(true)
	j.mu.Lock()
	if j.up != nil {
		j.up.Close()
	}
	j.mu.Unlock()
}

// send runs the mirror's attempts on the shadow origin, as forward runs
// a request's: the shadow's driver acquires a stream, the exchange sends
// the request, the job's Client drops the answer.
func (j *mirrorJob) send() {
	m, r := j.m, j.run
	o := m.Shadow
	ol := o.Place()
	pol := o.Policy()
	rp := forward.Replay{Resend: forward.Idempotent(j.req.Method)}
	if j.body.Bytes() != nil {
		rp.Body = keptWhole{}
	}
	a := &j.a
	o.Begin(a, ol, pol, rp, 1, balance.Key{})
	step, status := attempts(r.ctx, o.Driver(), a, ol.Index(), false, nil, pol, &j.x, &j.req, j, limitsOf(o, nil), time.Time{}, j)
	ok := step == forward.Delivered && status > 0 && !j.cutOff.Load()
	o.Finish(a, ol)
	if ok {
		m.Mirrored.Inc()
	} else {
		m.drop(DropFailed)
	}
	m.inFlight().Add(-1)
	r.mu.Lock()
	delete(r.live, j)
	r.mu.Unlock()
	j.release()
	r.wg.Done()
}

// rewind gives the attempt the mirror's kept body from its first byte.
func (j *mirrorJob) rewind(req *exchange.Request) {
	if b := j.body.Bytes(); b != nil {
		j.rd.Reset(b)
		req.Body = &j.rd
	}
}

// keptWhole is a mirror's body as an Attempt asks it: in memory, whole,
// so it can always go again.
type keptWhole struct{}

func (keptWhole) Kept() bool { return true }

// errCut is what a cut mirror's Client returns.
var errCut = errors.New("proxy: the mirror was cut")

// The job is its exchange's Client: the answer is read and dropped.

func (j *mirrorJob) WriteHead(h *exchange.Head) error {
	j.status = h.Status
	return j.err()
}

func (j *mirrorJob) Write(p []byte) (int, error) {
	if err := j.err(); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (j *mirrorJob) Flush() error                                   { return nil }
func (j *mirrorJob) End(trailer []hpack.HeaderField, n int64) error { return j.err() }
func (j *mirrorJob) Abort(n int64)                                  {}
func (j *mirrorJob) RawChunks() bool                                { return true }

func (j *mirrorJob) Watch(up io.Closer) {
	j.mu.Lock()
	j.up = up
	j.mu.Unlock()
	if j.cutOff.Load() {
		up.Close()
	}
}

func (j *mirrorJob) Unwatch() bool {
	j.mu.Lock()
	j.up = nil
	j.mu.Unlock()
	return j.cutOff.Load()
}

// Upgrade is never asked: an upgrade is not mirrored.
func (j *mirrorJob) Upgrade(h *exchange.Head, up io.ReadWriteCloser) int {
	up.Close()
	return 502
}

func (j *mirrorJob) err() error {
	if j.cutOff.Load() {
		return errCut
	}
	return nil
}
