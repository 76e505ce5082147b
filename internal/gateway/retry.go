package gateway

import "sync/atomic"

// retryBudget bounds retries to a share of the requests in flight, as
// Envoy's retry budgets do: a retry may start while retries in flight stay
// within max(floor, percent × active requests). It stops a sick origin's
// errors from multiplying load through retries. Lock-free.
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
