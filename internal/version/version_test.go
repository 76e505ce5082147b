package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/corput/corput", Version: "v0.0.0-20260107120000-1a2b3c4d5e6f+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "CGO_ENABLED", Value: "0"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"},
			{Key: "vcs.time", Value: "2026-01-07T12:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	got := from(bi, true)
	want := Info{Version: "v0.0.0-20260107120000-1a2b3c4d5e6f+dirty", Revision: "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
		Time: "2026-01-07T12:00:00Z", Modified: true, GoVersion: "go1.26.8"}
	if got != want {
		t.Fatalf("from = %+v, want %+v", got, want)
	}
	if s, w := got.String(), "corput v0.0.0-20260107120000-1a2b3c4d5e6f+dirty (commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b, 2026-01-07T12:00:00Z, modified) go1.26.8"; s != w {
		t.Errorf("String = %q, want %q", s, w)
	}

	// A tagged release, clean tree.
	bi.Main.Version, bi.Settings[4].Value = "v1.4.0", "false"
	if s, w := from(bi, true).String(), "corput v1.4.0 (commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b, 2026-01-07T12:00:00Z) go1.26.8"; s != w {
		t.Errorf("String = %q, want %q", s, w)
	}
	// No version control information (a build from a tarball).
	if s, w := from(&debug.BuildInfo{GoVersion: "go1.26.8"}, true).String(), "corput (devel) go1.26.8"; s != w {
		t.Errorf("String = %q, want %q", s, w)
	}
	// No build information at all.
	if got := from(nil, false); got.Version != "unknown" || got.GoVersion != runtime.Version() {
		t.Errorf("without build information: %+v", got)
	}
}

// Get reads the test binary's own build information: at least the Go
// version that built it.
func TestGet(t *testing.T) {
	if got := Get(); got.GoVersion != runtime.Version() || got.Version == "" {
		t.Fatalf("Get = %+v; want the running Go version and a version", got)
	}
}
