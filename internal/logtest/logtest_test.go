package logtest

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func TestNewKeepsEveryRecordAtItsLevel(t *testing.T) {
	logger, logs := New(slog.LevelInfo)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			logger.Info("served", "worker", i)
			_ = logs.String() // read while others write (run with -race)
		})
	}
	wg.Wait()
	logger.Debug("below the level")
	got := logs.String()
	if n := strings.Count(got, "msg=served"); n != 8 {
		t.Errorf("%d records kept, want 8:\n%s", n, got)
	}
	if strings.Contains(got, "below the level") {
		t.Errorf("a debug record was kept at level info:\n%s", got)
	}
}
