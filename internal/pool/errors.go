package pool

import (
	"errors"
	"fmt"
	"time"
)

// Acquisition errors. They are sentinels (compare with errors.Is) so the hot
// path allocates nothing; the gateway adds the request and answers with the
// status named in each comment.
var (
	// ErrPendingFull: MaxPending waiters are already queued (→ 503
	// pending_full). Raise pool.max_pending or add capacity.
	ErrPendingFull = errors.New("pool: pending queue full (pool.max_pending waiters already waiting)")
	// ErrAcquireTimeout: no stream became free within AcquireTimeout (→ 503
	// acquire_timeout). Raise pool.acquire_timeout or pool.max_connections.
	ErrAcquireTimeout = errors.New("pool: no connection free within pool.acquire_timeout")
	// ErrOverCap: the pool is at MaxConnections (or backing off) and the
	// policy is Reject (→ 503). Raise pool.max_connections or use over_cap:
	// queue.
	ErrOverCap = errors.New("pool: at pool.max_connections and over_cap is reject")
	// ErrClosed: the pool was drained or closed (the endpoint left the
	// subset or the gateway is shutting down); pick another endpoint.
	ErrClosed = errors.New("pool: closed (endpoint drained or gateway shutting down)")
)

// errCanceled settles a waiter whose caller gave up while a hand-out to it
// was found dead: the caller is no longer listening for a stream.
var errCanceled = errors.New("pool: acquisition canceled by its caller")

// DialError is a failed dial (→ 502 connect_failed). The pool returns the
// same *DialError, the latest, to every request it fails fast while it backs
// off, so the error allocates once per failed dial, not per request.
type DialError struct {
	Addr     string    // the endpoint
	Loop     int       // the pool's loop
	Failures int       // consecutive failed dials, this one included
	RetryAt  time.Time // end of the backoff: no dial before it
	Err      error     // the Dialer's error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("pool %s (loop %d): dial failed (%d in a row; backing off until %s): %v",
		e.Addr, e.Loop, e.Failures, e.RetryAt.Format(time.RFC3339Nano), e.Err)
}

// Unwrap returns the Dialer's error.
func (e *DialError) Unwrap() error { return e.Err }
