package main

import (
	"strings"
	"testing"
)

// The reload scenario runs real processes: asked for with --sim it is a
// usage error, before anything starts.
func TestLabReloadScenarioIsLive(t *testing.T) {
	code, _, stderr := runCheckCLI("lab", "--sim", "--scenario", "reload", "--out", t.TempDir())
	if code != 2 || !strings.Contains(stderr, "--live") {
		t.Errorf("corput lab --sim --scenario reload: exit %d, stderr %q; want 2 and a hint to use --live", code, stderr)
	}
	code, _, stderr = runCheckCLI("lab", "--scenario", "nosuch", "--out", t.TempDir())
	if code != 2 {
		t.Errorf("corput lab --scenario nosuch: exit %d (%s), want 2", code, stderr)
	}
}
