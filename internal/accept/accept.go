// Package accept keeps a listening socket accepting under pressure.
//
// A Listener wraps a net.Listener. Its Accept returns a connection, or an
// error only when the listener is closed or cannot accept again (a socket
// that is no longer listening). Every other accept error — out of file
// descriptors (EMFILE, ENFILE), out of buffers or memory, a connection
// aborted or refused by a firewall — is transient: Accept counts it, backs
// off as net/http's Server does (5 ms doubling to 1 s, reset by the next
// accepted connection) and tries again. A server loop built on it ends
// only on shutdown or on a fault that no waiting repairs.
//
// Invariants:
//   - A transient error never reaches the caller, and never ends Accept.
//   - Each error is counted once, by reason (Reason), through
//     Options.Count.
//   - The log says so once per burst: one warning when accepting starts
//     failing, one line when it accepts again, with how many failed and
//     for how long.
//   - With Options.Shed set, the listener holds one spare descriptor. At
//     the descriptor limit it gives the spare up, accepts the waiting
//     connection with it, writes Shed (a complete HTTP/1.1 response) and
//     closes it, then takes the spare back: a client at the limit hears a
//     503 at once instead of waiting in the kernel's accept queue.
//   - Close wakes an Accept that is backing off.
package accept

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// Reasons of accept errors, the values of corput_accept_errors_total's
// reason label.
const (
	ReasonFDLimit  = "fd_limit"  // EMFILE: the process's descriptor limit
	ReasonFDSystem = "fd_system" // ENFILE: the system's descriptor table
	ReasonMemory   = "memory"    // ENOBUFS, ENOMEM
	ReasonAborted  = "aborted"   // ECONNABORTED, EPROTO: the client left first
	ReasonOther    = "other"
)

// Reasons lists every reason, for pre-creating series.
var Reasons = []string{ReasonFDLimit, ReasonFDSystem, ReasonMemory, ReasonAborted, ReasonOther}

// Reason names an accept error.
func Reason(err error) string {
	switch {
	case errors.Is(err, syscall.EMFILE):
		return ReasonFDLimit
	case errors.Is(err, syscall.ENFILE):
		return ReasonFDSystem
	case errors.Is(err, syscall.ENOBUFS), errors.Is(err, syscall.ENOMEM):
		return ReasonMemory
	case errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPROTO):
		return ReasonAborted
	}
	return ReasonOther
}

// permanent reports whether err means the socket can never accept again.
func permanent(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.EBADF) ||
		errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSOCK) ||
		errors.Is(err, syscall.EOPNOTSUPP)
}

const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

// Options tune a Listener; the zero value retries silently.
type Options struct {
	// Name is the listener's name in the log ("listen", "admin").
	Name string
	// Logger receives the burst warnings; nil is slog.Default().
	Logger *slog.Logger
	// Count is called once per accept error with its Reason.
	Count func(reason string)
	// Shed, when set, is written to a connection accepted on the spare
	// descriptor at the limit, before it is closed.
	Shed []byte
	// After returns a channel that receives after d; nil is time.After.
	// Tests pass a fake.
	After func(d time.Duration) <-chan time.Time
}

// Listener is a net.Listener whose Accept survives transient errors.
type Listener struct {
	net.Listener
	opts Options
	done chan struct{}

	closeOnce sync.Once
	mu        sync.Mutex // guards spare: Accept and Close
	spare     *os.File

	// Accept's own state: Accept is called from one goroutine at a time.
	backoff time.Duration
	failed  int       // errors in the current burst
	since   time.Time // when the burst began
	shed    int       // connections shed in the current burst
}

// New wraps ln.
func New(ln net.Listener, opts Options) *Listener {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Count == nil {
		opts.Count = func(string) {}
	}
	if opts.After == nil {
		opts.After = time.After
	}
	l := &Listener{Listener: ln, opts: opts, done: make(chan struct{})}
	l.takeSpare()
	return l
}

// openSpare takes one descriptor to give up at the limit; nil if none.
func openSpare() *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return nil
	}
	return f
}

// Accept waits for and returns the next connection. It returns an error
// only once the listener is closed or can no longer accept.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			l.recovered()
			return c, nil
		}
		if l.closed() || permanent(err) {
			return nil, err
		}
		reason := Reason(err)
		l.opts.Count(reason)
		if l.failed == 0 {
			l.since = time.Now()
			l.opts.Logger.Warn("accept failing; backing off and retrying", "listener", l.opts.Name,
				"reason", reason, "err", err, "shedding", l.opts.Shed != nil)
		}
		l.failed++
		if (reason == ReasonFDLimit || reason == ReasonFDSystem) && l.releaseSpare() {
			// The spare's descriptor takes the next connection. The wait
			// for one is an accept's ordinary wait, not a busy loop.
			c, err := l.Listener.Accept()
			room := l.takeSpare()
			switch {
			case err == nil && room: // descriptors came back meanwhile: serve it
				l.recovered()
				return c, nil
			case err == nil:
				l.shedConn(c)
				if l.takeSpare() {
					continue // shed as fast as clients arrive while a spare is had
				}
			case l.closed() || permanent(err):
				return nil, err
			}
		}
		l.backoff = min(max(2*l.backoff, minBackoff), maxBackoff)
		select {
		case <-l.opts.After(l.backoff):
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
}

// recovered ends a burst of errors, if one was under way.
func (l *Listener) recovered() {
	l.backoff = 0
	if l.failed == 0 {
		return
	}
	l.opts.Logger.Info("accepting again", "listener", l.opts.Name, "errors", l.failed,
		"shed", l.shed, "for", time.Since(l.since).Round(time.Millisecond))
	l.failed, l.shed = 0, 0
	l.takeSpare()
}

// releaseSpare closes the spare descriptor, taking one first if none is
// held; it reports whether a descriptor was freed.
func (l *Listener) releaseSpare() bool {
	if l.opts.Shed == nil || !l.takeSpare() {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spare == nil {
		return false
	}
	l.spare.Close()
	l.spare = nil
	return true
}

// takeSpare holds a spare descriptor if Shed is set and the listener is
// open, opening one when none is held; it reports whether one is held.
func (l *Listener) takeSpare() bool {
	if l.opts.Shed == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spare == nil && !l.closed() {
		l.spare = openSpare()
	}
	return l.spare != nil
}

// shedConn answers c with Shed and closes it.
func (l *Listener) shedConn(c net.Conn) {
	l.shed++
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = c.Write(l.opts.Shed)
	c.Close()
}

// Close closes the listener and the spare descriptor, and wakes an Accept
// that is backing off.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		close(l.done)
		l.mu.Lock()
		if l.spare != nil {
			l.spare.Close()
			l.spare = nil
		}
		l.mu.Unlock()
	})
	return l.Listener.Close()
}

func (l *Listener) closed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}
