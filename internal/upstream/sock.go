package upstream

import (
	"errors"
	"net"
	"syscall"

	"github.com/corput/corput/internal/sockio"
)

// sockConn is the TCP socket under every connection this package dials
// (under TLS too). In normal operation it is a plain pass-through. While
// nonBlocking is set, Read takes only what the kernel already holds and
// reports errWouldBlock instead of waiting: an idle HTTP/1.1 connection is
// probed by reading through it (through tls.Conn when TLS is on, so TLS
// 1.3 session tickets and key updates are consumed, a close_notify alert
// reads as EOF and application data as the protocol error it is) without
// ever blocking and without a goroutine per idle connection.
//
// nonBlocking and the scratch fields are touched only by the goroutine that
// owns the connection's read side at that moment (h1Conn's state machine
// hands that ownership over with atomics).
type sockConn struct {
	*sockio.Conn                 // the socket's reads and writes (WriteRead too)
	raw          syscall.RawConn // nil when the socket gives no raw access: probes then see "alive"

	// While deferWrites is set (a Raw exchange without a request body),
	// Write keeps the request in held, and the Read for the response sends
	// it with sockio's WriteRead: the read is armed before the write, so
	// the response is waited for without a read that finds nothing first.
	// Owned by the exchange's goroutine.
	deferWrites bool
	held        []byte

	nonBlocking bool
	got         int64  // bytes read so far (Raw.Stale: did any byte come back?)
	buf         []byte // scratch for readNow
	n           int
	err         error
	readNowFn   func(fd uintptr) bool // c.readNow bound once, so probes do not allocate
}

// errWouldBlock is what a non-blocking Read returns when the kernel has no
// data. It is a temporary net.Error, so crypto/tls does not make it sticky.
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "upstream: probe: no data ready" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

func newSockConn(c net.Conn) *sockConn {
	s := &sockConn{Conn: sockio.New(c)}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			s.raw = raw
		}
	}
	s.readNowFn = s.readNow
	return s
}

// heldMax bounds the request bytes Write holds back.
const heldMax = 4 << 10

func (s *sockConn) Write(p []byte) (int, error) {
	if !s.deferWrites {
		return s.Conn.Write(p)
	}
	if len(s.held)+len(p) <= heldMax {
		if s.held == nil {
			s.held = make([]byte, 0, heldMax)
		}
		s.held = append(s.held, p...)
		return len(p), nil
	}
	if err := s.sendHeld(); err != nil {
		return 0, err
	}
	return s.Conn.Write(p)
}

// sendHeld writes what Write held back.
func (s *sockConn) sendHeld() error {
	if len(s.held) == 0 {
		return nil
	}
	_, err := s.Conn.Write(s.held)
	s.held = s.held[:0]
	return err
}

// holdWrites starts (or, false, ends) holding writes back for the next
// Read; ending drops what is held (an exchange that failed before reading).
func (s *sockConn) holdWrites(on bool) {
	s.deferWrites = on
	s.held = s.held[:0]
}

func (s *sockConn) Read(p []byte) (int, error) {
	if !s.nonBlocking {
		var n int
		var err error
		if len(s.held) > 0 {
			n, err = s.Conn.WriteRead(s.held, p)
			s.held = s.held[:0]
		} else {
			n, err = s.Conn.Read(p)
		}
		s.got += int64(n)
		return n, err
	}
	if s.raw == nil || len(p) == 0 {
		return 0, errWouldBlock
	}
	s.buf, s.n, s.err = p, 0, nil
	if err := s.raw.Read(s.readNowFn); err != nil {
		s.buf = nil
		return 0, err
	}
	s.buf = nil
	switch {
	case s.err == syscall.EAGAIN || s.err == syscall.EINTR:
		return 0, errWouldBlock
	case s.err != nil:
		return 0, s.err
	case s.n == 0:
		return 0, errPeerClosed
	}
	s.got += int64(s.n)
	return s.n, nil
}

var errPeerClosed = errors.New("EOF: peer closed the connection")

// probeRead reads once without blocking through r (the TLS connection or
// the socket itself) and reports whether the idle connection is still fit
// for a new request: nothing to read yet means alive; EOF, an error or any
// byte of application data means it is not.
func (s *sockConn) probeRead(r interface{ Read([]byte) (int, error) }, scratch []byte) bool {
	s.nonBlocking = true
	n, err := r.Read(scratch)
	s.nonBlocking = false
	return n == 0 && err == errWouldBlock
}
