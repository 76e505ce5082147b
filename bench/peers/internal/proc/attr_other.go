//go:build unix && !linux

package proc

import "syscall"

// Attr makes a child lead its own process group.
func Attr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
