//go:build unix && !linux

package main

import "syscall"

// childAttr makes a child lead its own process group.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
