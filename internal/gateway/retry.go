package gateway

import (
	"errors"
	"sync/atomic"

	"github.com/corput/corput/internal/balance"
)

// retryBudget bounds retries to a share of the requests in flight, as
// Envoy's retry budgets do: a retry may start while retries in flight stay
// within max(floor, percent × active requests). It stops a sick origin's
// errors from multiplying load through retries. Lock-free.
//
// It bounds the retries of requests that may have reached an origin (a
// connection that broke under the request, an origin's 503). A retry after
// a failure that sent nothing (see unsentRetries) adds no request to any
// origin and is not counted.
type retryBudget struct {
	percent int64 // of active requests
	floor   int64 // retries always allowed
	active  atomic.Int64
	retries atomic.Int64
}

func newRetryBudget(percent int) *retryBudget {
	return &retryBudget{percent: int64(percent), floor: 3}
}

// begin and end bracket every proxied request.
func (b *retryBudget) begin() { b.active.Add(1) }
func (b *retryBudget) end()   { b.active.Add(-1) }

// tryRetry reserves a retry; the caller calls doneRetry when it finishes.
func (b *retryBudget) tryRetry() bool {
	limit := b.active.Load() * b.percent / 100
	if limit < b.floor {
		limit = b.floor
	}
	if b.retries.Add(1) > limit {
		b.retries.Add(-1)
		return false
	}
	return true
}

func (b *retryBudget) doneRetry() { b.retries.Add(-1) }

// maxUnsentRetries bounds the extra attempts a replayable request gets after
// failures that sent nothing to any origin: a dial that failed (or a pool
// that fails fast in its reconnect backoff, not even dialling), a stream or
// connection the origin refused before reading the request, an endpoint that
// left the subset. Nothing reached an application, so the retry cannot
// multiply an origin's load and does not draw on the retry budget; it goes
// only to an endpoint the request has not tried (Envoy's previous_hosts),
// and the reconnect backoff of each pool already bounds the dials. Two
// cover a rolling deploy: the endpoint that is down and the one restarted
// just before it, whose pools may still be backing off.
const maxUnsentRetries = 2

// unsentRetries is how many retries after nothing was sent a request may
// make: none when retries are off (retry.attempts: 0).
func unsentRetries(attempts int) int {
	if attempts <= 1 {
		return 0
	}
	return maxUnsentRetries
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

// pickFor chooses the endpoint of an attempt (t is nil before any
// failure). The first attempt is the
// policy's pick. A retry avoids every endpoint already tried while the
// loop offers another; when it offers none, a retry after a failure that
// may have reached an origin goes to a tried endpoint anyway, and a strict
// one (after nothing was sent) fails with balance.ErrAllTried: the same
// endpoints would fail it again at once.
func pickFor(pk *balance.Picker, t *triedHosts) (*balance.Endpoint, error) {
	if t == nil || t.n == 0 {
		return pk.Pick()
	}
	ep, err := pk.PickAvoiding(t.list())
	if errors.Is(err, balance.ErrAllTried) && !t.strict {
		return pk.Pick()
	}
	return ep, err
}
