package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestServeExitCodes: `corput serve`'s flags reach internal/serve, and its
// refusals are exit 2 with the reason after "corput serve:" (the serving
// itself is internal/serve's tests).
func TestServeExitCodes(t *testing.T) {
	t.Setenv("GOMAXPROCS", strconv.Itoa(runtime.GOMAXPROCS(0))) // no scaling of this test process
	dir := t.TempDir()
	write := func(name, text string) string {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	placed := write("placed.yaml", "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nfleet: {server: 127.0.0.1:1}\nroutes: [{path_prefix: /, origin: a}]\norigins: [{name: a, endpoints: [{address: 127.0.0.1:1}]}]\n")
	bad := write("bad.yaml", "routes: [{origin: a}]\norigins: [{name: a, endpoints: [{address: 127.0.0.1:1}], pool: {max_pending: -1}}]\n")
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string // in stderr, in order
	}{
		{"help", []string{"-h"}, 0, []string{"Usage of corput serve:", "-watch-debounce"}},
		{"bad flag", []string{"--confg", placed}, 2, []string{"flag provided but not defined: -confg"}},
		{"no config", nil, 2, []string{"corput serve: --config FILE is required"}},
		{"bad log level", []string{"--config", placed, "--log-level", "loud"}, 2, []string{`corput serve: --log-level "loud": use debug, info, warn or error`}},
		{"invalid config", []string{"--config", bad}, 2, []string{"ERR_UNBOUNDED_QUEUE_REJECTED", "invalid: 1 error(s)", "corput serve: refusing an invalid config (see corput check)"}},
		{"a flag against fleet.server", []string{"--config", placed, "--fleet-size", "2"}, 2, []string{"corput serve: --fleet-size: the control plane at fleet.server assigns"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCheckCLI(append([]string{"serve"}, c.args...)...)
			at := 0
			for _, w := range c.want {
				i := strings.Index(stderr[at:], w)
				if i < 0 {
					t.Fatalf("exit %d; stderr lacks %q (after byte %d):\n%s", code, w, at, stderr)
				}
				at += i + len(w)
			}
			if code != c.code {
				t.Fatalf("exit %d, want %d:\n%s", code, c.code, stderr)
			}
		})
	}
}
