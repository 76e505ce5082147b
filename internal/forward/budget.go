package forward

import "sync/atomic"

// Budget bounds retries to a share of the requests in flight, as Envoy's
// retry budgets do: a retry may start while retries in flight stay within
// max(floor, percent × active requests). It stops a sick origin's errors
// from multiplying load through retries. Lock-free; one per origin.
//
// It bounds the retries of requests that may have reached an origin (a
// connection that broke under the request, an origin's 503). A retry after
// a failure that sent nothing adds no request to any origin and is not
// counted (see maxUnsentRetries).
type Budget struct {
	percent int64 // of active requests
	floor   int64 // retries always allowed
	active  atomic.Int64
	retries atomic.Int64
}

// NewBudget returns a budget of percent of the active requests, with a
// floor of three retries.
func NewBudget(percent int) *Budget {
	return &Budget{percent: int64(percent), floor: 3}
}

// begin and end bracket every forwarded request.
func (b *Budget) begin() { b.active.Add(1) }
func (b *Budget) end()   { b.active.Add(-1) }

// tryRetry reserves a retry; the caller calls doneRetry when it finishes.
func (b *Budget) tryRetry() bool {
	limit := max(b.active.Load()*b.percent/100, b.floor)
	if b.retries.Add(1) > limit {
		b.retries.Add(-1)
		return false
	}
	return true
}

func (b *Budget) doneRetry() { b.retries.Add(-1) }

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
