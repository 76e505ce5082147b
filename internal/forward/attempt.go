// Package forward owns the steps of one downstream request on its way to an
// origin: pick an endpoint, admit the request to it, acquire a stream of its
// pool, exchange, settle, release — and the decision between attempts
// whether to go again (the endpoints tried, the retry budget, idempotency,
// the stale-connection resend). It also holds the one list of reasons the
// gateway answers a request itself (Reason).
//
// An Attempt decides and does no I/O. Its caller acquires the stream
// (package dispatch: blocking with Pool.Acquire for the gateway, or with
// Pool.AcquireAsync on the lab's virtual time), makes the exchange
// (package exchange), and reports each step; the Attempt answers with the
// next Step. The gateway (package proxy, for both serving paths) and the
// lab's simulated gateway run it, so the lab's figures come from the
// decisions that serve traffic.
//
// A request's steps, with what the caller does between them:
//
//	a.Start(policy, picker, replay, cost, key)
//	defer a.Finish()
//	for {
//		ep, trust, step := a.Pick()               // Acquire, or Answer
//		lease, err := pool(ep).Acquire(ctx)        // AcquireTrusting when trust
//		step = a.Acquired(lease, err)              // Send, Again, Answer, Gone
//		... write the request on a.Conn(), read the response head ...
//		step = a.Failed(f)                         // no response: Again, Answer, Gone
//		relay := a.Respond(status, fromCorput)     // a head: relay it, or discard it
//		... relay or discard; end I/O on the connection ...
//		step = a.Settle()                          // Delivered, Again, Answer
//		// on Again: wait a.Backoff() on the clock, rewind the body
//	}
//
// Invariants:
//   - Every endpoint Pick returns gets exactly one Endpoint.End (with the
//     ticket of its pick), and its admission (TryAdmit) exactly one
//     Endpoint.Release, at Acquired.
//   - The request's cost (its workload class's; 1 for no known class)
//     reaches every pick of every attempt: the balancer weighs it and counts
//     it in the endpoint's work in flight until End. So does its key (a
//     sticky origin's, KeySource): every attempt walks the key's order.
//   - Every lease Acquired is given is released exactly once, by Failed or
//     Settle, which the caller calls only after it has ended its I/O on the
//     connection: a connection goes back to its pool in a known state.
//   - No attempt follows one whose request body was read and not kept
//     whole (Replay.Body's Kept): the bytes to send again are gone.
//   - A retry after a failure that may have reached an origin (a broken
//     connection, an origin's 502, 503 or 504) is charged to the Budget
//     and taken only by a request that may be replayed (Replay.Resend: an
//     idempotent method, or the route's idempotency header on the
//     request), at most retry.attempts times, each after a backoff with
//     full jitter (Backoff). A retry after nothing was sent (a failed
//     dial, a refused stream, an endpoint that left) is taken whatever the
//     method, is not charged, waits no backoff and goes only to an
//     endpoint not tried yet, at most maxUnsentRetries times. A connection
//     handed out unprobed and found closed by the origin (Stale) is resent
//     once per such connection, outside both.
//   - An Answer is final: Reason says what to answer, and the Observer has
//     been told once.
//   - The request path allocates nothing: an Attempt is a value its caller
//     keeps (on the stack, or in a per-connection struct).
package forward

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/pool"
)

// Step is what the caller does next.
type Step uint8

// The steps.
const (
	Acquire   Step = iota // acquire a stream of the picked endpoint's pool
	Send                  // a stream is held: send the request on Conn
	Again                 // go again: Pick
	Answer                // answer with Reason; the request is over
	Gone                  // the client left: nothing to answer (counted as 499)
	Delivered             // the origin's response was relayed; the request is over
)

var stepNames = [...]string{"acquire", "send", "again", "answer", "gone", "delivered"}

func (s Step) String() string { return stepNames[s] }

// Failure is how an exchange ended without a response.
type Failure uint8

