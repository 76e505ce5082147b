//go:build !unix

package live

import (
	"os"
	"syscall"
)

// childAttr: no process groups here; children are stopped one by one.
func childAttr() *syscall.SysProcAttr { return nil }

// signalGroup kills the child itself (no SIGTERM outside Unix).
func signalGroup(p *os.Process, _ bool) { p.Kill() }
