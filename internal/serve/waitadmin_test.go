package serve

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTheWaitingAdminHandsItsSocketOver: while waiting, /healthz answers
// ok and /readyz 503 with the reason; handOver gives the same socket,
// open, to the next server, which answers on it.
func TestTheWaitingAdminHandsItsSocketOver(t *testing.T) {
	w, err := serveWhileWaiting(nil, "127.0.0.1:0", "waiting for the fleet position")
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := c.Get("http://" + w.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz while waiting: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "not ready: waiting for the fleet position") {
		t.Fatalf("/readyz while waiting: %d %q", code, body)
	}
	ln, err := w.handOver()
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { io.WriteString(rw, "gateway") })}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	defer func() { srv.Close(); <-done }()
	if code, body := get("/readyz"); code != 200 || body != "gateway" {
		t.Fatalf("after the hand-over: %d %q; want the next server's answer on the same socket", code, body)
	}
}

// fakeListener accepts what conns delivers; SetDeadline is recorded.
type fakeListener struct {
	conns     chan net.Conn
	deadlines []time.Time
}

func (f *fakeListener) Accept() (net.Conn, error) {
	c, ok := <-f.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (f *fakeListener) Close() error   { return nil }
func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }
func (f *fakeListener) SetDeadline(t time.Time) error {
	f.deadlines = append(f.deadlines, t)
	return nil
}

// TestAConnectionAcceptedAfterTheStopIsHandedOver: a connection the
// waiting server's Accept returns once the hand-over began is not given to
// it (it would close it) but is the next listener's first.
func TestAConnectionAcceptedAfterTheStopIsHandedOver(t *testing.T) {
	f := &fakeListener{conns: make(chan net.Conn, 1)}
	k := &keptOpen{deadlineListener: f}
	kept := k.stop()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	f.conns <- a // the Accept in flight returns it
	if c, err := k.Accept(); c != nil || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after stop = %v, %v; want nothing and net.ErrClosed", c, err)
	}
	r := &replay{Listener: f, pending: kept()}
	if c, err := r.Accept(); c != a || err != nil {
		t.Fatalf("the next listener's first Accept = %v, %v; want the kept connection", c, err)
	}
	if len(f.deadlines) != 1 || !f.deadlines[0].Before(time.Unix(2, 0)) {
		t.Fatalf("deadlines set: %v; want one in the past, to wake the Accept", f.deadlines)
	}
}
