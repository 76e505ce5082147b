package forward

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/rng"
)

// The tests drive an Attempt through scripted outcomes over the real
// balancer (round robin: a fixed pick order) and real pools over memconn,
// on a fake clock, and check the steps, the reasons, what the observer
// heard, and the invariants: every endpoint's in-flight and pending
// counts, and every pool's busy streams, back to zero.

type harness struct {
	t     *testing.T
	clk   *clock.Fake
	bal   *balance.Origin
	pk    *balance.Picker
	pol   Policy
	obs   *recorder
	pools map[string]*pool.Pool
	dials map[string]*memconn.Dialer

	attempts int    // the last run's Attempts, read after Finish
	last     string // and its LastEndpoint's address
}

type recorder struct {
	answered []Reason
	resent   int
	settled  []int
	retried  [2]int // [unsent, replay]
}

func (r *recorder) Answered(x Reason) { r.answered = append(r.answered, x) }
func (r *recorder) Resent()           { r.resent++ }
func (r *recorder) Retried(replay bool) {
	if replay {
		r.retried[1]++
	} else {
		r.retried[0]++
	}
}
func (r *recorder) Settled(s int, _ time.Duration) { r.settled = append(r.settled, s) }

func newHarness(t *testing.T, endpoints int, pol Policy) *harness {
	t.Helper()
	h := &harness{t: t, clk: clock.NewFake(time.Unix(1e9, 0)), obs: &recorder{},
		pools: map[string]*pool.Pool{}, dials: map[string]*memconn.Dialer{}}
	var ms []balance.Member
	for i := range endpoints {
		ms = append(ms, balance.Member{Address: fmt.Sprintf("10.0.0.%d:80", i), Weight: 1})
	}
	cfg := balance.DefaultConfig()
	cfg.Policy = balance.RoundRobin
	cfg.SlowStart.Window = 0
	cfg.MaxPending = 2
	var err error
	if h.bal, err = balance.NewOrigin("app", cfg, ms, balance.Options{Clock: h.clk, Rand: rng.New(1)}); err != nil {
		t.Fatal(err)
	}
	h.pk = h.bal.NewPicker(nil)
	pc := pool.DefaultConfig()
	pc.Prewarm = 0
	for _, m := range ms {
		d := memconn.New(h.clk, memconn.Config{})
		p, err := pool.New(m.Address, 0, pc, d, h.clk, rng.New(2), nil)
		if err != nil {
			t.Fatal(err)
		}
		h.pools[m.Address], h.dials[m.Address] = p, d
	}
	t.Cleanup(func() {
		for _, p := range h.pools {
			p.Close()
		}
		h.pk.Close()
		h.bal.Close()
	})
	if pol.Budget == nil {
		pol.Budget = NewBudget(20)
	}
	pol.Clock, pol.Observer = h.clk, h.obs
	h.pol = pol
	return h
}

// outcome is what the test makes of one attempt.
type outcome struct {
	dialRefused bool    // the endpoint refuses the dial
	fail        Failure // the exchange's failure, when status is 0
	status      int     // a response with this status
	corput      bool    // the response carries X-Corput-Error
	lose        bool    // the exchange read body bytes it did not keep (over the replay buffer)
}

func ok(status int) outcome      { return outcome{status: status} }
func failed(f Failure) outcome   { return outcome{fail: f} }
func refusedDial() outcome       { return outcome{dialRefused: true} }
func (o outcome) String() string { return fmt.Sprintf("%+v", struct{ outcome }{o}) }

// idem is an idempotent request without a body (a GET).
var idem = Replay{Resend: true}

// attemptLog is one attempt as the harness saw it.
type attemptLog struct {
	ep    string
	trust bool
	step  Step
	wait  time.Duration // the backoff after Again
}

