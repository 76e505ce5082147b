// Package sockio reads and writes TCP sockets without the Go runtime's
// blocking-syscall bookkeeping.
//
// net.Conn's Read and Write enter the kernel through syscall.Syscall,
// which tells the scheduler the goroutine may block: the runtime's monitor
// (sysmon) takes the processor away from a thread that stays in a syscall
// for more than 20 µs while other goroutines wait, and hands it to another
// thread. On loopback a write does the receiver's TCP work as well and
// often takes that long, so under load a proxy's writes keep waking and
// parking threads (futex, context switches) for syscalls that never block:
// the sockets are non-blocking and a full buffer returns EAGAIN.
//
// Conn does the same reads and writes through the socket's
// syscall.RawConn with raw syscalls: the goroutine keeps its processor for
// the microseconds the kernel takes, and when the kernel says EAGAIN it
// parks on the runtime's netpoller exactly as net.Conn does, so deadlines,
// Close and Shutdown work unchanged. Where the connection gives no raw
// access (TLS, a pipe, a platform without raw syscalls) Conn passes
// through to the wrapped net.Conn. Race-detector builds use syscall.Read
// and syscall.Write instead, which carry the detector's happens-before
// annotations for bytes that cross a socket.
//
// WaitRead removes the read that finds nothing before a keep-alive
// connection's next request: Read must start with a read (the runtime
// forgets readiness seen before a read begins), so a connection waiting
// for its client's next request reads once for nothing and then parks.
// WaitRead parks on the netpoller without that reset, and so without
// losing readiness: it returns at once when the socket became readable
// since the last read that emptied it, and otherwise when it does (or at
// the read deadline, or Close). Invariant: WaitRead never parks while
// unread bytes may lie in the socket with no readiness still to come: it
// waits only after a Read that took fewer bytes than it asked for (the
// kernel had no more then, and every byte since has signalled
// readiness), and not at all where the runtime's poll context cannot be
// reached (TLS, another platform or Go release).
package sockio

import (
	"io"
	"net"
	"os"
	"syscall"
)

// Conn is a net.Conn whose Read and Write use raw syscalls. One goroutine
// may read while another writes (each direction has its own scratch), as
// with net.Conn; two concurrent readers or writers are not allowed.
type Conn struct {
	net.Conn
	raw syscall.RawConn // nil: pass through

	rd, wr      op
	readFn      func(fd uintptr) bool
	writeFn     func(fd uintptr) bool
	writeReadFn func(fd uintptr) bool
	waitFn      func(fd uintptr)
	wrPending   bool    // WriteRead: the write is still to do
	pd          uintptr // the runtime's poll context (WaitRead); 0: none
	drained     bool    // the last read emptied the socket (WaitRead may park)
}

// op is one direction's scratch, so the bound closures allocate nothing.
type op struct {
	p   []byte
	n   int
	err syscall.Errno
}

// New wraps c. It returns c's own Read and Write behaviour when c gives
// no syscall.RawConn or raw syscalls are unavailable here.
func New(c net.Conn) *Conn {
	s := &Conn{Conn: c}
	if !rawSupported {
		return s
	}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			s.raw = raw
		}
	}
	s.readFn = s.readNow
	s.writeFn = s.writeNow
	s.writeReadFn = s.writeReadNow
	if s.raw != nil {
		s.pd = pollContext(c, s.raw)
		s.waitFn = s.waitNow
	}
	return s
}

// Unwrap returns the wrapped connection.
func (c *Conn) Unwrap() net.Conn { return c.Conn }

