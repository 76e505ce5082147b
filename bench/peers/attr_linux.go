package main

import "syscall"

// childAttr makes a child lead its own process group and die with the
// runner.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