// run forwards one request through the script and returns what each
// attempt did, the final step and reason.
func (h *harness) run(r Replay, script ...outcome) ([]attemptLog, Step, Reason) {
	h.t.Helper()
	var a Attempt
	a.Start(&h.pol, h.pk, r, 1, balance.Key{})
	defer func() { // after Finish
		h.attempts, h.last = a.Attempts(), ""
		if ep := a.LastEndpoint(); ep != nil {
			h.last = ep.Address()
		}
	}()
	defer a.Finish()
	var log []attemptLog
	for i := 0; ; i++ {
		ep, trust, step := a.Pick()
		if step == Answer {
			return log, step, a.Reason()
		}
		if step != Acquire {
			h.t.Fatalf("Pick: %v", step)
		}
		if i >= len(script) {
			h.t.Fatalf("attempt %d on %s: the script has %d outcomes", i+1, ep.Address(), len(script))
		}
		o := script[i]
		d := h.dials[ep.Address()]
		d.SetDown(o.dialRefused)
		var l pool.Lease
		var err error
		h.pools[ep.Address()].AcquireAsync(func(lease pool.Lease, e error) { l, err = lease, e })
		d.SetDown(false)
		step = a.Acquired(l, err)
		if step == Send {
			h.clk.Advance(10 * time.Millisecond)
			if b, ok := r.Body.(*testBody); ok && o.lose {
				b.lost = true
			}
			if o.status == 0 {
				step = a.Failed(o.fail)
			} else {
				a.Respond(o.status, o.corput)
				step = a.Settle()
			}
		}
		log = append(log, attemptLog{ep.Address(), trust, step, a.Backoff()})
		switch step {
		case Again:
		case Delivered, Answer, Gone:
			return log, step, a.Reason()
		default:
			h.t.Fatalf("attempt %d: step %v", i+1, step)
		}
	}
}

// settled checks the invariants once a request is over.
func (h *harness) settled() {
	h.t.Helper()
	for _, ep := range h.bal.Endpoints() {
		if ep.Active() != 0 || ep.Pending() != 0 {
			h.t.Errorf("%s: %d in flight, %d pending after the request", ep.Address(), ep.Active(), ep.Pending())
		}
	}
	for addr, p := range h.pools {
		if st := p.Stats(); st.Busy != 0 {
			h.t.Errorf("%s: %d busy streams after the request", addr, st.Busy)
		}
	}
}

func eps(log []attemptLog) []string {
	var out []string
	for _, l := range log {
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(l.ep, "10.0.0."), ":80"))
	}
	return out
}

func TestFirstResponseIsDelivered(t *testing.T) {
	h := newHarness(t, 3, Policy{Attempts: 2, RetryConnect: true})
	log, step, reason := h.run(idem, ok(200))
	if step != Delivered || reason != NoHealthy && reason != None || len(log) != 1 || !log[0].trust {
		t.Fatalf("got %v %v %+v; want one delivered attempt, trusting its connection", step, reason, log)
	}
	if !slices.Equal(h.obs.settled, []int{200}) || len(h.obs.answered) != 0 {
		t.Errorf("observer: %+v", h.obs)
	}
	h.settled()
}

// After failures that sent nothing a replayable request goes again outside
// the budget, each time to an endpoint not tried; a failure that may have
// reached the origin takes the one budgeted retry; later attempts probe.
func TestRetriesAfterNothingSentGoElsewhereOutsideTheBudget(t *testing.T) {
	h := newHarness(t, 4, Policy{Attempts: 2, RetryConnect: true})
	log, step, _ := h.run(idem, refusedDial(), refusedDial(), failed(Broken), ok(200))
	if step != Delivered || len(log) != 4 {
		t.Fatalf("got %v after %+v; want delivered on the fourth attempt", step, log)
	}
	if e := eps(log); e[0] == e[1] || e[1] == e[2] || e[0] == e[2] || e[3] == e[2] {
		t.Errorf("endpoints %v: the attempts after a failure went back to a tried one", e)
	}
	for i, l := range log[1:] {
		if l.trust {
			t.Errorf("attempt %d trusted an unprobed connection after a failure", i+2)
		}
	}
	h.settled()
}

// testBody is a request body's replay buffer: lost once an exchange read
// bytes it could not keep.
type testBody struct{ lost bool }

func (b *testBody) Kept() bool { return !b.lost }

