// Package proc starts, watches and stops the processes of a peers run (the
// origins, the proxies under test) and reads what a process group costs
// from /proc.
//
// Invariants:
//   - Every child leads its own process group, so nginx's workers,
//     HAProxy's threads and anything a proxy forks share it; Stop signals
//     the whole group, and a stopped child leaves nothing running.
//   - On Linux a child is killed by the kernel if the runner dies
//     (Pdeathsig). The kernel sends it when the thread that forked the
//     child ends, so a thread that forks children must outlive them (see
//     the load package's pacer).
//   - Procs tracks every child it started until it is stopped; StopAll
//     ends the rest, so a runner that defers it leaves nothing behind on
//     an error or Ctrl-C.
//   - Each child logs to its own file in the run's directory; errors about
//     a child quote the end of that log.
package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Procs starts and stops every process of a run.
type Procs struct {
	dir string

	mu   sync.Mutex // guards following
	live map[*Child]struct{}
}

// New returns a Procs whose children log into dir.
func New(dir string) *Procs {
	return &Procs{dir: dir, live: map[*Child]struct{}{}}
}

// Child is a started process.
type Child struct {
	name   string
	log    string
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, set before exited closes
	p      *Procs
}

// StartTimeout bounds the wait for a child to be ready.
const StartTimeout = 20 * time.Second

// Start runs argv with the extra environment, logging to dir/name.log.
func (p *Procs) Start(name string, env []string, argv ...string) (*Child, error) {
	logPath := filepath.Join(p.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	defer f.Close() // the child holds its own descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = Attr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, argv[0], err)
	}
	c := &Child{name: name, log: logPath, cmd: cmd, exited: make(chan struct{}), p: p}
	p.mu.Lock()
	p.live[c] = struct{}{}
	p.mu.Unlock()
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// Pgid is the id of c's process group (c leads it).
func (c *Child) Pgid() int { return c.cmd.Process.Pid }

// Log is the path of c's log file.
func (c *Child) Log() string { return c.log }

// WaitLog waits until a line of c's log matches re and returns its
// submatches.
func (c *Child) WaitLog(ctx context.Context, re *regexp.Regexp) ([]string, error) {
	deadline := time.Now().Add(StartTimeout)
	for {
		if m := matchFile(c.log, re); m != nil {
			return m, nil
		}
		if err := c.WaitStep(ctx, deadline); err != nil {
			return nil, err
		}
	}
}

// WaitTCP waits until addr accepts connections.
func (c *Child) WaitTCP(ctx context.Context, addr string) error {
	deadline := time.Now().Add(StartTimeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if err := c.WaitStep(ctx, deadline); err != nil {
			return err
		}
	}
}

// WaitStep sleeps a little, failing if c exited, ctx ended or the deadline
// passed: one step of a wait for c to be ready.
func (c *Child) WaitStep(ctx context.Context, deadline time.Time) error {
	select {
	case <-c.exited:
		return fmt.Errorf("%s exited during startup (%v): %s", c.name, c.err, c.tail())
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(50 * time.Millisecond):
	}
	if time.Now().After(deadline) {
		return fmt.Errorf("%s not ready after %v: %s", c.name, StartTimeout, c.tail())
	}
	return nil
}

func matchFile(path string, re *regexp.Regexp) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			return m
		}
	}
	return nil
}

// tail is the end of c's log, for error messages.
func (c *Child) tail() string {
	b, _ := os.ReadFile(c.log)
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return fmt.Sprintf("log %s: %q", c.log, s)
}

// Stop sends SIGTERM to c's process group, then SIGKILL after grace. It
// returns once c exited; stopping twice is harmless.
func (c *Child) Stop(grace time.Duration) {
	signalGroup(c.Pgid(), syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(grace):
		signalGroup(c.Pgid(), syscall.SIGKILL)
		<-c.exited
	}
	// The leader is gone; anything left in its group (a worker that
	// ignored SIGTERM) goes too.
	signalGroup(c.Pgid(), syscall.SIGKILL)
	c.p.mu.Lock()
	delete(c.p.live, c)
	c.p.mu.Unlock()
}

// StopAll stops every child still running.
func (p *Procs) StopAll() {
	p.mu.Lock()
	all := make([]*Child, 0, len(p.live))
	for c := range p.live {
		all = append(all, c)
	}
	p.mu.Unlock()
	for _, c := range all {
		c.Stop(3 * time.Second)
	}
}

// signalGroup signals the process group led by pid; a group already gone
// is not an error.
func signalGroup(pid int, sig syscall.Signal) {
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		fmt.Fprintf(os.Stderr, "peers: signal group %d: %v\n", pid, err)
	}
}

// FreePort returns a loopback address with a port nobody listens on now.
func FreePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
