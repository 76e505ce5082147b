//go:build unix && !linux

package upstream

import "syscall"

// readNow is the raw read done for a non-blocking Read: the socket is
// already in non-blocking mode (the Go runtime sets it), and returning true
// tells the runtime not to wait for readiness.
func (s *sockConn) readNow(fd uintptr) bool {
	s.n, s.err = syscall.Read(int(fd), s.buf)
	if s.n < 0 {
		s.n = 0
	}
	return true
}
