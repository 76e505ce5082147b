package serve

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/corput/corput/internal/gateway"
)

// onSignal runs fn on every sig, one at a time, until the returned stop
// is called (which waits for a run in progress).
func onSignal(sig os.Signal, fn func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sig)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ch:
				fn()
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(quit)
		<-done
	}
}

// reopenOnSIGUSR1 reopens g's access log on every SIGUSR1, for log
// rotation (rename the file, then signal): the lines written before the
// signal stay in the renamed file and the next go to a new one. Without an
// access log the signal does nothing (it no longer ends the process).
func reopenOnSIGUSR1(g *gateway.Gateway, log *slog.Logger) (stop func()) {
	return onSignal(syscall.SIGUSR1, func() {
		switch path, err := g.ReopenAccessLog(); {
		case err != nil:
			log.Error("access log: reopen on SIGUSR1 failed; still writing to the old file", "path", path, "err", err)
		case path == "":
			log.Info("SIGUSR1: no access log file to reopen")
		default:
			log.Info("access log reopened (SIGUSR1)", "path", path)
		}
	})
}

// reloadOnSIGHUP reloads the configuration on every SIGHUP (systemd's
// ExecReload, `kill -HUP`): applied in place, or refused whole with the
// running configuration kept — the process never exits on it.
func reloadOnSIGHUP(g *gateway.Gateway, log *slog.Logger, after func()) (stop func()) {
	return onSignal(syscall.SIGHUP, func() {
		log.Info("SIGHUP: reloading the configuration")
		if err := g.ReloadFromSource(); err == nil && after != nil {
			after()
		}
	})
}
