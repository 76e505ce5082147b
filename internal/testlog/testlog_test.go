package testlog

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentLinesStayWhole: lines logged from many goroutines while
// the test reads are each whole in the end.
func TestConcurrentLinesStayWhole(t *testing.T) {
	log, buf := New(slog.LevelInfo)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				log.Info("line", "from", i)
				_ = buf.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	for _, l := range lines {
		if !strings.Contains(l, "level=INFO msg=line from=") {
			t.Fatalf("a torn line: %q", l)
		}
	}
	warn, quiet := New(slog.LevelWarn)
	warn.Info("below the level")
	if quiet.String() != "" {
		t.Fatalf("a line below the logger's level was written: %q", quiet.String())
	}
}