// Read reads like net.Conn's Read: it waits for data (up to the read
// deadline), returns io.EOF at the peer's close, and errors as *net.OpError.
func (c *Conn) Read(p []byte) (int, error) {
	if c.raw == nil {
		return c.Conn.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	c.rd = op{p: p}
	err := c.raw.Read(c.readFn)
	n, errno := c.rd.n, c.rd.err
	c.rd.p = nil
	return c.readResult(n, errno, err, len(p))
}

// WaitRead waits until a Read may find bytes, without reading: after a
// Read that emptied the socket it parks until the socket becomes
// readable, the read deadline passes or the connection is closed, and
// returns at once otherwise (the Read after it then does what Read
// always does). It is a hint for the Read that follows, which reports
// any error: a keep-alive connection's wait for its next request then
// costs one read instead of two. Like Read, not alongside another Read.
func (c *Conn) WaitRead() {
	if c.pd == 0 || !c.drained {
		return
	}
	c.drained = false
	c.raw.Control(c.waitFn)
}

// Write writes all of p like net.Conn's Write, waiting for buffer space
// (up to the write deadline) when the kernel has none.
func (c *Conn) Write(p []byte) (int, error) {
	if c.raw == nil {
		return c.Conn.Write(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	c.wr = op{p: p}
	err := c.raw.Write(c.writeFn)
	n, errno := c.wr.n, c.wr.err
	c.wr.p = nil
	return n, c.ioError("write", errno, err)
}

// WriteRead writes all of w, then reads into r like Read: for a request
// and its reply. Where Read starts with a read that finds nothing when the
// reply is not there yet (the runtime forgets readiness seen before a
// read begins, so it must try first), WriteRead arms the read before it
// writes: the write is done inside the read, and the reply's readiness,
// which can only come after the write, is waited for without that first
// read — one syscall saved per exchange. Only for a peer that sends
// nothing unasked before the reply (an HTTP/1.1 origin): bytes that came
// before the write are not looked for until more arrive. A write that the
// kernel cannot take at once finishes through Write (waiting up to the
// write deadline). Errors are shaped as Write's or Read's.
func (c *Conn) WriteRead(w, r []byte) (int, error) {
	if c.raw == nil || len(w) == 0 || len(r) == 0 {
		if _, err := c.Write(w); err != nil {
			return 0, err
		}
		return c.Read(r)
	}
	c.wr, c.rd, c.wrPending = op{p: w}, op{p: r}, true
	err := c.raw.Read(c.writeReadFn)
	rest, werrno, wrote := c.wr.p, c.wr.err, !c.wrPending
	n, rerrno := c.rd.n, c.rd.err
	c.wr.p, c.rd.p = nil, nil
	switch {
	case werrno != 0:
		return 0, c.ioError("write", werrno, nil)
	case !wrote || len(rest) > 0:
		// The kernel took part of it (or err ended the read first):
		// finish as Write and Read would.
		if err != nil {
			return 0, c.opError("read", err)
		}
		if _, err := c.Write(rest); err != nil {
			return 0, err
		}
		return c.Read(r)
	}
	return c.readResult(n, rerrno, err, len(r))
}

// readResult shapes a read's outcome as Read returns it, and notes whether
// the read of asked bytes emptied the socket (WaitRead).
func (c *Conn) readResult(n int, errno syscall.Errno, err error, asked int) (int, error) {
	c.drained = false
	if e := c.ioError("read", errno, err); e != nil {
		return 0, e
	}
	c.drained = n > 0 && n < asked
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// ioError shapes a failed read or write (op) as net.Conn's: err from the
// RawConn (a deadline, a closed connection) or the syscall's errno; nil
// when neither failed.
func (c *Conn) ioError(op string, errno syscall.Errno, err error) error {
	switch {
	case err != nil:
		return c.opError(op, err)
	case errno != 0:
		return c.opError(op, os.NewSyscallError(op, errno))
	}
	return nil
}

// opError shapes an error as net.Conn's methods do. RawConn's own errors
// (a deadline, a closed connection) arrive as *net.OpError already; their
// cause is kept so errors.Is(err, os.ErrDeadlineExceeded) and
// errors.Is(err, net.ErrClosed) hold as they do for net.Conn.
func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
