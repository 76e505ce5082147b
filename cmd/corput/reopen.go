package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/corput/corput/internal/gateway"
)

// reopenOnSIGUSR1 reopens g's access log on every SIGUSR1, for log
// rotation (rename the file, then signal): the lines written before the
// signal stay in the renamed file and the next go to a new one. It
// returns the function that stops listening. Without an access log the
// signal does nothing (it no longer ends the process).
func reopenOnSIGUSR1(g *gateway.Gateway, log *slog.Logger) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-sig:
				switch path, err := g.ReopenAccessLog(); {
				case err != nil:
					log.Error("access log: reopen on SIGUSR1 failed; still writing to the old file", "path", path, "err", err)
				case path == "":
					log.Info("SIGUSR1: no access log file to reopen")
				default:
					log.Info("access log reopened (SIGUSR1)", "path", path)
				}
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(quit)
		<-done
	}
}
