//go:build linux && race

package sockio

import "syscall"

// Under the race detector, read and write go through syscall.Read and
// syscall.Write: they tell the detector that what a goroutine did before
// writing bytes to a socket happens before what a goroutine does after
// reading them, which raw syscalls would hide (every test that checks an
// origin's variable after its response came through the gateway would
// then report a race that is not there).
func read(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return n, errnoOf(err)
}

func write(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return err.(syscall.Errno)
}
