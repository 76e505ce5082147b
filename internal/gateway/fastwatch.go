package gateway

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/upstream"
)

// watchAfter is how long the fast path waits for an origin's response
// before it watches the client too: a client that leaves then cancels the
// upstream exchange (the origin sees its request end, as through
// net/http). Shorter exchanges cost a timer reset and stop, no goroutine
// and no read (net/http reads in the background on every request).
const watchAfter = 20 * time.Millisecond

// clientWatch watches a fast connection's client while an exchange waits
// for the origin. Its timer's function does the read, in the goroutine the
// timer starts.
type clientWatch struct {
	c     *fastConn
	t     *time.Timer
	ended chan struct{} // a started watch function signals here when it ends
	gone  atomic.Bool   // the client closed or broke the connection

	mu sync.Mutex
	up upstream.Raw // the exchange being watched; nil when disarmed
}

func newClientWatch(c *fastConn) *clientWatch {
	w := &clientWatch{c: c, ended: make(chan struct{}, 1)}
	w.t = time.AfterFunc(time.Hour, w.watch)
	w.t.Stop()
	return w
}

// arm starts watching the exchange on up.
func (w *clientWatch) arm(up upstream.Raw) {
	w.gone.Store(false)
	w.mu.Lock()
	w.up = up
	w.mu.Unlock()
	w.t.Reset(watchAfter)
}

// disarm stops watching; once it returns the watch function is not
// running and the connection's buffer is the caller's again.
func (w *clientWatch) disarm() {
	if w.t.Stop() {
		w.mu.Lock()
		w.up = nil
		w.mu.Unlock()
		return
	}
	w.mu.Lock()
	w.up = nil
	w.mu.Unlock()
	w.c.setReadDeadline(time.Unix(1, 0), false) // ends a read in progress
	<-w.ended
}

// watch reads the client: an error or EOF means it left, and the exchange
// is cut; bytes (a pipelined request) are kept in the buffer.
func (w *clientWatch) watch() {
	defer func() { w.ended <- struct{}{} }()
	w.mu.Lock()
	up := w.up
	w.mu.Unlock()
	c := w.c
	if up == nil || c.w == len(c.buf) {
		return
	}
	k, err := c.sock.Read(c.buf[c.w:])
	c.w += k
	if k > 0 || timedOut(err) {
		return
	}
	w.gone.Store(true)
	w.mu.Lock()
	if w.up != nil {
		w.up.Close()
	}
	w.mu.Unlock()
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