// The failures.
const (
	// Broken: the connection broke with the request sent, or partly
	// sent: the origin may have processed it.
	Broken Failure = iota
	// Refused: the origin is known not to have processed it (a refused
	// stream, a connection unusable before anything was written).
	Refused
	// Stale: a connection handed out unprobed (trust) had been closed by
	// the origin while idle; nothing reached it.
	Stale
	// Timeout: timeouts.request passed.
	Timeout
	// ClientLeft: the client went away (or broke its request body).
	ClientLeft
	// HeadTooLarge: the origin's response head is above the bound.
	HeadTooLarge
	// Protocol: the origin broke the protocol (a response that cannot be
	// relayed, such as a 101 nobody asked for).
	Protocol
	// HeadTimeout: a limit of the attempt's own (Expired names it:
	// response_header or per_try) passed before the response head. Unlike
	// Timeout (the whole request's limit), another attempt may follow a
	// per-try timeout.
	HeadTimeout
	// BodyTooLarge: the client's body grew above the route's
	// max_request_body_bytes; the upstream request was cut.
	BodyTooLarge
	// BodyTimeout: the client's body stalled for
	// downstream.body_read_timeout; the upstream request was cut.
	BodyTimeout
	// BadBody: the client's request body was refused after the request
	// went out (a chunk line the framing guard refused, a trailer the
	// field-name rules refuse): answered 400, the origin not blamed.
	BadBody
)

// ErrNoPool is what the caller reports to Acquired when the picked endpoint
// has no pool to acquire from.
var ErrNoPool = errors.New("forward: the endpoint has no pool")

// Picker chooses endpoints for requests of a cost and a key (the zero Key
// for none); *balance.Picker is one.
type Picker interface {
	PickKeyed(cost float64, key balance.Key) (*balance.Endpoint, balance.Ticket, error)
	PickKeyedAvoiding(avoid []*balance.Endpoint, cost float64, key balance.Key) (*balance.Endpoint, balance.Ticket, error)
}

// Observer hears what an origin's requests did, for its metrics. Its
// methods must be quick and must not block.
type Observer interface {
	// Answered: the gateway answers a request itself, with r.
	Answered(r Reason)
	// Resent: a request goes again after a Stale connection.
	Resent()
	// Retried: a request goes again after a failure: replay says it may
	// have reached an origin (a budgeted retry), else nothing was sent.
	Retried(replay bool)
	// Settled: an exchange delivered a response with status, d after its
	// stream was acquired.
	Settled(status int, d time.Duration)
}

// Policy is an origin's (or a route's) retry rules and the parts every
// Attempt on it shares. It is read only once built, but for Budget.
type Policy struct {
	// Attempts is 1 + retry.attempts.
	Attempts int
	// RetryConnect, RetryRefused, Retry502, Retry503 and Retry504 are
	// retry.on's connect-failure, refused-stream, 502, 503 and 504
	// (gateway-error is the last three).
	RetryConnect, RetryRefused, Retry502, Retry503, Retry504 bool
	// BackoffBase and BackoffMax are retry.backoff's: the wait before the
	// n-th budgeted retry is drawn uniformly from [0, min(max, base×2ⁿ⁻¹)]
	// (full jitter); a zero base waits nothing.
	BackoffBase, BackoffMax time.Duration
	// Jitter draws uniformly from [0, n) for the backoff; nil: math/rand/v2's.
	// The lab passes its seeded source's.
	Jitter func(n int64) int64
	// IdempotencyHeader is retry.idempotency_header, lower-case ("" for
	// none): a request carrying it may be replayed after it was sent.
	IdempotencyHeader string
	// ReplayBuffer is retry.replay_buffer: the most body bytes kept to send
	// again (package replay); 0 keeps none.
	ReplayBuffer int
	Budget       *Budget
	Clock        clock.Clock
	Observer     Observer // nil hears nothing
	// Trace, when set, is called as each attempt ends: its endpoint ("" when
	// Pick found none), the step it ended with (Again, Answer, Gone or
	// Delivered) and the reason (None for Gone and Delivered). Tests and
	// experiments compare decisions with it; nil costs nothing.
	Trace func(endpoint string, s Step, r Reason)
}

// what a failed attempt sent, for the retry decision.
type sent uint8

const (
	sentMaybe   sent = iota // the request may have reached the origin
	sentNothing             // nothing reached any origin
	sentStale               // an unprobed connection was found closed
)

// Replay is what Start is told of a request: what of it may be sent
// again.
type Replay struct {
	// Resend: the request may be sent again after it may have reached an
	// origin. Its method is idempotent (RFC 9110 §9.2.2) and it asks no
	// protocol upgrade, or the route opts in with retry.idempotency_header
	// and the request carries it (the origin deduplicates).
	Resend bool
	// Body is the request body's replay buffer, nil when the request has
	// no body.
	Body Rewinder
}

