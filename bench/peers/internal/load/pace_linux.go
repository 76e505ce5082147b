package load

import (
	"runtime"
	"syscall"
	"time"
)

// prSetTimerSlack is prctl's PR_SET_TIMERSLACK.
const prSetTimerSlack = 29

// lockPacer pins the calling goroutine to its OS thread and gives the
// thread a timer slack of 1 ns, so sleepUntil wakes within microseconds of
// its mark; the function it returns restores both. Go's own timers wait in
// whole milliseconds when the process is otherwise idle: time.Sleep of a
// 60 µs Poisson gap woke 0.55 ms late at the median and 2.2 ms late at p99
// here, which sends requests in bursts.
//
// The thread must outlive the pacer (no exit while locked): the children
// this process started carry Pdeathsig, which the kernel sends when the
// thread that forked them ends, not the process.
func lockPacer() (unlock func()) {
	runtime.LockOSThread()
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
	return func() {
		syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 0, 0) // 0: the default again
		runtime.UnlockOSThread()
	}
}

// sleepUntil sleeps in nanosleep until time.Since(start) >= at.
func sleepUntil(start time.Time, at time.Duration) {
	for {
		w := at - time.Since(start)
		if w <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(w))
		syscall.Nanosleep(&ts, nil) // EINTR: the loop sleeps the rest
	}
}
