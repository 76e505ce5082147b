package drill

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corput/corput/internal/origin"
)

var fdfloodDrill = drill{
	name: "fdflood",
	summary: fmt.Sprintf("run `corput serve` under ulimit -n %d, open %d client connections, close them: it serves again (3 of 3 requests 200) and counted and logged the accept errors",
		floodLimit, floodConns),
	short: 2 * time.Second,
	run:   runFDFlood,
}

const (
	floodLimit = 512 // the gateway process's descriptor limit (soft and hard)
	floodConns = 700 // client connections opened at once
	floodAfter = 3   // requests that must be answered afterwards
)

// Flood is what the fdflood drill saw.
type Flood struct {
	Limit int `json:"fd_limit"`
	Conns int `json:"connections"`
	// Shed are the flood's connections answered 503 fd_limit at once (on
	// the gateway's spare descriptor); Held are those still open and
	// unanswered when the flood was released (accepted, or waiting in the
	// kernel's queue); Closed are those that ended without an answer.
	Shed   int `json:"shed_503"`
	Held   int `json:"held"`
	Closed int `json:"closed_unanswered"`
	// AcceptErrors is corput_accept_errors_total by reason after the
	// flood.
	AcceptErrors map[string]float64 `json:"accept_errors"`
	// After are the statuses of the requests sent once the flood's
	// connections were closed ("timeout" when unanswered within 5s).
	After       []string `json:"after"`
	Ready, Live int      `json:"-"`
	Logged      []string `json:"logged"` // the gateway's log lines about accepting
	ExitCode    int      `json:"exit_code"`
}

// runFDFlood starts the corput binary (Options.Binary, or this
// executable) as `corput serve` under a descriptor limit, in front of one
// in-process origin, and floods it. It holds the flood for o.Duration.
func runFDFlood(ctx context.Context, o Options, r *Result) error {
	bin := o.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("the corput binary: %w", err)
		}
	}
	org, err := origin.Start(origin.Options{Listen: "127.0.0.1:0", ID: "o0"})
	if err != nil {
		return err
	}
	defer org.Close()
	dir, err := os.MkdirTemp("", "corput-fdflood")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "corput.yaml")
	text := fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nloops: 2\n%sroutes: [{path_prefix: /, origin: %s}]\norigins:\n  - name: %s\n    endpoints: [{address: %q}]\n",
		fastPathKey(o), originName, originName, org.Addr())
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		return err
	}
	r.Setup = Setup{Origins: 1, Loops: 2, DurationS: o.Duration.Seconds(), Path: servingPath(o),
		Gateway: fmt.Sprintf("corput serve under ulimit -n %d", floodLimit)}
	p, err := startServe(ctx, bin, cfg, floodLimit)
	if err != nil {
		return err
	}
	defer p.kill()
	f := &Flood{Limit: floodLimit, Conns: floodConns}
	r.Flood = f
	start := time.Now()

	conns, err := flood(p.listen, floodConns)
	if err != nil {
		closeAll(conns)
		return err
	}
	r.Faults = append(r.Faults, Fault{AtS: time.Since(start).Seconds(),
		What: fmt.Sprintf("%d client connections open against a limit of %d descriptors", len(conns), floodLimit)})
	f.Shed, f.Held, f.Closed = watchFlood(conns, o.Duration)
	closeAll(conns)
	r.Faults = append(r.Faults, Fault{AtS: time.Since(start).Seconds(), What: "every flood connection closed"})

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < floodAfter; i++ {
		status := "timeout"
		if resp, err := client.Get("http://" + p.listen + "/after"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = strconv.Itoa(resp.StatusCode)
		}
		f.After = append(f.After, status)
	}
	f.AcceptErrors, _ = scrapeAcceptErrors(client, p.admin)
	f.Ready = statusOf(client, "http://"+p.admin+"/readyz")
	f.Live = statusOf(client, "http://"+p.admin+"/healthz")
	f.ExitCode = p.stop()
	f.Logged = p.lines("accept")

	ok := 0
	for _, s := range f.After {
		if s == "200" {
			ok++
		}
	}
	r.check("serves again after the flood", fmt.Sprintf("%d of %d answered 200", floodAfter, floodAfter),
		ok == floodAfter, "%d of %d (%s)", ok, floodAfter, strings.Join(f.After, " "))
	r.check("accept errors counted", "corput_accept_errors_total{reason=\"fd_limit\"} > 0",
		f.AcceptErrors["fd_limit"] > 0, "%v", f.AcceptErrors)
	r.check("the log says so", "a warning when accepting fails, a line when it recovers",
		p.logged("accept failing") && p.logged("reason=fd_limit") && p.logged("accepting again"), "%q", f.Logged)
	r.check("clients past the limit are answered at once", "some flood connections get 503 fd_limit",
		f.Shed > 0, "%d shed, %d held, %d closed unanswered", f.Shed, f.Held, f.Closed)
	r.check("ready and live afterwards", "/readyz 200, /healthz 200", f.Ready == 200 && f.Live == 200,
		"/readyz %d, /healthz %d", f.Ready, f.Live)
	r.check("drains and exits 0 on SIGTERM", "exit 0", f.ExitCode == 0, "exit %d", f.ExitCode)
	return nil
}

