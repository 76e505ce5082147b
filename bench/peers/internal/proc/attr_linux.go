package proc

import "syscall"

// Attr makes a child lead its own process group and die with the runner.
func Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
