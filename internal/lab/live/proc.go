package live

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// processes runs every part as a child process of the corput binary:
// `corput origin` and `corput serve` with a generated config. Each child
// leads its own process group, so stopping it (or the run failing or being
// cancelled) signals everything it started; on Linux a child is also
// killed if the lab itself dies. A child's stdout and stderr go to a log
// file in dir, which is also where its listening address is read from.
type processes struct {
	bin string // the corput executable
	dir string // configs and logs
}

// startupTimeout bounds the wait for a child's "listening" line.
const startupTimeout = 20 * time.Second

var (
	// originListening is `corput origin`'s first line on stdout.
	originListening = regexp.MustCompile(`listening on https?://(\S+)`)
	// gatewayServing is `corput serve`'s slog line once both listeners
	// are open.
	gatewayServing = regexp.MustCompile(`msg="corput serving" listen=(\S+) admin=(\S+)`)
)

func (p *processes) origin(ctx context.Context, i int, seed uint64) (*part, error) {
	id := originID(i)
	args := []string{"origin", "--listen", "127.0.0.1:0", "--proto", "h2c", "--profile", "default",
		"--id", id, "--seed", strconv.FormatUint(seed, 10)}
	c, m, err := p.spawn(ctx, "origin-"+id, args, originListening)
	if err != nil {
		return nil, err
	}
	return &part{name: "origin " + id, addr: m[1], stop: c.stop}, nil
}

func (p *processes) gateway(ctx context.Context, name string, cfg []byte) (*part, error) {
	path := filepath.Join(p.dir, name+".yaml")
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		return nil, fmt.Errorf("gateway %s: write config: %w", name, err)
	}
	return p.gatewayOn(ctx, name, path, nil)
}

// gatewayOn hands ln over as systemd does (LISTEN_FDS=1, named listen)
// through sh, which sets LISTEN_PID to its own pid and execs corput in
// place; with ln nil the gateway binds its listen address itself.
func (p *processes) gatewayOn(ctx context.Context, name, path string, ln *os.File) (*part, error) {
	args := []string{"serve", "--config", path}
	cmd := exec.Command(p.bin, args...)
	if ln != nil {
		const script = `LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=listen exec "$0" "$@"`
		cmd = exec.Command("/bin/sh", append([]string{"-c", script, p.bin}, args...)...)
		cmd.ExtraFiles = []*os.File{ln}
	}
	c, m, err := p.start(ctx, name, cmd, gatewayServing)
	if err != nil {
		return nil, err
	}
	hup := func() error { return c.cmd.Process.Signal(syscall.SIGHUP) }
	return &part{name: "gateway " + name, addr: m[1], admin: m[2], stop: c.stop, reload: hup}, nil
}

// child is a started process.
type child struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, set before exited closes
}

// spawn starts bin with args, logging to dir/name.log, and waits until a
// line of the log matches ready; it returns the submatches. A child that
// exits or stays silent is killed and reported with its log's tail.
func (p *processes) spawn(ctx context.Context, name string, args []string, ready *regexp.Regexp) (*child, []string, error) {
	return p.start(ctx, name, exec.Command(p.bin, args...), ready)
}

// start is spawn for a command already built.
func (p *processes) start(ctx context.Context, name string, cmd *exec.Cmd, ready *regexp.Regexp) (*child, []string, error) {
	logPath := filepath.Join(p.dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	defer logf.Close() // the child holds its own descriptor
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("%s: start %s: %w (set the corput binary with Options.Binary)", name, p.bin, err)
	}
	c := &child{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	deadline := time.NewTimer(startupTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		text, _ := os.ReadFile(logPath)
		if m := ready.FindSubmatch(text); m != nil {
			out := make([]string, len(m))
			for i := range m {
				out[i] = string(m[i])
			}
			return c, out, nil
		}
		var why error
		select {
		case <-tick.C:
			continue
		case <-c.exited:
			why = fmt.Errorf("exited early (%v)", c.err)
		case <-deadline.C:
			why = fmt.Errorf("no address in its log after %v", startupTimeout)
		case <-ctx.Done():
			why = ctx.Err()
		}
		c.stop()
		text, _ = os.ReadFile(logPath)
		return nil, nil, fmt.Errorf("%s: %w; log %s ends:\n%s", name, why, logPath, tail(text, 10))
	}
}

// stop sends SIGTERM to the child's process group, waits stopGrace for it
// to drain and exit, then kills the group. A child that exits 0 on SIGTERM
// (corput's documented behaviour) reports no error.
func (c *child) stop() error {
	select {
	case <-c.exited:
		return c.exitErr()
	default:
	}
	signalGroup(c.cmd.Process, false)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-c.exited:
		return c.exitErr()
	case <-t.C:
	}
	signalGroup(c.cmd.Process, true)
	<-c.exited
	return fmt.Errorf("%s: killed after not exiting within %v of SIGTERM", c.name, stopGrace)
}

func (c *child) exitErr() error {
	var ee *exec.ExitError
	if errors.As(c.err, &ee) && !ee.Exited() {
		return nil // ended by our signal before its handler ran
	}
	if c.err != nil {
		return fmt.Errorf("%s: %w", c.name, c.err)
	}
	return nil
}

// tail is the last n lines of text.
func tail(text []byte, n int) string {
	text = bytes.TrimRight(text, "\n")
	for i := len(text) - 1; i >= 0; i-- {
		if text[i] == '\n' {
			n--
			if n == 0 {
				return string(text[i+1:])
			}
		}
	}
	return string(text)
}
