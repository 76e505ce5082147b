//go:build linux && go1.26 && !go1.27

package sockio

import (
	"net"
	"syscall"
	"unsafe"
)

// waitSupported: WaitRead parks on this platform and release.
const waitSupported = true

// pollWait is the runtime's wait for a socket's readiness, the one
// internal/poll calls after it has reset the readiness (runtime_pollReset)
// and read. Called without that reset it returns at once when the
// netpoller saw the socket become readable since the last wait, and
// otherwise parks until it does, the read deadline passes or the socket
// is closed. It returns 0 when ready, non-zero otherwise.
//
//go:linkname pollWait internal/poll.runtime_pollWait
func pollWait(ctx uintptr, mode int) int

// fdHead mirrors the head of net's netFD, whose first field is
// internal/poll.FD, as Go 1.26 lays them out (the build constraint keeps
// this file to that release; another falls back to Read's own wait): a
// fdMutex of 16 bytes, the descriptor, SysFile (one pointer on Unix) and
// the pollDesc, whose one field is the runtime's context.
type fdHead struct {
	fdmu    [16]byte
	sysfd   int
	sysFile unsafe.Pointer
	pollCtx uintptr
}

// pollContext returns the runtime's poll context of c's socket, or 0 when
// c is not a *net.TCPConn or its layout does not check out: its netFD's
// descriptor must be the one raw reports.
func pollContext(c net.Conn, raw syscall.RawConn) uintptr {
	tc, ok := c.(*net.TCPConn)
	if !ok || tc == nil {
		return 0
	}
	// net.TCPConn is a struct{conn}, and net.conn a struct{fd *netFD}.
	fd := *(**fdHead)(unsafe.Pointer(tc))
	if fd == nil {
		return 0
	}
	sysfd := -1
	if raw.Control(func(s uintptr) { sysfd = int(s) }) != nil || sysfd != fd.sysfd {
		return 0
	}
	return fd.pollCtx
}

// waitNow is WaitRead's callback: it holds a reference to the descriptor
// (RawConn.Control), so a Close meanwhile wakes the wait and then waits
// for it to return before the descriptor goes.
func (c *Conn) waitNow(uintptr) { pollWait(c.pd, 'r') }