// TestReplayDecisions: what goes again after each failure, by what the
// request may replay (its method or key, its body): a request that sent
// nothing goes again whatever its method, when its body is kept; one that
// may have reached the origin only when it may be resent, its body kept.
func TestReplayDecisions(t *testing.T) {
	post := func() Replay { return Replay{Body: &testBody{}} }                // a POST without a key
	keyed := func() Replay { return Replay{Resend: true, Body: &testBody{}} } // a POST with the key, or a PUT
	for _, c := range []struct {
		name    string
		r       Replay
		script  []outcome
		step    Step
		reason  Reason
		retried [2]int
	}{
		{"POST, refused dial: another endpoint", post(), []outcome{refusedDial(), ok(200)}, Delivered, None, [2]int{1, 0}},
		{"POST, refused stream: another endpoint", post(), []outcome{failed(Refused), ok(200)}, Delivered, None, [2]int{1, 0}},
		{"POST, body read and lost, refused stream: answered", post(), []outcome{{fail: Refused, lose: true}}, Answer, UpstreamReset, [2]int{}},
		{"POST, broken after it was sent: answered", post(), []outcome{failed(Broken)}, Answer, UpstreamReset, [2]int{}},
		{"POST, origin's 502: relayed", post(), []outcome{ok(502)}, Delivered, None, [2]int{}},
		{"POST, origin's 503: relayed", post(), []outcome{ok(503)}, Delivered, None, [2]int{}},
		{"keyed POST, broken after it was sent: replayed", keyed(), []outcome{failed(Broken), ok(200)}, Delivered, None, [2]int{0, 1}},
		{"keyed POST, over the replay buffer, broken: answered", keyed(), []outcome{{fail: Broken, lose: true}}, Answer, UpstreamReset, [2]int{}},
		{"keyed POST, over the replay buffer, 503: relayed", keyed(), []outcome{{status: 503, lose: true}}, Delivered, None, [2]int{}},
		{"GET, origin's 502: retried", idem, []outcome{ok(502), ok(200)}, Delivered, None, [2]int{0, 1}},
		{"GET, origin's 504: retried", idem, []outcome{ok(504), ok(200)}, Delivered, None, [2]int{0, 1}},
		{"GET, a corput's 502: relayed", idem, []outcome{{status: 502, corput: true}}, Delivered, None, [2]int{}},
		{"GET, 502 twice: the second relayed", idem, []outcome{ok(502), ok(502)}, Delivered, None, [2]int{0, 1}},
		{"GET, timeout: answered", idem, []outcome{failed(Timeout)}, Answer, UpstreamTimeout, [2]int{}},
		{"GET, head too large: answered", idem, []outcome{failed(HeadTooLarge)}, Answer, UpstreamHeadTooLarge, [2]int{}},
		{"GET, protocol: answered", idem, []outcome{failed(Protocol)}, Answer, UpstreamReset, [2]int{}},
		{"GET, the client's body refused after it went out: answered 400", idem, []outcome{failed(BadBody)}, Answer, BadRequest, [2]int{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, 3, Policy{Attempts: 2, RetryConnect: true, RetryRefused: true, Retry502: true, Retry503: true, Retry504: true})
			log, step, reason := h.run(c.r, c.script...)
			if step != c.step || step == Answer && reason != c.reason || len(log) != len(c.script) {
				t.Fatalf("got %v %v after %d attempts; want %v %v after %d", step, reason, len(log), c.step, c.reason, len(c.script))
			}
			if h.obs.retried != c.retried {
				t.Errorf("retried [unsent, replay] = %v; want %v", h.obs.retried, c.retried)
			}
			if e := eps(log); len(e) == 2 && e[0] == e[1] {
				t.Errorf("endpoints %v: the retry went back to the one that failed", e)
			}
			for i, l := range log {
				if c.r.Body != nil && l.trust {
					t.Errorf("attempt %d of a request with a body trusted an unprobed connection", i+1)
				}
			}
			h.settled()
		})
	}
}

// TestBackoffFullJitter: each budgeted retry waits a draw of [0, ceiling]
// with the ceiling base×2ⁿ⁻¹ capped at max; a retry after nothing was sent
// waits nothing; a zero base never waits.
func TestBackoffFullJitter(t *testing.T) {
	var asked []int64
	jitter := func(n int64) int64 { asked = append(asked, n); return n - 1 } // the top of the range
	pol := Policy{Attempts: 4, RetryConnect: true, Retry503: true, BackoffBase: 10 * time.Millisecond, BackoffMax: 25 * time.Millisecond, Jitter: jitter}
	h := newHarness(t, 6, pol)
	log, step, _ := h.run(idem, refusedDial(), failed(Broken), ok(503), ok(503), ok(200))
	if step != Delivered || len(log) != 5 {
		t.Fatalf("got %v after %+v", step, log)
	}
	want := []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 25 * time.Millisecond}
	for i, w := range want {
		if log[i].wait != w {
			t.Errorf("attempt %d: backoff %v; want %v", i+1, log[i].wait, w)
		}
	}
	if !slices.Equal(asked, []int64{int64(10*time.Millisecond) + 1, int64(20*time.Millisecond) + 1, int64(25*time.Millisecond) + 1}) {
		t.Errorf("jitter asked %v", asked)
	}
	h.settled()

	pol.BackoffBase = 0
	h = newHarness(t, 3, pol)
	if log, _, _ := h.run(idem, failed(Broken), ok(200)); log[0].wait != 0 {
		t.Errorf("zero base: waited %v", log[0].wait)
	}
}

