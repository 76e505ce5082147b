package main

import (
	"strings"
	"testing"

	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/version"
)

// `corput --version` (or -version) prints the build on stdout and exits 0.
func TestVersionFlag(t *testing.T) {
	for _, flag := range []string{"--version", "-version"} {
		var out, errw testlog.Buffer
		if code := run([]string{flag}, &out, &errw); code != 0 {
			t.Fatalf("%s: exit %d: %s", flag, code, errw.String())
		}
		if got, want := out.String(), version.Get().String()+"\n"; got != want {
			t.Errorf("%s printed %q, want %q", flag, got, want)
		}
		if !strings.HasPrefix(out.String(), "corput ") || errw.String() != "" {
			t.Errorf("%s: stdout %q, stderr %q", flag, out.String(), errw.String())
		}
	}
}
