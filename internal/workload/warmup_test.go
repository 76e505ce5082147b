package workload

import (
	"math"
	"os"
	"testing"
	"time"
)

func TestWarmupCurve(t *testing.T) {
	w := Warmup{Factor: 10, Window: 40 * time.Second}
	for _, c := range []struct {
		at   time.Duration
		want float64
	}{
		{-time.Second, 10}, {0, 10}, {20 * time.Second, 3.25}, {30 * time.Second, 1.5625},
		{40 * time.Second, 1}, {time.Hour, 1},
	} {
		if got := w.At(c.at); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("At(%v) = %v, want %v", c.at, got, c.want)
		}
	}
	prev := w.At(0)
	for at := time.Second; at <= w.Window; at += time.Second {
		if f := w.At(at); f > prev {
			t.Fatalf("curve rises at %v: %v > %v", at, f, prev)
		} else {
			prev = f
		}
	}
	if (Warmup{}).At(0) != 1 || (Warmup{Factor: 8}).At(0) != 1 {
		t.Fatal("a disabled warm-up slows requests down")
	}
}

func TestParseWarmupRoundTrip(t *testing.T) {
	for _, s := range []string{"8x:40s", "10x:45s", "2.5x:1m30s"} {
		w, err := ParseWarmup(s)
		if err != nil {
			t.Fatalf("ParseWarmup(%q): %v", s, err)
		}
		if w.String() != s {
			t.Errorf("ParseWarmup(%q).String() = %q", s, w.String())
		}
	}
	if w, err := ParseWarmup("none"); err != nil || w.Enabled() || w.String() != "none" {
		t.Fatalf("none: %v %v", w, err)
	}
	for _, bad := range []string{"8x", "x:40s", "0.5x:40s", "8x:soon", "8x:-1s"} {
		if _, err := ParseWarmup(bad); err == nil {
			t.Errorf("ParseWarmup(%q) accepted", bad)
		}
	}
}

func TestLoadNamedAndFile(t *testing.T) {
	m, err := Load("default")
	if err != nil || m.Validate() != nil {
		t.Fatalf("default: %v", err)
	}
	if u, err := Load("uniform"); err != nil || u.Validate() == nil {
		t.Fatalf("uniform must load and then fail Validate: %v", err)
	}
	dir := t.TempDir()
	good := dir + "/mix.yaml"
	writeFile(t, good, "classes:\n  - {name: read, percent: 90, latency: 5ms}\n  - {name: write, percent: 10, latency: 80ms}\n")
	m, err = Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(); err != nil || m.Classes[1].Latency != 80*time.Millisecond {
		t.Fatalf("file mix %+v: %v", m, err)
	}
	bad := dir + "/bad.yaml"
	writeFile(t, bad, "classes:\n  - {name: read, percent: 100, latncy: 5ms}\n")
	if _, err := Load(bad); err == nil {
		t.Fatal("unknown key accepted")
	}
	if _, err := Load(dir + "/missing.yaml"); err == nil {
		t.Fatal("missing file accepted")
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
