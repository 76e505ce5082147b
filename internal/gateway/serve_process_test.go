package gateway

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/testbin"
)

// serveProcess is a `corput serve` child process: the built binary on a
// config file, its addresses read from its log.
type serveProcess struct {
	cmd           *exec.Cmd
	listen, admin string
	// exited reports the exit once; the reader owns logs until then.
	exited  chan error
	logs    *strings.Builder
	stopped bool
}

// startServe runs `corput serve` on the config text (written to a file in
// a temporary directory) and waits until it logs its addresses. It is
// killed when the test ends if it still runs. It skips under -short.
func startServe(t *testing.T, text string) *serveProcess {
	t.Helper()
	bin := testbin.Corput(t)
	cfg := filepath.Join(t.TempDir(), "corput.yaml")
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: exec.Command(bin, "serve", "--config", cfg), exited: make(chan error, 1), logs: &strings.Builder{}}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		serving := regexp.MustCompile(`corput serving.* listen=(\S+) admin=(\S+)`)
		for sc.Scan() {
			p.logs.WriteString(sc.Text() + "\n")
			if m := serving.FindStringSubmatch(sc.Text()); m != nil {
				addrs <- [2]string{m[1], m[2]}
			}
		}
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() { p.stop() })
	select {
	case a := <-addrs:
		p.listen, p.admin = a[0], a[1]
	case <-time.After(30 * time.Second):
		t.Fatalf("corput serve did not log its addresses within 30s\n%s", p.stop())
	}
	return p
}

// stop kills the process if it runs and returns its log.
func (p *serveProcess) stop() string {
	if !p.stopped {
		p.cmd.Process.Kill()
		<-p.exited
		p.stopped = true
	}
	return p.logs.String()
}

// wait waits up to d for the process to exit by itself and returns
// whether it did and how; one still running is killed.
func (p *serveProcess) wait(d time.Duration) (exited bool, err error) {
	select {
	case err := <-p.exited:
		p.stopped = true
		return true, err
	case <-time.After(d):
		p.stop()
		return false, nil
	}
}
