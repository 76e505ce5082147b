package pool

import (
	"errors"
	"fmt"
	"time"
)

// OverCap is what a request does when no stream is free and the pool may
// not dial (it is at MaxConnections).
type OverCap uint8

// The over-cap policies. docs/pool.md weighs them.
const (
	// Queue waits FIFO, at most AcquireTimeout and never more than
	// MaxPending waiters, then fails with ErrAcquireTimeout or
	// ErrPendingFull.
	Queue OverCap = iota
	// Temporary also dials a one-shot connection, not counted in
	// MaxConnections and closed after one request (reason eviction). The
	// waiter takes whichever comes first: a released stream or that
	// connection.
	Temporary
	// Reject fails at once with ErrOverCap.
	Reject
)

var overCapNames = [...]string{Queue: "queue", Temporary: "temporary", Reject: "reject"}

// String returns the config spelling: queue, temporary or reject.
func (o OverCap) String() string {
	if int(o) < len(overCapNames) {
		return overCapNames[o]
	}
	return fmt.Sprintf("OverCap(%d)", uint8(o))
}

// ParseOverCap reads the config spelling of an over-cap policy.
func ParseOverCap(s string) (OverCap, error) {
	for i, n := range overCapNames {
		if s == n {
			return OverCap(i), nil
		}
	}
	return 0, fmt.Errorf("pool.over_cap: unknown policy %q; use queue, temporary or reject", s)
}

// Config bounds and times one (endpoint, loop) pool. Start from
// DefaultConfig: a zero IdleTimeout, MaxLifetime or Keepalive turns that
// behaviour off, other zero values are invalid (see Validate).
type Config struct {
	// MaxConnections caps open plus dialling pooled connections
	// (pool.max_connections). Draining connections count until closed.
	MaxConnections int
	// MaxPending caps the waiters queued for a stream (pool.max_pending),
	// whether they wait for a dial or for a release.
	MaxPending int
	// AcquireTimeout is the longest a waiter waits (pool.acquire_timeout).
	AcquireTimeout time.Duration
	// OverCap is the policy at the cap (pool.over_cap).
	OverCap OverCap
	// IdleTimeout closes a connection that carried no stream for this long
	// (pool.idle_timeout); 0 never does.
	IdleTimeout time.Duration
	// MaxLifetime drains a connection this old, ±10 % jitter
	// (pool.max_lifetime); 0 never does.
	MaxLifetime time.Duration
	// Keepalive probes a connection idle for this long (pool.keepalive);
	// 0 never does.
	Keepalive time.Duration
	// KeepaliveTimeout is how long a probe may take before the connection
	// is declared dead.
	KeepaliveTimeout time.Duration
	// Prewarm is how many healthy connections the pool opens at New and
	// keeps: idle eviction never goes below it, and a lost connection is
	// replaced (pool.prewarm).
	Prewarm int
	// MaxStreams caps a connection's Streams(); 0 takes the peer's value.
	MaxStreams int
	// BackoffBase and BackoffMax bound the reconnect backoff after the
	// n-th consecutive dial failure: a uniform draw in
	// [0, min(BackoffMax, BackoffBase·2^(n-1))) ("full jitter").
	BackoffBase time.Duration
	BackoffMax  time.Duration
}

// DefaultConfig returns the seeds' defaults (docs/contract.md): 64 connections,
// 50 waiters, 100 ms acquire timeout, queue, 60 s idle, 10 min lifetime, 15 s
// keepalive with a 5 s probe timeout, 1 pre-warmed connection, the peer's
// stream limit, and a 100 ms – 5 s reconnect backoff.
func DefaultConfig() Config {
	return Config{
		MaxConnections:   64,
		MaxPending:       50,
		AcquireTimeout:   100 * time.Millisecond,
		OverCap:          Queue,
		IdleTimeout:      60 * time.Second,
		MaxLifetime:      10 * time.Minute,
		Keepalive:        15 * time.Second,
		KeepaliveTimeout: 5 * time.Second,
		Prewarm:          1,
		BackoffBase:      100 * time.Millisecond,
		BackoffMax:       5 * time.Second,
	}
}

// Validate reports every invalid field at once, each naming its config key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("pool.%s: "+format, append([]any{key}, args...)...))
	}
	if c.MaxConnections < 1 {
		bad("max_connections", "must be at least 1 (got %d)", c.MaxConnections)
	}
	if c.MaxPending < 1 {
		bad("max_pending", "must be at least 1 (got %d): an unbounded or zero queue is refused", c.MaxPending)
	}
	if c.AcquireTimeout <= 0 {
		bad("acquire_timeout", "must be positive (got %v): every wait needs a bound", c.AcquireTimeout)
	}
	if c.OverCap > Reject {
		bad("over_cap", "unknown policy %v; use queue, temporary or reject", c.OverCap)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"idle_timeout", c.IdleTimeout}, {"max_lifetime", c.MaxLifetime}, {"keepalive", c.Keepalive}} {
		if d.v < 0 {
			bad(d.key, "must not be negative (got %v); 0 turns it off", d.v)
		}
	}
	if c.Keepalive > 0 && c.KeepaliveTimeout <= 0 {
		bad("keepalive_timeout", "must be positive when keepalive is on (got %v)", c.KeepaliveTimeout)
	}
	if c.Prewarm < 0 {
		bad("prewarm", "must not be negative (got %d)", c.Prewarm)
	}
	if c.MaxStreams < 0 {
		bad("max_streams", "must not be negative (got %d); 0 takes the peer's limit", c.MaxStreams)
	}
	if c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase {
		bad("backoff", "need 0 < base <= max (got base %v, max %v)", c.BackoffBase, c.BackoffMax)
	}
	return errors.Join(errs...)
}

// streamsOf is a connection's usable stream capacity: its Streams() capped
// by MaxStreams, never negative.
func (c *Config) streamsOf(peer int) int {
	if c.MaxStreams > 0 && peer > c.MaxStreams {
		return c.MaxStreams
	}
	return max(peer, 0)
}

// floor is how many healthy connections the pool keeps open.
func (c *Config) floor() int { return min(c.Prewarm, c.MaxConnections) }
