package fastpath

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// watchAfter is how long the fast path waits for an origin's response
// before it watches the client too: a client that leaves then cancels the
// upstream exchange (the origin sees its request end, as through
// net/http). Shorter exchanges cost two atomic stores, no timer update, no
// goroutine and no read (net/http reads in the background on every
// request).
const watchAfter = 20 * time.Millisecond

// Watch states.
const (
	watchIdle     int32 = iota // no exchange
	watchArmed                 // an exchange waits for its origin since armedAt
	watchWatching              // the timer's function is reading the client
)

// clientWatch watches a fast connection's client while an exchange waits
// for the origin. Its timer is lazy: arm starts it only when it is not
// already pending, and when it fires it starts the watch if the exchange
// armed now has waited watchAfter, or sleeps until it will have. Under
// load a connection's timer so fires about once per watchAfter, not once
// per request (a timer reset and stop per request were 2 % of the fast
// path's CPU). The watch read runs in the goroutine the timer starts.
type clientWatch struct {
	c       *fastConn
	t       *time.Timer
	ended   chan struct{} // a started watch signals here when it ends
	gone    atomic.Bool   // the client closed or broke the connection
	state   atomic.Int32
	pending atomic.Bool  // the timer is set, or its function is deciding
	armedAt atomic.Int64 // monotonic ns (sinceEpoch) of the current arm

	// up is the exchange being watched (an HTTP/1.1 connection, or an
	// HTTP/2 stream), written by arm before it publishes watchArmed and
	// read by the watch after it took watchWatching from it. Closing it
	// cuts the exchange.
	up io.Closer
}

// epoch is this process's origin of monotonic time for armedAt.
var epoch = time.Now()

func sinceEpoch(t time.Time) int64 { return int64(t.Sub(epoch)) }

func newClientWatch(c *fastConn) *clientWatch {
	w := &clientWatch{c: c, ended: make(chan struct{}, 1)}
	w.t = time.AfterFunc(time.Hour, w.fire)
	w.t.Stop()
	return w
}

// arm starts watching the exchange on up, which began at now.
func (w *clientWatch) arm(up io.Closer, now time.Time) {
	w.gone.Store(false)
	w.up = up
	w.armedAt.Store(sinceEpoch(now))
	w.state.Store(watchArmed)
	if w.pending.CompareAndSwap(false, true) {
		w.t.Reset(watchAfter)
	}
}

// disarm stops watching; once it returns no watch is reading and the
// connection's buffer is the caller's again. The timer may stay set.
func (w *clientWatch) disarm() {
	if w.state.CompareAndSwap(watchArmed, watchIdle) {
		w.up = nil
		return
	}
	if w.state.Load() == watchIdle {
		return // not armed: no watch to wait for
	}
	w.c.setReadDeadline(time.Unix(1, 0), 0, false) // ends the watch's read
	<-w.ended
	w.up = nil
	w.state.Store(watchIdle)
}

// stop ends the timer with the connection.
func (w *clientWatch) stop() { w.t.Stop() }

// fire is the timer's function.
func (w *clientWatch) fire() {
	for {
		if w.state.Load() == watchArmed {
			if wait := watchAfter - time.Duration(sinceEpoch(time.Now())-w.armedAt.Load()); wait > 0 {
				w.t.Reset(wait) // still pending
				return
			}
			if w.state.CompareAndSwap(watchArmed, watchWatching) {
				w.pending.Store(false)
				w.watch()
				return
			}
			continue // disarmed meanwhile
		}
		w.pending.Store(false)
		// An arm that came before the store above saw the timer pending
		// and left it to this function: take it back.
		if w.state.Load() != watchArmed || !w.pending.CompareAndSwap(false, true) {
			return
		}
	}
}

// watch reads the client: an error or EOF means it left, and the exchange
// is cut; bytes (a pipelined request) are kept in the buffer.
func (w *clientWatch) watch() {
	defer func() { w.ended <- struct{}{} }()
	c := w.c
	if c.w == len(c.buf) {
		return
	}
	k, err := c.sock.Read(c.buf[c.w:])
	c.w += k
	if k > 0 || timedOut(err) {
		return
	}
	w.gone.Store(true)
	w.up.Close()
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
