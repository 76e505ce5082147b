package live

import "syscall"

// childAttr puts a child in its own process group and has the kernel kill
// it if the lab dies first.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
