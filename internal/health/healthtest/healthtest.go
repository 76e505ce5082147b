// Package healthtest is a test origin for the active health checks: an
// HTTP/1.1 server on a real socket that counts the connections it accepts,
// the health checks' probes (by their user-agent) and other requests, and
// answers as its Mode says; and Advance, which runs a fake clock past the
// probes it starts.
package healthtest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/waitfor"
)

// Advance moves clk by d one timer at a time and, after each, waits until
// quiet (the probes it started have ended): the probes run on real
// sockets while the fake clock stands still.
func Advance(t testing.TB, clk *clock.Fake, d time.Duration, quiet func() bool) {
	t.Helper()
	end := clk.Now().Add(d)
	for clk.Now().Before(end) {
		next, ok := clk.Next()
		if !ok || next.After(end) {
			clk.AdvanceTo(end)
		} else {
			clk.AdvanceTo(next)
		}
		waitfor.Until(t, "the probes in flight to end", quiet)
	}
}

// ProbeAgent is the user-agent of a health check's probe.
const ProbeAgent = "corput-health-check"

// The behaviours of an Origin.
const (
	OK   int32 = iota // 200 to everything
	S500              // 500 to everything
	S503              // 503 to everything
	Hang              // accepts and reads, never answers
)

// Origin is a counting HTTP/1.1 server on 127.0.0.1.
type Origin struct {
	ln       net.Listener
	Mode     atomic.Int32
	Conns    atomic.Int64 // connections accepted
	Probes   atomic.Int64 // probes answered or held
	Requests atomic.Int64 // other requests

	mu   sync.Mutex
	open []net.Conn
	wg   sync.WaitGroup
}

// Start starts an Origin answering OK; the test's cleanup stops it.
func Start(t testing.TB) *Origin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &Origin{ln: ln}
	o.wg.Add(1)
	go o.serve()
	t.Cleanup(o.Close)
	return o
}

// Addr is the origin's host:port.
func (o *Origin) Addr() string { return o.ln.Addr().String() }

func (o *Origin) serve() {
	defer o.wg.Done()
	for {
		c, err := o.ln.Accept()
		if err != nil {
			return
		}
		o.Conns.Add(1)
		o.mu.Lock()
		o.open = append(o.open, c)
		o.mu.Unlock()
		o.wg.Add(1)
		go o.handle(c)
	}
}

func (o *Origin) handle(c net.Conn) {
	defer o.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		if req.Header.Get("User-Agent") == ProbeAgent {
			o.Probes.Add(1)
		} else {
			o.Requests.Add(1)
		}
		status := 200
		switch o.Mode.Load() {
		case Hang:
			io.Copy(io.Discard, br) // until the peer closes it
			return
		case S500:
			status = 500
		case S503:
			status = 503
		}
		fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 2\r\n\r\nok", status, http.StatusText(status))
	}
}

// Close stops the origin and cuts its connections.
func (o *Origin) Close() {
	o.ln.Close()
	o.mu.Lock()
	for _, c := range o.open {
		c.Close()
	}
	o.mu.Unlock()
	o.wg.Wait()
}
