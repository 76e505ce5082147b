// Package testbin builds, in tests, the corput binary that process tests
// run as a real child: `corput serve` under signals and descriptor limits,
// the live lab's gateways and origins.
//
// Corput builds once per test binary and hands every caller its own
// path to it (a hard link in the test's temporary directory), so a test
// can tell its own children, by /proc/PID/exe, from those of a test
// running beside it. Under -short the caller is skipped.
package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	once sync.Once
	bin  string
	out  []byte
	err  error
)

// Corput returns the path of cmd/corput built for this test binary. It
// skips t under -short or where no go command is found, and fails t if
// the build fails.
func Corput(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the corput binary")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, statErr := os.Stat(goBin); statErr != nil {
		var lookErr error
		if goBin, lookErr = exec.LookPath("go"); lookErr != nil {
			t.Skip("no go command to build cmd/corput")
		}
	}
	once.Do(func() {
		var dir string
		if dir, err = os.MkdirTemp("", "corput-testbin"); err != nil {
			return
		}
		bin = filepath.Join(dir, "corput")
		out, err = exec.Command(goBin, "build", "-o", bin, "github.com/corput/corput/cmd/corput").CombinedOutput()
	})
	if err != nil {
		t.Fatalf("go build cmd/corput: %v\n%s", err, out)
	}
	own := filepath.Join(t.TempDir(), "corput")
	if err := os.Link(bin, own); err != nil {
		b, err := os.ReadFile(bin)
		if err == nil {
			err = os.WriteFile(own, b, 0o755)
		}
		if err != nil {
			t.Fatalf("a copy of the corput binary: %v", err)
		}
	}
	return own
}

// Runner is what a TestMain runs: *testing.M.
type Runner interface{ Run() int }

// M wraps a TestMain's m so that the built binary is removed once the
// tests have run: TestMain(m) { goleak.VerifyTestMain(testbin.M(m)) }.
func M(m Runner) Runner { return removing{m} }

type removing struct{ m Runner }

func (r removing) Run() int {
	code := r.m.Run()
	if bin != "" {
		os.RemoveAll(filepath.Dir(bin))
	}
	return code
}
