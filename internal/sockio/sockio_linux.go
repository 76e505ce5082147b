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
func (c *Conn) writeNow(fd uintptr) bool {
	for len(c.wr.p) > 0 {
		n, e := write(fd, c.wr.p)
		switch e {
		case 0:
			c.wr.n += n
			c.wr.p = c.wr.p[n:]
			continue
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.wr.err = e
		return true
	}
	return true
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
	for len(c.wr.p) > 0 {
		n, e := write(fd, c.wr.p)
		switch e {
		case 0:
			c.wr.n += n
			c.wr.p = c.wr.p[n:]
			continue
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return true
		}
		c.wr.err = e
		return true
	}
	return false
}
