package main

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

// procs starts and stops every process of a run. Each child leads its own
// process group (nginx's workers, HAProxy's threads and anything they fork
// share it), is killed by the kernel if the runner dies (Pdeathsig on
// Linux), and logs to a file in dir. stopAll ends whatever is still
// running; the runner defers it, so an error or Ctrl-C leaves nothing
// behind.
type procs struct {
	dir string

	mu   sync.Mutex // guards following
	live map[*child]struct{}
}

func newProcs(dir string) *procs {
	return &procs{dir: dir, live: map[*child]struct{}{}}
}

// child is a started process.
type child struct {
	name   string
	log    string
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, set before exited closes
	p      *procs
}

// startTimeout bounds the wait for a child to be ready.
const startTimeout = 20 * time.Second

// start runs argv with the extra environment, logging to dir/name.log.
func (p *procs) start(name string, env []string, argv ...string) (*child, error) {
	logPath := filepath.Join(p.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	defer f.Close() // the child holds its own descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, argv[0], err)
	}
	c := &child{name: name, log: logPath, cmd: cmd, exited: make(chan struct{}), p: p}
	p.mu.Lock()
	p.live[c] = struct{}{}
	p.mu.Unlock()
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// waitLog waits until a line of c's log matches re and returns its
// submatches.
func (c *child) waitLog(ctx context.Context, re *regexp.Regexp) ([]string, error) {
	deadline := time.Now().Add(startTimeout)
	for {
		if m := matchFile(c.log, re); m != nil {
			return m, nil
		}
		if err := c.waitStep(ctx, deadline); err != nil {
			return nil, err
		}
	}
}

// waitTCP waits until addr accepts connections.
func (c *child) waitTCP(ctx context.Context, addr string) error {
	deadline := time.Now().Add(startTimeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if err := c.waitStep(ctx, deadline); err != nil {
			return err
		}
	}
}

// waitStep sleeps a little, failing if c exited, ctx ended or the deadline
// passed.
func (c *child) waitStep(ctx context.Context, deadline time.Time) error {
	select {
	case <-c.exited:
		return fmt.Errorf("%s exited during startup (%v): %s", c.name, c.err, c.tail())
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(50 * time.Millisecond):
	}
	if time.Now().After(deadline) {
		return fmt.Errorf("%s not ready after %v: %s", c.name, startTimeout, c.tail())
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
func (c *child) tail() string {
	b, _ := os.ReadFile(c.log)
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return fmt.Sprintf("log %s: %q", c.log, s)
}

// stop sends SIGTERM to c's process group, then SIGKILL after grace. It
// returns once c exited; stopping twice is harmless.
func (c *child) stop(grace time.Duration) {
	signalGroup(c.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(grace):
		signalGroup(c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
	}
	// The leader is gone; anything left in its group (a worker that
	// ignored SIGTERM) goes too.
	signalGroup(c.cmd.Process.Pid, syscall.SIGKILL)
	c.p.mu.Lock()
	delete(c.p.live, c)
	c.p.mu.Unlock()
}

// stopAll stops every child still running.
func (p *procs) stopAll() {
	p.mu.Lock()
	all := make([]*child, 0, len(p.live))
	for c := range p.live {
		all = append(all, c)
	}
	p.mu.Unlock()
	for _, c := range all {
		c.stop(3 * time.Second)
	}
}

// signalGroup signals the process group led by pid; a group already gone
// is not an error.
func signalGroup(pid int, sig syscall.Signal) {
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		fmt.Fprintf(os.Stderr, "peers: signal group %d: %v\n", pid, err)
	}
}

// freePort returns a loopback address with a port nobody listens on now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
