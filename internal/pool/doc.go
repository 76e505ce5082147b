// Package pool owns corput's upstream connections: one Pool per
// (endpoint, loop), so a request on loop A never touches loop B's
// connections and no lock is shared between loops on the hot path. The core
// is protocol-agnostic: a connection (Conn, implemented by package upstream
// for HTTP/1.1 and HTTP/2 and by package memconn in memory) is only a stream
// capacity, a liveness flag and a probe.
//
// It implements docs/spec.md's gw-04 ("Required behaviors": reuse by default, a bounded
// pool with an explicit over-cap policy, idle eviction and max-lifetime
// recycling with keepalive so a dead origin is detected, not handed out; "h1
// and h2 modes"; the cold-pool herd mitigations pre-warming and reconnect
// jitter) and docs/pool.md. docs/pool.md explains the lifecycle
// and the trade-offs.
//
// # Using a pool
//
//	p, err := pool.New(addr, loop, cfg, dialer, clock.Real(), rng.New(seed), observer)
//	lease, err := p.Acquire(ctx)       // a free stream, a new connection, or a typed error
//	... lease.Conn().(upstream.Conn).RoundTrip(req) ...
//	lease.Release()                    // or lease.Discard() when the connection itself failed
//
// The simulator uses AcquireAsync, whose callback runs synchronously when a
// stream is free and later otherwise (a dial finished, a stream was released,
// the acquire timer fired). Nothing in the pool blocks: every wait is a
// callback armed on the injected clock, so one goroutine can drive many pools
// on virtual time.
//
// # Acquisition
//
// Acquire hands out a free stream on a live connection first, most recently
// used connection first (LIFO keeps the working set small and lets the rest
// idle out). Only when none is free does it dial, and only while open plus
// dialling connections are under MaxConnections. The caller then waits in a
// FIFO queue of at most MaxPending waiters. A waiter that the dials in
// flight cover (counted from the head of the queue) waits for its
// connection, bounded by the Dialer's own timeout; one they do not cover
// (at the cap, in a backoff, or past their capacity) waits at most
// AcquireTimeout from the moment no dial is left to serve it. A dial is
// never tied to the request that caused it: a request that gives up
// leaves the dial running, and the connection fills the pool. Until the
// first connection has told the pool its stream capacity, one dial at a
// time is in flight (an HTTP/2 origin must not get 64 handshakes for 64
// requests); after that, ceil(waiters / capacity) dials, and for a
// multiplexed connection (capacity above 1) a headroom: while streams are
// taken, the pool dials so that max(capacity/2, in use/8) streams stay
// free or on their way, so the next connections are dialled while the
// last ones fill (ceil((in use + headroom) / capacity) connections under
// demand; an idle pool dials nothing ahead).
//
// At the cap, Config.OverCap decides: Queue waits, Temporary also dials a
// one-shot connection that is closed after its one request, Reject fails at
// once with ErrOverCap. While dials are failing the pool backs off (full
// jitter between BackoffBase and BackoffMax); a request that finds no healthy
// connection and no dial in flight during the backoff fails at once with the
// *DialError instead of waiting for a timeout.
//
// Errors map to gateway answers: ErrPendingFull → 503 pending_full,
// ErrAcquireTimeout → 503 acquire_timeout, ErrOverCap → 503, *DialError →
// 502 connect_failed, ErrClosed → the endpoint left (pick another).
//
// # Lifecycle
//
// One timer per pool (never one per connection) sweeps at the earliest
// deadline: a connection idle for IdleTimeout is closed unless that would
// leave fewer than Prewarm healthy ones; a connection older than its
// MaxLifetime (±10 % jitter, drawn once at creation) drains: it takes no new
// streams, finishes the ones in flight, then closes; a connection idle for
// Keepalive is probed with Conn.Ping. A probe occupies one stream while in
// flight (so an HTTP/1.1 connection is not handed out under a probe) and a
// failed probe closes the connection at once. Conn.Usable is checked before
// every hand-out and after every release; an unusable connection is never
// handed out. Close reasons are exactly those of corput's metrics: idle,
// lifetime, error, keepalive, remote, eviction, shutdown.
//
// # Locking
//
// Each Pool has one mutex, Pool.mu, guarding the fields listed after it
// ("guards following"), including every pconn and waiter field marked so.
// Methods ending in Locked must be called with it held. While holding it the
// pool calls only the clock (Now, AfterFunc, Timer.Reset/Stop) and its rng;
// it never calls the Dialer, Conn methods, the Observer or a caller's
// callback. Those are collected in an effects value under the lock and run
// after it is released (Pool.apply), so a Dialer or Conn may call back into
// the pool synchronously. Lock order: Pool.mu, then the clock's own lock.
package pool
