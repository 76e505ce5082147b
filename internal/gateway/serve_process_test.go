package gateway

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
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
	mu      sync.Mutex // guards logs
	logs    *strings.Builder
	stopped bool
}

// startServe runs `corput serve` on the config text (written to a file in
// a temporary directory) and waits until it logs its addresses. It is
// killed when the test ends if it still runs. It skips under -short.
func startServe(t *testing.T, text string) *serveProcess {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "corput.yaml")
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServeWith(t, serveSpec{config: cfg})
}

// serveSpec is how to start a `corput serve`.
type serveSpec struct {
	config string   // the config file
	args   []string // more flags
	// listeners are handed over by socket activation (LISTEN_FDS, named
	// listen and admin as systemd's FileDescriptorName= would): through
	// sh, which sets LISTEN_PID to its own pid and execs corput in place.
	listeners []*os.File
}

func startServeWith(t *testing.T, spec serveSpec) *serveProcess {
	t.Helper()
	bin := testbin.Corput(t)
	args := append([]string{"serve", "--config", spec.config}, spec.args...)
	cmd := exec.Command(bin, args...)
	if len(spec.listeners) > 0 {
		names := []string{"listen", "admin"}[:len(spec.listeners)]
		script := fmt.Sprintf(`LISTEN_PID=$$ LISTEN_FDS=%d LISTEN_FDNAMES=%s exec "$0" "$@"`, len(spec.listeners), strings.Join(names, ":"))
		cmd = exec.Command("/bin/sh", append([]string{"-c", script, bin}, args...)...)
		cmd.ExtraFiles = spec.listeners
	}
	p := &serveProcess{cmd: cmd, exited: make(chan error, 1), logs: &strings.Builder{}}
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
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
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

// log is what the process has logged so far.
func (p *serveProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// stop kills the process if it runs and returns its log.
func (p *serveProcess) stop() string {
	if !p.stopped {
		p.cmd.Process.Kill()
		<-p.exited
		p.stopped = true
	}
	return p.log()
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
