//go:build !linux

package sockio

const rawSupported = false

func (c *Conn) readNow(uintptr) bool      { return true }
func (c *Conn) writeNow(uintptr) bool     { return true }
func (c *Conn) writeReadNow(uintptr) bool { return true }