// servingPath names the path that serves the drill's clients.
func servingPath(o Options) string {
	if o.NetHTTP {
		return "net/http path"
	}
	return "fast path"
}

// fastPathKey is the downstream key that picks the serving path.
func fastPathKey(o Options) string {
	if o.NetHTTP {
		return "downstream: {fast_path: false}\n"
	}
	return ""
}

// flood opens n connections to addr at once.
func flood(addr string, n int) ([]net.Conn, error) {
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return conns, fmt.Errorf("flood connection %d of %d: %w", i+1, n, err)
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// watchFlood reads every connection for hold and sorts them: answered
// with the gateway's 503 fd_limit, still open without an answer, or ended
// without one.
func watchFlood(conns []net.Conn, hold time.Duration) (shed, held, closed int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(hold)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(deadline)
			b, err := io.ReadAll(io.LimitReader(c, 4096))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case strings.HasPrefix(string(b), "HTTP/1.1 503") && strings.Contains(string(b), "X-Corput-Error: fd_limit"):
				shed++
			case err != nil && os.IsTimeout(err):
				held++
			default:
				closed++
			}
		}()
	}
	wg.Wait()
	return shed, held, closed
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

func statusOf(c *http.Client, url string) int {
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

var acceptErrorLine = regexp.MustCompile(`^corput_accept_errors_total\{reason="([a-z_]+)"\} (\S+)$`)

// scrapeAcceptErrors reads corput_accept_errors_total from /metrics.
func scrapeAcceptErrors(c *http.Client, admin string) (map[string]float64, error) {
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := acceptErrorLine.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			out[m[1]] = v
		}
	}
	return out, sc.Err()
}

// serveProc is a running `corput serve`.
type serveProc struct {
	cmd           *exec.Cmd
	listen, admin string
	exited        chan struct{}

	mu   sync.Mutex // guards following
	logs []string
	err  error // Wait's
}

var servingLine = regexp.MustCompile(`corput serving.* listen=(\S+) admin=(\S+)`)

// startServe runs bin serve --config cfg under a descriptor limit (soft
// and hard, so the Go runtime cannot raise it) and waits until it logs
// its addresses and /readyz answers 200.
func startServe(ctx context.Context, bin, cfg string, limit int) (*serveProc, error) {
	cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, limit), bin, "serve", "--config", cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", bin, err)
	}
	p := &serveProc{cmd: cmd, exited: make(chan struct{})}
	addrs := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.logs = append(p.logs, sc.Text())
			p.mu.Unlock()
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrs <- [2]string{m[1], m[2]}:
				default:
				}
			}
		}
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.exited)
	}()
	select {
	case a := <-addrs:
		p.listen, p.admin = a[0], a[1]
	case <-p.exited:
		return nil, fmt.Errorf("%s serve exited before serving:\n%s", bin, strings.Join(p.lines(""), "\n"))
	case <-ctx.Done():
		p.kill()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		p.kill()
		return nil, fmt.Errorf("%s serve did not log its addresses within 30s", bin)
	}
	c := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(10 * time.Second); statusOf(c, "http://"+p.admin+"/readyz") != 200; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("corput serve not ready within 10s")
		}
	}
	return p, nil
}

// lines returns the log lines that contain sub.
func (p *serveProc) lines(sub string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.logs {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

func (p *serveProc) logged(sub string) bool { return len(p.lines(sub)) > 0 }

// stop sends SIGTERM and returns the exit code (-1 if it had to be
// killed after 20s).
func (p *serveProc) stop() int {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		p.kill()
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// kill ends the process if it still runs and waits for it.
func (p *serveProc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Kill()
	<-p.exited
}
