package pool

import (
	"fmt"
	"sync/atomic"
	"time"
)

// CloseReason is why the pool closed a connection: the reason label of
// corput_upstream_connections_closed_total.
type CloseReason uint8

// The close reasons, exactly those of docs/contract.md.
const (
	ReasonIdle      CloseReason = iota // carried no stream for IdleTimeout
	ReasonLifetime                     // drained after MaxLifetime
	ReasonError                        // the caller saw it fail (Lease.Discard)
	ReasonKeepalive                    // a keepalive probe failed or timed out
	ReasonRemote                       // found unusable: the peer closed it, GOAWAY, Connection: close
	ReasonEviction                     // no longer wanted: a temporary connection after its request, or its endpoint was drained
	ReasonShutdown                     // Pool.Close
	numReasons
)

var reasonNames = [numReasons]string{"idle", "lifetime", "error", "keepalive", "remote", "eviction", "shutdown"}

// String returns the metric label.
func (r CloseReason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("CloseReason(%d)", uint8(r))
}

// CloseReasons lists every reason, for pre-creating metric series.
func CloseReasons() []CloseReason {
	rs := make([]CloseReason, numReasons)
	for i := range rs {
		rs[i] = CloseReason(i)
	}
	return rs
}

// Observer receives a pool's events for metrics. One Observer usually serves
// one pool, with the origin and loop labels bound. Methods are called
// without the pool's lock held, possibly from several goroutines at once,
// and must not block.
type Observer interface {
	// ConnCreated: a dial succeeded. temporary marks an over-cap one-shot
	// connection.
	ConnCreated(protocol string, temporary bool)
	// ConnClosed: the pool closed a connection it had created.
	ConnClosed(protocol string, reason CloseReason, temporary bool)
	// DialFailed: a dial failed; the pool backs off for backoff.
	DialFailed(err error, backoff time.Duration)
	// AcquireWait: an acquisition the pool settled, granted (err nil) or
	// failed, after waiting wait (0 when it was settled at once). A
	// waiter the caller withdrew is not reported.
	AcquireWait(wait time.Duration, err error)
}

// NopObserver ignores every event. Embed it to implement only some methods.
type NopObserver struct{}

func (NopObserver) ConnCreated(string, bool)             {}
func (NopObserver) ConnClosed(string, CloseReason, bool) {}
func (NopObserver) DialFailed(error, time.Duration)      {}
func (NopObserver) AcquireWait(time.Duration, error)     {}

// Tally is an Observer that counts, lock-free: the lab's churn numbers and
// the tests' ledger. The zero value is ready to use.
type Tally struct {
	created      [2]atomic.Int64 // [0] pooled, [1] temporary
	closed       [numReasons]atomic.Int64
	dialFailures atomic.Int64
	granted      atomic.Int64
	failed       atomic.Int64
	waitNanos    atomic.Int64
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ConnCreated implements Observer.
func (t *Tally) ConnCreated(_ string, temporary bool) { t.created[b2i(temporary)].Add(1) }

// ConnClosed implements Observer.
func (t *Tally) ConnClosed(_ string, r CloseReason, _ bool) { t.closed[r].Add(1) }

// DialFailed implements Observer.
func (t *Tally) DialFailed(error, time.Duration) { t.dialFailures.Add(1) }

// AcquireWait implements Observer.
func (t *Tally) AcquireWait(wait time.Duration, err error) {
	if err != nil {
		t.failed.Add(1)
	} else {
		t.granted.Add(1)
	}
	t.waitNanos.Add(int64(wait))
}

// Created is the number of connections created, temporary ones included.
func (t *Tally) Created() int64 { return t.created[0].Load() + t.created[1].Load() }

// CreatedTemporary is the number of temporary connections created.
func (t *Tally) CreatedTemporary() int64 { return t.created[1].Load() }

// Closed is the number of connections closed for reason r.
func (t *Tally) Closed(r CloseReason) int64 { return t.closed[r].Load() }

// ClosedTotal is the number of connections closed for any reason.
func (t *Tally) ClosedTotal() int64 {
	var n int64
	for i := range t.closed {
		n += t.closed[i].Load()
	}
	return n
}

// DialFailures is the number of failed dials.
func (t *Tally) DialFailures() int64 { return t.dialFailures.Load() }

// Granted and Failed count settled acquisitions.
func (t *Tally) Granted() int64 { return t.granted.Load() }

// Failed counts acquisitions that ended in an error.
func (t *Tally) Failed() int64 { return t.failed.Load() }

// WaitTotal is the summed wait of every settled acquisition.
func (t *Tally) WaitTotal() time.Duration { return time.Duration(t.waitNanos.Load()) }
