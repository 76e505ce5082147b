// Package version says which build of corput is running, from what the Go
// toolchain embedded in the binary (runtime/debug.ReadBuildInfo): the main
// module's version, the commit it was built from, the commit's time,
// whether the tree had uncommitted changes, and the Go version. It is what
// `corput --version` prints and what GET /admin/config reports as
// "version".
//
// Invariants:
//   - Get reads only the binary: no flag, file or -ldflags variable, so
//     the answer cannot disagree with what was built.
//   - A binary without build information (rare: built outside module
//     mode) still answers, with Version "unknown" and the running Go
//     version.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is one build's identity.
type Info struct {
	// Version is the main module's version: a tag (v1.4.0), or from Go
	// 1.24 on a pseudo-version naming the commit (with +dirty for a
	// modified tree) when built from a checkout, or "(devel)" when built
	// without version control information.
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"` // vcs.revision: the commit
	Time      string `json:"time,omitempty"`     // vcs.time: the commit's time (RFC 3339)
	Modified  bool   `json:"modified"`           // vcs.modified: built with uncommitted changes
	GoVersion string `json:"go_version"`         // the toolchain that built the binary
}

// Get returns the running binary's build information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	return from(bi, ok)
}

// from reads a BuildInfo (ok false: none).
func from(bi *debug.BuildInfo, ok bool) Info {
	if !ok || bi == nil {
		return Info{Version: "unknown", GoVersion: runtime.Version()}
	}
	i := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}

// String is the line `corput --version` prints:
//
//	corput v1.4.0 (commit 1a2b3c4d5e6f, 2026-01-07T12:00:00Z, modified) go1.26.8
//
// with the parenthesis left out when there is no commit.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString("corput ")
	b.WriteString(i.Version)
	if i.Revision != "" {
		b.WriteString(" (commit ")
		b.WriteString(i.Revision)
		if i.Time != "" {
			b.WriteString(", ")
			b.WriteString(i.Time)
		}
		if i.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	b.WriteString(" ")
	b.WriteString(i.GoVersion)
	return b.String()
}
