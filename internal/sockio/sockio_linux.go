package sockio

import (
	"syscall"
	"unsafe"
)

const rawSupported = true

// readNow reads once; false (EAGAIN) asks the runtime to wait for
// readiness and call again.
func (c *Conn) readNow(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rd.p[0])), uintptr(len(c.rd.p)))
		switch e {
		case 0:
			c.rd.n = int(n)
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
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&c.wr.p[0])), uintptr(len(c.wr.p)))
		switch e {
		case 0:
			c.wr.n += int(n)
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
