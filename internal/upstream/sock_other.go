//go:build !unix

package upstream

import "syscall"

// readNow reports "no data" where raw non-blocking reads are not wired
// up: idle HTTP/1.1 connections are then not probed and a peer that closed
// one is found by the request that uses it.
func (s *sockConn) readNow(fd uintptr) bool {
	s.n, s.err = 0, syscall.EAGAIN
	return true
}
