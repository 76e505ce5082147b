//go:build !linux || !go1.26 || go1.27

package sockio

import (
	"net"
	"syscall"
)

// waitSupported: WaitRead returns at once here.
const waitSupported = false

// pollContext is 0 where the runtime's poll context cannot be reached
// safely: WaitRead then returns at once and Read waits as net.Conn does.
func pollContext(net.Conn, syscall.RawConn) uintptr { return 0 }

func (c *Conn) waitNow(uintptr) {}