// TestRetry502504TakeTheBudgetAtTheResponse: a 502 or 504 is discarded
// only when the budget grants its retry; otherwise the origin's own answer
// is relayed (a 503's retry refused is answered upstream_503).
func TestRetry502504TakeTheBudgetAtTheResponse(t *testing.T) {
	for _, status := range []int{502, 504} {
		b := NewBudget(0)
		for range 3 {
			b.tryRetry()
		}
		h := newHarness(t, 3, Policy{Attempts: 2, Retry502: true, Retry504: true, Budget: b})
		log, step, _ := h.run(idem, ok(status))
		if step != Delivered || len(log) != 1 || !slices.Equal(h.obs.settled, []int{status}) {
			t.Errorf("%d, budget spent: %v %+v settled %v; want the origin's %d relayed", status, step, log, h.obs.settled, status)
		}
		h.settled()
	}
}

// An origin's 503 is retried while a budgeted retry can follow and
// relayed as it is after; a 503 another corput made is relayed at once.
func TestOrigin503IsRetriedThenRelayed(t *testing.T) {
	h := newHarness(t, 3, Policy{Attempts: 2, Retry503: true})
	log, step, _ := h.run(idem, ok(503), ok(503))
	if step != Delivered || len(log) != 2 || log[0].step != Again {
		t.Fatalf("got %v %+v; want the second 503 relayed", step, log)
	}
	if !slices.Equal(h.obs.settled, []int{503}) {
		t.Errorf("settled %v; want only the relayed 503", h.obs.settled)
	}
	h.settled()

	h = newHarness(t, 3, Policy{Attempts: 2, Retry503: true})
	if log, step, _ := h.run(idem, outcome{status: 503, corput: true}); step != Delivered || len(log) != 1 {
		t.Fatalf("a corput 503: %v %+v; want it relayed at once", step, log)
	}
	h.settled()
}

func TestRetriesStopWhenTheBudgetIsSpent(t *testing.T) {
	b := NewBudget(0) // the floor: 3 retries at once
	for range 3 {
		if !b.tryRetry() {
			t.Fatal("the floor refused a retry")
		}
	}
	h := newHarness(t, 3, Policy{Attempts: 3, RetryConnect: true, Budget: b})
	log, step, reason := h.run(idem, failed(Broken))
	if step != Answer || reason != UpstreamReset || len(log) != 1 {
		t.Fatalf("budget spent: %v %v %+v; want answered after one attempt", step, reason, log)
	}
	b.doneRetry()
	log, step, _ = h.run(idem, failed(Broken), ok(200))
	if step != Delivered || len(log) != 2 {
		t.Fatalf("with a retry free: %v %+v", step, log)
	}
	if b.retries.Load() != 2 || b.active.Load() != 0 {
		t.Errorf("after the requests: %d retries held, %d active; want the test's 2 and 0", b.retries.Load(), b.active.Load())
	}
	h.settled()
}

// A connection handed out unprobed and found closed is resent once,
// outside the budget and without counting against the endpoint.
func TestStaleConnectionIsResentOnce(t *testing.T) {
	h := newHarness(t, 2, Policy{Attempts: 2, RetryConnect: true, Budget: NewBudget(0)})
	log, step, _ := h.run(idem, failed(Stale), failed(Broken), ok(200))
	if step != Delivered || len(log) != 3 || !log[0].trust || log[1].trust {
		t.Fatalf("got %v %+v; want the stale one resent probing, then the budgeted retry", step, log)
	}
	if h.obs.resent != 1 {
		t.Errorf("resent %d, want 1", h.obs.resent)
	}
	h.settled()
}

// Strict retries (after nothing was sent) stop when every endpoint was
// tried, answering with the last failure.
func TestEveryEndpointRefusingEndsWithTheLastReason(t *testing.T) {
	h := newHarness(t, 2, Policy{Attempts: 2, RetryConnect: true})
	log, step, reason := h.run(idem, refusedDial(), refusedDial())
	if step != Answer || reason != ConnectFailed || len(log) != 2 {
		t.Fatalf("got %v %v %+v; want connect_failed after both endpoints", step, reason, log)
	}
	h.settled()
}

