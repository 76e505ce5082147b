package accept

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/testlog"
)

// The tests run the real accept(2) against a real loopback listener at a
// real descriptor limit: this package's test binary lowers its own
// RLIMIT_NOFILE and fills every descriptor below it. Only the backoff's
// waiting is faked (Options.After), so no test sleeps.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fillFDs lowers the soft descriptor limit to 128 and opens /dev/null
// until none is left. release(n) closes n of the fillers; cleanup closes
// the rest and restores the limit.
func fillFDs(t *testing.T) (release func(n int)) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip("getrlimit:", err)
	}
	lim := old
	lim.Cur = 128
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip("setrlimit:", err)
	}
	var files []*os.File
	var mu sync.Mutex
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("filling descriptors: %v", err)
			}
			break
		}
		files = append(files, f)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range files {
			f.Close()
		}
		files = nil
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Errorf("restoring the limit: %v", err)
		}
	})
	return func(n int) {
		mu.Lock()
		defer mu.Unlock()
		for ; n > 0 && len(files) > 0; n-- {
			files[len(files)-1].Close()
			files = files[:len(files)-1]
		}
	}
}

// fakeWait is Options.After: each wait is sent on asked, and returns when
// the test sends on fire.
type fakeWait struct {
	asked chan time.Duration
	fire  chan time.Time
}

func newFakeWait() *fakeWait {
	return &fakeWait{asked: make(chan time.Duration), fire: make(chan time.Time)}
}

func (w *fakeWait) after(d time.Duration) <-chan time.Time {
	w.asked <- d
	return w.fire
}

type counts struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counts) count(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[reason]++
}

func (c *counts) get(reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[reason]
}

type accepted struct {
	c   net.Conn
	err error
}

