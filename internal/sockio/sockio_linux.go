package sockio

import "syscall"

const rawSupported = true

// readNow reads once; false (EAGAIN) asks the runtime to wait for
// readiness and call again.
func (c *Conn) readNow(fd uintptr) bool {
	for {
		n, e := read(fd, c.rd.p)
		switch e {
		case 0:
			c.rd.n = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.rd.err = e
		return true
	}
}

// writeNow writes until c.wr.p is all written or the kernel has no
// room (false: wait for writability and call again).
func (c *Conn) writeNow(fd uintptr) bool { return c.writeSome(fd) != syscall.EAGAIN }

// writeSome writes c.wr.p until it is all written (0), the kernel has no
// room (EAGAIN) or the write fails (the errno, kept in c.wr.err).
func (c *Conn) writeSome(fd uintptr) syscall.Errno {
	for len(c.wr.p) > 0 {
		n, e := write(fd, c.wr.p)
		switch e {
		case 0:
			c.wr.n += n
			c.wr.p = c.wr.p[n:]
		case syscall.EINTR:
		case syscall.EAGAIN:
			return e
		default:
			c.wr.err = e
			return e
		}
	}
	return 0
}

// writeReadNow is WriteRead's callback: its first call writes (the read
// is armed by then) and asks to wait for readiness without reading; later
// calls read. A write the kernel does not take whole, or that fails, ends
// the read at once and WriteRead finishes it.
func (c *Conn) writeReadNow(fd uintptr) bool {
	if !c.wrPending {
		return c.readNow(fd)
	}
	c.wrPending = false
	return c.writeSome(fd) != 0
}