// Rewinder is a request body's replay buffer as an Attempt asks it
// (replay.Body is one).
type Rewinder interface {
	// Kept reports whether every body byte read so far is kept, so that
	// the body can be sent again from its start: true before any was read.
	Kept() bool
}

// Attempt is one downstream request's way through one origin loop: its
// attempts, the endpoint and lease of the current one, and its outcome.
// The zero value is unusable; Start makes it ready, and it may be reused
// once Finish has run.
type Attempt struct {
	pol     *Policy
	pk      Picker
	replay  Replay
	started bool
	cost    float64     // the request's cost, in units of the lightest class
	key     balance.Key // the request's key for a sticky origin (KeySource); zero: none

	tried   triedHosts
	failed  bool // an attempt failed: every later one probes its connection
	retries int  // budgeted retries taken
	unsent  int  // retries after nothing was sent
	charged bool // the request holds a retry of the budget
	held    bool // Respond took the budgeted retry its discarded response goes to
	reason  Reason
	wait    time.Duration // the backoff before the next attempt

	ep      *balance.Endpoint
	ticket  balance.Ticket    // what the balancer counted for ep's pick, given back at End
	last    *balance.Endpoint // the latest endpoint Pick chose; kept past a Pick that finds none
	picks   int               // endpoints Pick chose: the request's attempts
	lease   pool.Lease
	start   time.Time     // the stream was acquired
	headers time.Duration // start to the response head
	status  int
	discard bool  // Respond chose not to relay (an origin's 502, 503 or 504 to retry past)
	limit   Limit // the time limit that ended the latest exchange (Expired)
	idleCut bool  // the relayed response was ended by stream_idle (IdleTimedOut)
}

// Start readies a for a request through pk under pol. r says what of the
// request may be sent again. cost is the request's cost in units of the
// lightest workload class (its class's workload.classes[].cost; 1 when it
// has no known class). key is its key for a sticky origin
// (KeySource.Key), the zero Key when it has none.
func (a *Attempt) Start(pol *Policy, pk Picker, r Replay, cost float64, key balance.Key) {
	*a = Attempt{pol: pol, pk: pk, replay: r, started: true, reason: NoHealthy, cost: cost, key: key}
	pol.Budget.begin()
}

// Backoff is the wait before the next attempt, after Again: zero but
// before a budgeted retry under retry.backoff. The caller waits it on the
// policy's clock (the gateway sleeps, the lab's virtual time moves on).
func (a *Attempt) Backoff() time.Duration { return a.wait }

// kept reports whether the request's body, if any, can be sent again.
func (a *Attempt) kept() bool { return a.replay.Body == nil || a.replay.Body.Kept() }

// Finish ends the request: it gives back what the request held of the
// retry budget. It may be deferred, and runs once however often it is
// called.
func (a *Attempt) Finish() {
	if !a.started {
		return
	}
	a.started = false
	if a.charged {
		a.pol.Budget.doneRetry()
		a.charged = false
	}
	a.pol.Budget.end()
}

// Cost is the request's cost, as Start was given it.
func (a *Attempt) Cost() float64 { return a.cost }

// Reason is what to answer after Answer.
func (a *Attempt) Reason() Reason { return a.reason }

// Endpoint is the current attempt's endpoint (nil before Pick).
func (a *Attempt) Endpoint() *balance.Endpoint { return a.ep }

// Attempts is how many attempts the request made: the endpoints Pick
// chose for it, the one that shed it (pending_full) included; 0 when no
// endpoint was found. It stays readable after Finish, until Start.
func (a *Attempt) Attempts() int { return a.picks }

// LastEndpoint is the endpoint of the request's latest attempt, nil when
// it made none. Unlike Endpoint it outlives a Pick that finds no endpoint,
// and Finish, so that it names where the request went last.
func (a *Attempt) LastEndpoint() *balance.Endpoint { return a.last }

// Status is the status of the current attempt's response head, 0 before
// Respond.
func (a *Attempt) Status() int { return a.status }

// Conn is the connection of the stream held since Send.
func (a *Attempt) Conn() pool.Conn { return a.lease.Conn() }

// MayRetry reports whether a budgeted retry can still follow the current
// attempt: without one an origin's 503 is relayed as it is.
func (a *Attempt) MayRetry() bool {
	return a.replay.Resend && a.retries+1 < a.pol.Attempts && a.kept()
}

