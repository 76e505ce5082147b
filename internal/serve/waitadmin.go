package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// waitingAdmin answers on the admin listener while the gateway waits for
// its first fleet position, so that an orchestrator tells "waiting" from
// "dead": /healthz answers ok (the process is alive; a liveness probe must
// not restart it, which would only start the wait again), /readyz and
// every other path answer 503 with the reason. handOver stops it and gives
// the listener, still open, to the gateway: the address never goes unbound.
type waitingAdmin struct {
	ln   deadlineListener
	wrap *keptOpen
	srv  *http.Server
	done chan struct{}
}

// deadlineListener is a listener whose Accept can be woken by a deadline
// (*net.TCPListener, an activated socket's too).
type deadlineListener interface {
	net.Listener
	SetDeadline(time.Time) error
}

// serveWhileWaiting serves ln (or a listener bound to addr when ln is nil)
// until handOver; why is what /readyz answers.
func serveWhileWaiting(ln net.Listener, addr, why string) (*waitingAdmin, error) {
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("admin listener %s: %w", addr, err)
		}
	}
	dl, ok := ln.(deadlineListener)
	if !ok {
		return nil, fmt.Errorf("admin listener %s: cannot be handed over (%T)", ln.Addr(), ln)
	}
	w := &waitingAdmin{ln: dl, wrap: &keptOpen{deadlineListener: dl}, done: make(chan struct{})}
	w.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if r.URL.Path == "/healthz" {
			fmt.Fprintln(rw, "ok")
			return
		}
		rw.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(rw, "not ready:", why)
	})}
	go func() {
		defer close(w.done)
		_ = w.srv.Serve(w.wrap)
	}()
	return w, nil
}

// Addr is the admin address served.
func (w *waitingAdmin) Addr() string { return w.ln.Addr().String() }

// handOver stops answering (requests in flight finish) and returns the
// listener, open, for the gateway to serve: a connection accepted after
// the waiting server stopped is the gateway's first.
func (w *waitingAdmin) handOver() (net.Listener, error) {
	pending := w.wrap.stop()
	<-w.done // Serve returned: its Accept said the listener is closed
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := w.srv.Shutdown(ctx)
	return &replay{Listener: w.ln, pending: pending()}, errors.Join(err, w.ln.SetDeadline(time.Time{}))
}

// close stops answering and closes the listener (the gateway did not take
// it).
func (w *waitingAdmin) close() {
	ln, _ := w.handOver()
	ln.Close()
}

// keptOpen is what the waiting server serves. stop wakes its Accept with
// a past deadline instead of closing the socket; a connection accepted
// from then on is kept for the gateway, not given to the waiting server.
type keptOpen struct {
	deadlineListener
	mu      sync.Mutex // guards following
	stopped bool
	kept    []net.Conn
}

func (k *keptOpen) Accept() (net.Conn, error) {
	c, err := k.deadlineListener.Accept()
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.stopped {
		return c, err
	}
	if err == nil {
		k.kept = append(k.kept, c)
	}
	return nil, net.ErrClosed
}

// stop makes Accept end; the returned func gives the connections kept,
// once Accept has returned for good.
func (k *keptOpen) stop() func() []net.Conn {
	k.mu.Lock()
	k.stopped = true
	k.mu.Unlock()
	_ = k.deadlineListener.SetDeadline(time.Unix(1, 0))
	return func() []net.Conn {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.kept
	}
}

// Close is the waiting server's: it closes nothing.
func (k *keptOpen) Close() error {
	k.stop()
	return nil
}

// replay is the handed-over listener: the connections the waiting server
// left first, then the socket's own.
type replay struct {
	net.Listener
	mu      sync.Mutex
	pending []net.Conn
}

// Close closes the socket and the connections never accepted from it.
func (r *replay) Close() error {
	r.mu.Lock()
	for _, c := range r.pending {
		c.Close()
	}
	r.pending = nil
	r.mu.Unlock()
	return r.Listener.Close()
}

func (r *replay) Accept() (net.Conn, error) {
	r.mu.Lock()
	if len(r.pending) > 0 {
		c := r.pending[0]
		r.pending = r.pending[1:]
		r.mu.Unlock()
		return c, nil
	}
	r.mu.Unlock()
	return r.Listener.Accept()
}