func acceptAsync(l *Listener) <-chan accepted {
	ch := make(chan accepted, 1)
	go func() {
		c, err := l.Accept()
		ch <- accepted{c, err}
	}()
	return ch
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func dial(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// At the descriptor limit Accept backs off 5, 10, 20 ms (as net/http's
// Server does), counts each EMFILE, warns once, and returns the waiting
// connection as soon as a descriptor is free; the log says it recovered.
func TestOutOfDescriptorsBacksOffAndRecovers(t *testing.T) {
	ln := listen(t)
	client := dial(t, ln) // queued in the kernel; accepting it needs a descriptor
	var n counts
	logger, logs := testlog.New(slog.LevelInfo)
	w := newFakeWait()
	l := New(ln, Options{Name: "listen", Count: n.count, After: w.after,
		Logger: logger})
	defer l.Close()
	release := fillFDs(t)

	got := acceptAsync(l)
	for i, want := range []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond} {
		if d := <-w.asked; d != want {
			t.Fatalf("wait %d: backoff %v, want %v", i, d, want)
		}
		if i == 2 {
			release(1)
		}
		w.fire <- time.Time{}
	}
	a := <-got
	if a.err != nil {
		t.Fatalf("Accept after a descriptor came back: %v", a.err)
	}
	defer a.c.Close()
	if a.c.RemoteAddr().String() != client.LocalAddr().String() {
		t.Fatalf("accepted %v, want the waiting client %v", a.c.RemoteAddr(), client.LocalAddr())
	}
	if got := n.get(ReasonFDLimit); got != 3 {
		t.Errorf("fd_limit errors counted: %d, want 3", got)
	}
	log := logs.String()
	if c := strings.Count(log, "accept failing"); c != 1 {
		t.Errorf("%d warnings for one burst, want 1:\n%s", c, log)
	}
	if !strings.Contains(log, "reason=fd_limit") || !strings.Contains(log, "accepting again") ||
		!strings.Contains(log, "errors=3") {
		t.Errorf("the log does not tell the burst and its end:\n%s", log)
	}
}

// With Shed set, clients that arrive at the limit are answered with it at
// once, on the spare descriptor, and closed; once descriptors are free
// again, the next client is accepted as usual.
func TestShedsAtTheLimitOnTheSpare(t *testing.T) {
	ln := listen(t)
	clients := []net.Conn{dial(t, ln), dial(t, ln), dial(t, ln)}
	const shed = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
	var n counts
	logger, logs := testlog.New(slog.LevelInfo)
	w := newFakeWait()
	l := New(ln, Options{Name: "listen", Count: n.count, After: w.after, Shed: []byte(shed),
		Logger: logger})
	defer l.Close()
	release := fillFDs(t)

	got := acceptAsync(l)
	for i, c := range clients {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		if err != nil || string(b) != shed {
			t.Fatalf("client %d at the limit read %q, %v; want the shed response and EOF", i, b, err)
		}
	}
	select {
	case a := <-got:
		t.Fatalf("Accept returned %v, %v while at the limit", a.c, a.err)
	case d := <-w.asked:
		t.Fatalf("Accept backed off %v while it could shed", d)
	default:
	}
	release(3)
	late := dial(t, ln)
	a := <-got
	if a.err != nil {
		t.Fatalf("Accept once descriptors are free: %v", a.err)
	}
	defer a.c.Close()
	if _, err := late.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	a.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(a.c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("the connection accepted after the limit reads %q, %v", buf, err)
	}
	if got := n.get(ReasonFDLimit); got < 3 {
		t.Errorf("fd_limit errors counted: %d, want at least one per shed client (3)", got)
	}
	if log := logs.String(); !strings.Contains(log, "shed=3") {
		t.Errorf("the log does not count the shed clients:\n%s", log)
	}
}

// Close wakes an Accept that is backing off, and Accept then reports the
// listener closed.
func TestCloseWakesABackingOffAccept(t *testing.T) {
	ln := listen(t)
	dial(t, ln)
	w := newFakeWait()
	l := New(ln, Options{After: w.after, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	fillFDs(t)
	got := acceptAsync(l)
	<-w.asked
	l.Close()
	select {
	case a := <-got:
		if !errors.Is(a.err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still backing off after Close")
	}
}

// scripted is a listener whose Accept returns the scripted errors, then
// blocks until closed: the errors a loopback socket cannot be made to
// give.
type scripted struct {
	net.Listener
	errs chan error
}

func (s *scripted) Accept() (net.Conn, error) {
	if err, ok := <-s.errs; ok {
		return nil, err
	}
	return nil, net.ErrClosed
}

func opErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// Every error but a closed or broken socket is retried, counted under its
// reason; a permanent one ends Accept and is returned.
func TestTransientErrorsAreRetriedPermanentOnesEnd(t *testing.T) {
	errs := make(chan error, 8)
	for _, e := range []syscall.Errno{syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EPERM, syscall.EINVAL} {
		errs <- opErr(e)
	}
	var n counts
	l := New(&scripted{Listener: listen(t), errs: errs}, Options{Count: n.count,
		After:  func(time.Duration) <-chan time.Time { ch := make(chan time.Time, 1); ch <- time.Time{}; return ch },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer l.Close()
	_, err := l.Accept()
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("Accept = %v, want the permanent EINVAL", err)
	}
	want := map[string]int{ReasonFDSystem: 1, ReasonMemory: 2, ReasonAborted: 1, ReasonOther: 1}
	for r, c := range want {
		if got := n.get(r); got != c {
			t.Errorf("%s counted %d, want %d", r, got, c)
		}
	}
}

func TestReason(t *testing.T) {
	for errno, want := range map[syscall.Errno]string{
		syscall.EMFILE: ReasonFDLimit, syscall.ENFILE: ReasonFDSystem, syscall.ENOBUFS: ReasonMemory,
		syscall.ENOMEM: ReasonMemory, syscall.ECONNABORTED: ReasonAborted, syscall.EPROTO: ReasonAborted,
		syscall.EPERM: ReasonOther,
	} {
		if got := Reason(opErr(errno)); got != want {
			t.Errorf("Reason(%v) = %q, want %q", errno, got, want)
		}
	}
	if got := Reason(fmt.Errorf("wrapped: %w", opErr(syscall.EMFILE))); got != ReasonFDLimit {
		t.Errorf("a wrapped EMFILE is %q", got)
	}
}