// Pick chooses the endpoint of the next attempt — one the request has not
// tried when the loop offers one — and admits the request to it. On
// Acquire the caller acquires a stream of ep's pool and reports it with
// Acquired; trust says it may take an idle HTTP/1.1 connection without
// its probe (Pool.AcquireTrusting) and report a closed one as Stale. On
// Answer the request is over.
func (a *Attempt) Pick() (ep *balance.Endpoint, trust bool, step Step) {
	a.ep, a.status, a.limit = nil, 0, NoLimit
	ep, t, err := a.pick()
	switch {
	case errors.Is(err, balance.ErrAllTried):
		return nil, false, a.traced(a.answer(a.reason)) // the last failure's reason
	case err != nil:
		return nil, false, a.traced(a.answer(NoHealthy))
	}
	a.ep, a.last, a.ticket = ep, ep, t
	a.picks++
	if !ep.TryAdmit() {
		ep.End(t, 0, balance.Shed)
		return nil, false, a.traced(a.answer(PendingFull))
	}
	// Trusting an unprobed connection is for a request that can be resent
	// whole if it was stale: one without a body.
	return ep, a.MayRetry() && a.replay.Body == nil && !a.failed, Acquire
}

// traced reports an attempt's end to Policy.Trace.
func (a *Attempt) traced(s Step) Step {
	if t := a.pol.Trace; t != nil {
		addr, r := "", None
		if a.ep != nil {
			addr = a.ep.Address()
		}
		if s == Again || s == Answer {
			r = a.reason
		}
		t(addr, s, r)
	}
	return s
}

// pick is the policy's pick for the first attempt. A retry avoids every
// endpoint already tried while the loop offers another; when it offers
// none, a retry after a failure that may have reached an origin goes to a
// tried endpoint anyway, and a strict one (after nothing was sent) fails
// with balance.ErrAllTried: the same endpoints would fail it again at once.
func (a *Attempt) pick() (*balance.Endpoint, balance.Ticket, error) {
	if a.tried.n == 0 {
		return a.pk.PickKeyed(a.cost, a.key)
	}
	ep, t, err := a.pk.PickKeyedAvoiding(a.tried.list(), a.cost, a.key)
	if errors.Is(err, balance.ErrAllTried) && !a.tried.strict {
		return a.pk.PickKeyed(a.cost, a.key)
	}
	return ep, t, err
}

// Acquired reports the acquisition for the picked endpoint: the lease and
// error of Pool.Acquire (ErrNoPool when there was no pool; ctx errors:
// context.DeadlineExceeded is the request's timeout, any other the client
// gone). On Send the stream is held.
func (a *Attempt) Acquired(l pool.Lease, err error) Step {
	if s := a.acquired(l, err); s != Send {
		return a.traced(s)
	}
	return Send
}

func (a *Attempt) acquired(l pool.Lease, err error) Step {
	ep := a.ep
	ep.Release()
	if err == nil {
		a.lease, a.start = l, a.pol.Clock.Now()
		return Send
	}
	var de *pool.DialError
	switch {
	case errors.As(err, &de):
		ep.End(a.ticket, 0, balance.ConnectFailure)
		if a.pol.RetryConnect { // nothing was sent: no connection, or none tried in the backoff
			return a.after(sentNothing, ConnectFailed)
		}
		return a.answer(ConnectFailed)
	case errors.Is(err, pool.ErrClosed):
		// The endpoint just left the subset: another endpoint may serve.
		ep.End(a.ticket, 0, balance.Shed)
		return a.after(sentNothing, NoHealthy)
	}
	ep.End(a.ticket, 0, balance.Shed)
	switch {
	case errors.Is(err, pool.ErrPendingFull):
		return a.answer(PendingFull)
	case errors.Is(err, pool.ErrAcquireTimeout):
		return a.answer(AcquireTimeout)
	case errors.Is(err, pool.ErrOverCap):
		return a.answer(OverCap)
	case errors.Is(err, ErrNoPool):
		return a.answer(NoHealthy)
	case errors.Is(err, context.DeadlineExceeded):
		return a.answer(UpstreamTimeout)
	}
	return Gone
}

// Failed reports an exchange that ended without a response, once the
// caller has ended its I/O on the connection; the stream goes back.
func (a *Attempt) Failed(f Failure) Step { return a.traced(a.exchangeFailed(f)) }

