//go:build unix

package controlplane

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockState takes the writer's lock: an exclusive flock on STATE.lock
// beside the state file, held until release. A second writer on the same
// file (same host, or a file system whose locks reach every host) is
// refused instead of racing the first.
func lockState(path string) (release func(), err error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state lock %s: another writer holds it; run one writer per state file (followers use --follow)", f.Name())
		}
		return nil, fmt.Errorf("state lock %s: %w", f.Name(), err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
