package serve

import (
	"runtime"
	"testing"

	"github.com/corput/corput/internal/config"
)

// scaleProcs doubles GOMAXPROCS unless the environment sets it, and the
// default loop count stays one per processor the process started with.
func TestScaleProcs(t *testing.T) {
	start := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(start)
	loops := (&config.Config{}).LoopCount()

	env := func(set bool) func(string) (string, bool) {
		return func(k string) (string, bool) { return "3", set && k == "GOMAXPROCS" }
	}
	if n, changed := scaleProcs(env(true)); changed || n != start || runtime.GOMAXPROCS(0) != start {
		t.Fatalf("with GOMAXPROCS set: scaleProcs = %d, %v; GOMAXPROCS %d; want it left at %d", n, changed, runtime.GOMAXPROCS(0), start)
	}
	n, changed := scaleProcs(env(false))
	if !changed || n != procsPerCPU*start || runtime.GOMAXPROCS(0) != procsPerCPU*start {
		t.Fatalf("without GOMAXPROCS: scaleProcs = %d, %v; GOMAXPROCS %d; want %d", n, changed, runtime.GOMAXPROCS(0), procsPerCPU*start)
	}
	if got := (&config.Config{}).LoopCount(); got != loops {
		t.Fatalf("default loops %d after raising GOMAXPROCS, want %d (one per CPU)", got, loops)
	}
}