func (a *Attempt) exchangeFailed(f Failure) Step {
	ep := a.ep
	elapsed := a.pol.Clock.Now().Sub(a.start)
	a.release()
	switch f {
	case Timeout:
		ep.End(a.ticket, elapsed, balance.ServerError)
		return a.answer(UpstreamTimeout)
	case HeadTimeout:
		ep.End(a.ticket, elapsed, balance.ServerError)
		if a.limit == LimitPerTry && a.pol.RetryConnect {
			// The attempt's own limit: another endpoint may answer in
			// time (Envoy's per_try_timeout). A request that may have
			// reached the origin: replayable ones only, budgeted.
			return a.after(sentMaybe, UpstreamTimeout)
		}
		return a.answer(UpstreamTimeout)
	case BodyTooLarge:
		ep.End(a.ticket, 0, balance.Shed)
		return a.answer(RequestBodyTooLarge)
	case BodyTimeout:
		ep.End(a.ticket, 0, balance.Shed)
		return a.answer(RequestBodyTimeout)
	case HeadTooLarge:
		ep.End(a.ticket, elapsed, balance.ServerError)
		return a.answer(UpstreamHeadTooLarge)
	case Protocol:
		ep.End(a.ticket, elapsed, balance.ServerError)
		return a.answer(UpstreamReset)
	case ClientLeft:
		ep.End(a.ticket, 0, balance.Shed)
		return Gone
	case BadBody:
		ep.End(a.ticket, 0, balance.Shed)
		return a.answer(BadRequest)
	case Refused:
		ep.End(a.ticket, 0, balance.Shed)
		if a.pol.RetryRefused {
			return a.after(sentNothing, UpstreamReset)
		}
		return a.answer(UpstreamReset)
	case Stale:
		ep.End(a.ticket, 0, balance.Shed)
		return a.after(sentStale, UpstreamReset)
	}
	// The connection broke before any response: an origin that crashed
	// with the request in flight, or closed a kept-alive connection as it
	// was reused. The balancer counts a connect failure, and under
	// retry.on connect-failure a request that may be replayed
	// (Replay.Resend, its body kept) goes to another endpoint.
	ep.End(a.ticket, 0, balance.ConnectFailure)
	if a.pol.RetryConnect {
		return a.after(sentMaybe, UpstreamReset)
	}
	return a.answer(UpstreamReset)
}

// Respond reports the response head, with its status; fromCorput says it
// carries X-Corput-Error (another corput answered: it already shed or
// retried, so it is relayed). It returns whether to relay the response:
// false for an origin's 502, 503 or 504 that a retry can follow (retry.on),
// which the caller discards. Either way the caller then ends its I/O and
// calls Settle. A 502 or 504 is discarded only when the budget grants its
// retry now: otherwise the origin's own answer is relayed, where a refused
// 503's retry is answered upstream_503.
func (a *Attempt) Respond(status int, fromCorput bool) (relay bool) {
	a.headers = a.pol.Clock.Now().Sub(a.start)
	a.status = status
	a.discard = false
	if fromCorput || !a.MayRetry() {
		return true
	}
	switch status {
	case 503:
		a.discard = a.pol.Retry503
	case 502, 504:
		if status == 502 && a.pol.Retry502 || status == 504 && a.pol.Retry504 {
			a.discard = a.takeRetry()
			a.held = a.discard
		}
	}
	return !a.discard
}

// Settle ends an exchange that got a response, once the caller has ended
// its I/O on the connection: the endpoint learns its outcome and latency
// (to the response head), the stream goes back, and a relayed response's
// duration is observed (Delivered). A discarded 503 goes again.
func (a *Attempt) Settle() Step { return a.traced(a.settle()) }

func (a *Attempt) settle() Step {
	ep := a.ep
	a.release()
	if a.discard {
		ep.End(a.ticket, a.headers, balance.ServerError)
		return a.after(sentMaybe, Upstream503)
	}
	ep.End(a.ticket, a.headers, balance.OutcomeOf(a.status))
	if obs := a.pol.Observer; obs != nil {
		obs.Settled(a.status, a.pol.Clock.Now().Sub(a.start))
	}
	return Delivered
}

func (a *Attempt) release() {
	a.lease.Release()
	a.lease = pool.Lease{}
}

// answer ends the request with r.
func (a *Attempt) answer(r Reason) Step {
	a.reason = r
	if obs := a.pol.Observer; obs != nil {
		obs.Answered(r)
	}
	return Answer
}

