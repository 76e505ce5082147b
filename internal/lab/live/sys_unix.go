//go:build unix

package live

import (
	"os"
	"syscall"
)

// signalGroup sends SIGTERM (or SIGKILL) to the process group p leads.
func signalGroup(p *os.Process, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-p.Pid, sig)
}
