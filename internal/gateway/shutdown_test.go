package gateway

// Graceful shutdown (docs/gateway.md): /readyz fails at once, the listener stops
// accepting, in-flight requests finish, pools close, nothing leaks; and
// `corput serve` drains and exits 0 on SIGTERM.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/cluster"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/waitfor"
)

// holdBackend is an origin whose /hold requests wait until released (or
// until the gateway gives up on them); every other path answers at once.
type holdBackend struct {
	*backend
	arrived  chan struct{}
	release  chan struct{}
	once     sync.Once
	canceled chan struct{} // a held request's context ended first
}

func startHoldBackend(t testing.TB) *holdBackend {
	t.Helper()
	h := &holdBackend{arrived: make(chan struct{}, 16), release: make(chan struct{}), canceled: make(chan struct{}, 16)}
	h.backend = startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hold" {
			io.WriteString(w, "ok")
			return
		}
		h.arrived <- struct{}{}
		select {
		case <-h.release:
			io.WriteString(w, "held and done")
		case <-r.Context().Done():
			h.canceled <- struct{}{}
		}
	}))
	t.Cleanup(h.free)
	return h
}

func (h *holdBackend) free() { h.once.Do(func() { close(h.release) }) }

// result is a client's view of one request.
type result struct {
	status int
	body   string
	err    error
}

func fetch(c *http.Client, url string) <-chan result {
	out := make(chan result, 1)
	go func() {
		resp, err := c.Get(url)
		if err != nil {
			out <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		out <- result{status: resp.StatusCode, body: string(b), err: err}
	}()
	return out
}

func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return true
	}
	c.Close()
	return false
}

// TestGracefulShutdownDrainsInFlight holds a request in flight over HTTP/1.1
// and h2c, shuts down, and checks each promise of Gateway.Shutdown in
// order; goroutines started by the test are gone at the end.
func TestGracefulShutdownDrainsInFlight(t *testing.T) {
	for _, kind := range []string{dsH1, dsH2C} {
		t.Run(kind, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			b := startHoldBackend(t)
			g := gatewayTo(t, 2, "", "    pool: {prewarm: 1}\n", b.addr)
			c := downstream(t, kind, nil)
			if r := <-fetch(c, "http://"+g.Addr()+"/warm"); r.status != 200 {
				t.Fatalf("before shutdown: %+v", r)
			}
			inflight := fetch(c, "http://"+g.Addr()+"/hold")
			<-b.arrived

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			shut := make(chan error, 1)
			go func() { shut <- g.Shutdown(ctx) }()

			waitfor.Until(t, "/readyz to fail", func() bool { return statusOf(t, "http://"+g.AdminAddr()+"/readyz") == 503 })
			if code := statusOf(t, "http://"+g.AdminAddr()+"/healthz"); code != 200 {
				t.Errorf("/healthz %d while draining, want 200", code)
			}
			waitfor.Until(t, "the listener to refuse connections", func() bool { return refused(g.Addr()) })
			select {
			case r := <-inflight:
				t.Fatalf("in-flight request ended before its origin answered: %+v", r)
			case err := <-shut:
				t.Fatalf("Shutdown returned with a request in flight: %v", err)
			default:
			}

			b.free()
			if r := <-inflight; r.err != nil || r.status != 200 || r.body != "held and done" {
				t.Fatalf("in-flight request: %+v, want 200 and its whole body", r)
			}
			if err := <-shut; err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			for _, ov := range g.Origins().([]cluster.OriginView) {
				for _, lv := range ov.Loops {
					for addr, pv := range lv.Pools {
						if pv.Open != 0 || pv.Idle != 0 {
							t.Errorf("loop %d pool %s after shutdown: %+v", lv.Loop, addr, pv)
						}
					}
				}
			}
			waitfor.Until(t, "the origin to see every upstream connection closed", func() bool { return b.open.Load() == 0 })
			if !refused(g.AdminAddr()) {
				t.Error("admin listener still accepting after Shutdown returned")
			}
			c.Transport.(*http.Transport).CloseIdleConnections()
			b.Close()
			goleak.VerifyNone(t, ignore)
		})
	}
}

// TestShutdownDeadlineCutsWhatIsLeft lets the drain deadline pass with a
// request still held: Shutdown reports it, the client's request is cut,
// and the origin sees its request cancelled.
func TestShutdownDeadlineCutsWhatIsLeft(t *testing.T) {
	b := startHoldBackend(t)
	g := gatewayTo(t, 1, "", "", b.addr)
	inflight := fetch(downstream(t, dsH1, nil), "http://"+g.Addr()+"/hold")
	<-b.arrived
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := g.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if r := <-inflight; r.err == nil && r.status == 200 {
		t.Fatalf("held request completed after the deadline cut it: %+v", r)
	}
	select {
	case <-b.canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the origin's request was not cancelled when the gateway cut it")
	}
}

// TestShutdownAndCloseAreIdempotent calls Close after Shutdown (what a
// deferred Close does) and Shutdown again: each returns.
func TestShutdownAndCloseAreIdempotent(t *testing.T) {
	b := startHoldBackend(t)
	g := gatewayTo(t, 1, "", "", b.addr)
	done := make(chan error, 1)
	go func() {
		err := g.Shutdown(context.Background())
		err = errors.Join(err, g.Close())
		done <- errors.Join(err, g.Shutdown(context.Background()))
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("repeated shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second Shutdown or Close hangs")
	}
}

// TestServeExitsZeroOnSIGTERM builds cmd/corput, runs `corput serve`, sends
// SIGTERM with a request in flight, and checks the request completes,
// /readyz fails during the drain, and the process exits 0.
func TestServeExitsZeroOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/corput")
	}
	b := startHoldBackend(t)
	p := startServe(t, fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 2
shutdown: {drain_timeout: 10s}
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    endpoints: [{address: %q}]
`, b.addr))
	listen, admin := p.listen, p.admin
	waitfor.Until(t, "/readyz", func() bool { return statusOf(t, "http://"+admin+"/readyz") == 200 })
	c := downstream(t, dsH1, nil)
	if r := <-fetch(c, "http://"+listen+"/x"); r.status != 200 || r.body != "ok" {
		t.Fatalf("through corput serve: %+v", r)
	}
	inflight := fetch(c, "http://"+listen+"/hold")
	<-b.arrived
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		resp, err := adminHTTP.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 503 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not fail within 10s of SIGTERM (last: %v)\n%s", err, p.stop())
		}
	}
	b.free()
	if r := <-inflight; r.err != nil || r.status != 200 || r.body != "held and done" {
		t.Fatalf("request in flight at SIGTERM: %+v", r)
	}
	switch exited, err := p.wait(30 * time.Second); {
	case !exited:
		t.Fatalf("corput serve still running 30s after SIGTERM\n%s", p.stop())
	case err != nil:
		t.Fatalf("corput serve after SIGTERM: %v, want exit 0\n%s", err, p.stop())
	}
	if logs := p.stop(); !strings.Contains(logs, "draining") {
		t.Errorf("no drain logged:\n%s", logs)
	}
}