// after decides, once an attempt failed with r, whether the request goes
// again (see the package invariants).
func (a *Attempt) after(s sent, r Reason) Step {
	a.reason = r
	a.failed = true
	a.wait = 0
	if !a.kept() { // the body's bytes to send again are gone
		a.tried.add(a.ep)
		return a.answer(r)
	}
	if s == sentStale && a.replay.Body == nil {
		// What the hand-out probe would have caught
		// (pool.AcquireTrusting): the endpoint did nothing wrong.
		if obs := a.pol.Observer; obs != nil {
			obs.Resent()
		}
		return Again
	}
	a.tried.add(a.ep)
	if s != sentMaybe && a.unsent < unsentRetries(a.pol.Attempts) {
		// Nothing reached an origin: any method may go again.
		a.unsent++
		a.tried.strict = true
		a.retried(false)
		return Again
	}
	if !a.replay.Resend {
		return a.answer(r)
	}
	if a.held { // Respond took this retry already
		a.held = false
	} else if !a.takeRetry() {
		return a.answer(r)
	}
	a.wait = a.backoff()
	a.retried(true)
	return Again
}

// takeRetry takes a budgeted retry: within retry.attempts and granted by
// the budget.
func (a *Attempt) takeRetry() bool {
	if a.charged { // every budgeted retry asks the budget
		a.pol.Budget.doneRetry()
		a.charged = false
	}
	if a.retries+1 >= a.pol.Attempts || !a.pol.Budget.tryRetry() {
		return false
	}
	a.retries++
	a.charged, a.tried.strict = true, false
	return true
}

// backoff draws the wait before budgeted retry a.retries: full jitter over
// [0, min(max, base×2ⁿ⁻¹)] (AWS's "full jitter"; Envoy's retry back-off).
func (a *Attempt) backoff() time.Duration {
	p := a.pol
	if p.BackoffBase <= 0 {
		return 0
	}
	ceil := p.BackoffBase << min(a.retries-1, 20)
	if p.BackoffMax > 0 && (ceil > p.BackoffMax || ceil <= 0) {
		ceil = p.BackoffMax
	}
	jitter := p.Jitter
	if jitter == nil {
		jitter = rand.Int64N
	}
	return time.Duration(jitter(int64(ceil) + 1))
}

func (a *Attempt) retried(replay bool) {
	if obs := a.pol.Observer; obs != nil {
		obs.Retried(replay)
	}
}

// triedHosts are the endpoints a request's attempts have failed on, so
// that a retry goes to another one (Envoy's previous_hosts retry
// predicate). It holds as many as the most attempts a request can make
// (1 + retry.attempts ≤ 11, + maxUnsentRetries) and allocates nothing.
type triedHosts struct {
	n   int
	eps [16]*balance.Endpoint
	// strict: the next attempt follows a failure that sent nothing, and
	// goes only to an endpoint not tried yet.
	strict bool
}

func (t *triedHosts) add(ep *balance.Endpoint) {
	if ep == nil || t.n == len(t.eps) {
		return
	}
	for _, e := range t.eps[:t.n] {
		if e == ep {
			return
		}
	}
	t.eps[t.n] = ep
	t.n++
}

func (t *triedHosts) list() []*balance.Endpoint { return t.eps[:t.n] }

// NewPolicy is the Policy of an origin's (or a route's) retry
// configuration.
func NewPolicy(r config.Retry, clk clock.Clock, obs Observer) Policy {
	p := Policy{
		Attempts: 1 + r.Attempts, Budget: NewBudget(r.BudgetPercent), Clock: clk, Observer: obs,
		BackoffBase: r.Backoff.Base, BackoffMax: r.Backoff.Max,
		IdempotencyHeader: strings.ToLower(r.IdempotencyHeader), ReplayBuffer: r.ReplayBuffer,
	}
	for _, on := range r.On {
		switch on {
		case config.RetryConnectFailure:
			p.RetryConnect = true
		case config.RetryRefusedStream:
			p.RetryRefused = true
		case config.Retry502:
			p.Retry502 = true
		case config.Retry503:
			p.Retry503 = true
		case config.Retry504:
			p.Retry504 = true
		case config.RetryGatewayError:
			p.Retry502, p.Retry503, p.Retry504 = true, true, true
		}
	}
	return p
}
