//go:build linux

package upstream

import (
	"syscall"
	"unsafe"
)

// readNow is the raw read done for a non-blocking Read: the socket is
// already in non-blocking mode (the Go runtime sets it), and returning true
// tells the runtime not to wait for readiness. It is a raw syscall (no
// scheduler bookkeeping; package sockio says why): it cannot block.
func (s *sockConn) readNow(fd uintptr) bool {
	if len(s.buf) == 0 {
		s.n, s.err = 0, nil
		return true
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.buf[0])), uintptr(len(s.buf)))
	s.n, s.err = int(n), nil
	if e != 0 {
		s.n, s.err = 0, e
	}
	return true
}
