package pool

import "time"

// Conn is one upstream connection as the pool sees it. The wire layer
// (package upstream) implements it for HTTP/1.1 and HTTP/2; the lab's
// simulator implements it in memory. The pool never reads or writes bytes:
// it only counts streams and decides when a connection is handed out,
// probed, recycled or closed.
type Conn interface {
	// Streams is how many requests the connection may carry at once right
	// now: 1 for HTTP/1.1, the peer's SETTINGS_MAX_CONCURRENT_STREAMS for
	// HTTP/2. The pool caps it with Config.MaxStreams.
	Streams() int
	// Usable reports whether the connection can take a new request. It
	// is false once the peer closed it, sent GOAWAY or Connection: close,
	// or an I/O error broke it. It is cheap and never blocks; the pool
	// calls it before every hand-out and after every release.
	Usable() bool
	// Ping probes an idle connection (HTTP/2 PING; an HTTP/1.1 liveness
	// check) and calls done exactly once with nil when the peer answered
	// within timeout, or with the error. done may run on any goroutine,
	// synchronously included.
	Ping(timeout time.Duration, done func(error))
	// Protocol names the wire protocol: "h1" or "h2".
	Protocol() string
	// Close closes the connection at once. Safe to call more than once.
	Close() error
}

// Trusting is implemented by a Conn whose Usable check costs I/O (an
// HTTP/1.1 connection's probe read). Trusted reports, without I/O, that
// nothing wrong has been seen on the connection since its last exchange
// ended cleanly; a connection handed out on that word alone
// (AcquireTrusting) may still have been closed by the peer while idle, and
// its user must be able to tell and send the request again.
type Trusting interface {
	Trusted() bool
}

// Dialer opens connections to one endpoint address.
type Dialer interface {
	// Dial opens a connection to addr and calls done exactly once with it
	// or with the error. done may run on another goroutine or
	// synchronously; the pool never holds a lock while calling Dial. A
	// dial is never cancelled by the request that caused it: a finished
	// dial fills the pool even if that request gave up.
	Dial(addr string, done func(Conn, error))
}
