package load

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/corput/corput/bench/peers/internal/proc"
)

var errMainThread = errors.New("on the main thread")

// TestPacerThreadOutlivesThePacer starts a child with Pdeathsig from the
// pacer's locked thread, as a proxy or origin may have been started from
// the thread the pacer later locks, and checks the child lives on once the
// pacer is done: a locked thread that exits would take the child with it.
func TestPacerThreadOutlivesThePacer(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command")
	}
	// The main thread never exits (Go wedges it instead), so the child
	// must be forked from another one. A first pacer that lands on the
	// main thread stays there until the test ends, so a second cannot.
	release := make(chan struct{})
	defer close(release)
	var cmd *exec.Cmd
	for range 2 {
		cmd = exec.Command(sleep, "60")
		cmd.SysProcAttr = proc.Attr()
		started := make(chan error)
		go func() {
			unlock := lockPacer()
			defer unlock()
			if syscall.Gettid() == syscall.Getpid() {
				started <- errMainThread
				<-release
				return
			}
			started <- cmd.Start()
		}()
		err := <-started
		if err == nil {
			break
		}
		if err != errMainThread {
			t.Fatal(err)
		}
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the child died with the pacer's thread: %v", err)
	case <-time.After(500 * time.Millisecond):
		cmd.Process.Kill()
		<-exited
	}
}
