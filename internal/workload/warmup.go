package workload

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Warmup is a cold start (the seed's MC-BN-01 JIT warm-up bottleneck): an
// origin that has just started serves every request Factor times slower, and
// the slowdown decays to 1× over Window.
//
// The curve is quadratic, f(t) = 1 + (Factor−1)·(1 − t/Window)² for t <
// Window and 1 after: a JIT compiles the hottest paths first, so most of the
// slowness goes early and the last stretch is a long, shallow tail. At half
// the window a 10× origin is at 3.25×, at three quarters 1.56×. The test
// origin and the lab's simulator both call At, so live and simulated cold
// starts follow the same curve.
//
// The zero Warmup (or a Factor ≤ 1, or a zero Window) is a warm origin.
type Warmup struct {
	Factor float64       `json:"factor" yaml:"factor"` // slowdown at t = 0, ≥ 1
	Window time.Duration `json:"window" yaml:"window"` // time to reach 1×
}

// Cold is the cold-start profile of the peer benchmarks (docs/references.md): 10×
// slow at start, warm after 40 s, inside the seed's 30–45 s JIT window.
func Cold() Warmup { return Warmup{Factor: 10, Window: 40 * time.Second} }

// Enabled reports whether w slows anything down.
func (w Warmup) Enabled() bool { return w.Factor > 1 && w.Window > 0 }

// At returns the slowdown factor elapsed after the origin started: Factor
// at 0, 1 from Window on. A negative elapsed counts as 0.
func (w Warmup) At(elapsed time.Duration) float64 {
	if !w.Enabled() || elapsed >= w.Window {
		return 1
	}
	if elapsed < 0 {
		elapsed = 0
	}
	left := 1 - float64(elapsed)/float64(w.Window)
	return 1 + (w.Factor-1)*left*left
}

// String formats w the way ParseWarmup reads it: "10x:40s", or "none".
func (w Warmup) String() string {
	if !w.Enabled() {
		return "none"
	}
	return strconv.FormatFloat(w.Factor, 'g', -1, 64) + "x:" + w.Window.String()
}

// ParseWarmup reads "FACTORx:WINDOW" (e.g. "8x:40s"); "none", "off" and ""
// mean no warm-up.
func ParseWarmup(s string) (Warmup, error) {
	switch strings.TrimSpace(s) {
	case "", "none", "off":
		return Warmup{}, nil
	}
	fs, ws, ok := strings.Cut(s, ":")
	fs = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(fs), "x"), "X")
	f, ferr := strconv.ParseFloat(fs, 64)
	d, derr := time.ParseDuration(strings.TrimSpace(ws))
	if !ok || ferr != nil || derr != nil || f < 1 || d < 0 {
		return Warmup{}, fmt.Errorf("warm-up %q: want FACTORx:WINDOW with FACTOR ≥ 1 and a Go duration, e.g. 8x:40s, or none", s)
	}
	return Warmup{Factor: f, Window: d}, nil
}