// Attempts counts the endpoints a request was sent towards, and
// LastEndpoint names the latest even after a Pick that found none.
func TestAttemptsAndLastEndpoint(t *testing.T) {
	for _, c := range []struct {
		name      string
		endpoints int
		script    []outcome
		step      Step
		attempts  int
	}{
		{"first try", 3, []outcome{ok(200)}, Delivered, 1},
		{"retried", 4, []outcome{refusedDial(), refusedDial(), failed(Broken), ok(200)}, Delivered, 4},
		{"every endpoint tried", 2, []outcome{refusedDial(), refusedDial()}, Answer, 2},
	} {
		h := newHarness(t, c.endpoints, Policy{Attempts: 2, RetryConnect: true})
		log, step, _ := h.run(idem, c.script...)
		if step != c.step || h.attempts != c.attempts || h.last != log[len(log)-1].ep {
			t.Errorf("%s: %v, %d attempts, last endpoint %q; want %v, %d, %q", c.name, step, h.attempts, h.last, c.step, c.attempts, log[len(log)-1].ep)
		}
		h.settled()
	}

	h := newHarness(t, 1, Policy{Attempts: 1})
	ep := h.bal.Endpoints()[0]
	for ep.TryAdmit() {
	}
	var a Attempt
	a.Start(&h.pol, h.pk, idem, 1, balance.Key{})
	a.Pick() // pending_full
	a.Finish()
	if a.Attempts() != 1 || a.LastEndpoint() != ep {
		t.Errorf("shed at the pick: %d attempts, last %v; want 1 and the full endpoint", a.Attempts(), a.LastEndpoint())
	}
	for ep.Pending() > 0 {
		ep.Release()
	}
	a.Start(&h.pol, h.pk, idem, 1, balance.Key{})
	if a.Attempts() != 0 || a.LastEndpoint() != nil {
		t.Errorf("after Start: %d attempts, last %v; want 0 and nil", a.Attempts(), a.LastEndpoint())
	}
	a.Finish()
	h.settled()
}

func TestAcquisitionFailures(t *testing.T) {
	for _, c := range []struct {
		err  error
		step Step
		want Reason
	}{
		{pool.ErrPendingFull, Answer, PendingFull},
		{pool.ErrAcquireTimeout, Answer, AcquireTimeout},
		{pool.ErrOverCap, Answer, OverCap},
		{ErrNoPool, Answer, NoHealthy},
		{context.DeadlineExceeded, Answer, UpstreamTimeout},
		{context.Canceled, Gone, NoHealthy},
		{pool.ErrClosed, Again, NoHealthy},
	} {
		h := newHarness(t, 2, Policy{Attempts: 2})
		var a Attempt
		a.Start(&h.pol, h.pk, idem, 1, balance.Key{})
		if _, _, step := a.Pick(); step != Acquire {
			t.Fatalf("Pick: %v", step)
		}
		if got := a.Acquired(pool.Lease{}, c.err); got != c.step || a.Reason() != c.want {
			t.Errorf("%v: %v %v, want %v %v", c.err, got, a.Reason(), c.step, c.want)
		}
		if c.step == Again {
			_, _, step := a.Pick()
			if step == Acquire {
				a.Acquired(pool.Lease{}, context.Canceled)
			}
		}
		a.Finish()
		a.Finish() // once only
		if h.pol.Budget.active.Load() != 0 {
			t.Errorf("%v: budget holds %d active", c.err, h.pol.Budget.active.Load())
		}
		h.settled()
	}
}

func TestPendingFullAtPick(t *testing.T) {
	h := newHarness(t, 1, Policy{Attempts: 1})
	ep := h.bal.Endpoints()[0]
	for ep.TryAdmit() {
	}
	var a Attempt
	a.Start(&h.pol, h.pk, idem, 1, balance.Key{})
	defer a.Finish()
	if _, _, step := a.Pick(); step != Answer || a.Reason() != PendingFull {
		t.Fatalf("a full endpoint: %v %v", step, a.Reason())
	}
	for ep.Pending() > 0 {
		ep.Release()
	}
	h.settled()
}

// The request path allocates nothing.
func TestAttemptAllocatesNothing(t *testing.T) {
	h := newHarness(t, 3, Policy{Attempts: 2, RetryConnect: true})
	h.pol.Observer = nil
	var a Attempt
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		a.Start(&h.pol, h.pk, idem, 1, balance.Key{})
		ep, _, _ := a.Pick()
		a.Acquired(h.pools[ep.Address()].Acquire(ctx))
		a.Failed(Broken)
		ep, _, _ = a.Pick()
		a.Acquired(h.pools[ep.Address()].Acquire(ctx))
		a.Respond(200, false)
		a.Settle()
		a.Finish()
	})
	if allocs > 0 {
		t.Errorf("%.1f allocations per request", allocs)
	}
}
