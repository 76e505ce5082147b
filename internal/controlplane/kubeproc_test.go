package controlplane

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corput/corput/internal/cluster"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/waitfor"
)

// The process tests below run every part as a real process, with a real
// API server (kubetest): `corput control-plane` replicas, `corput serve`
// gateways and `corput origin`s standing in for pods. The test writes the
// EndpointSlices as the endpoints controller would.

// proc is a child process of the corput binary; its output is kept.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}

	mu    sync.Mutex
	lines []string
}

// startProc runs bin args with env added, and waits for a line matching
// ready, whose submatches it returns. The process is killed when the test
// ends.
func startProc(t *testing.T, name string, env []string, ready *regexp.Regexp, bin string, args ...string) (*proc, []string) {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r, w := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m:
				default:
				}
			}
		}
	}()
	go func() {
		_ = p.cmd.Wait()
		w.Close()
		close(p.exited)
	}()
	t.Cleanup(p.kill)
	select {
	case m := <-found:
		return p, m
	case <-p.exited:
		t.Fatalf("%s exited before it was ready:\n%s", name, p.tail(30))
	case <-time.After(60 * time.Second):
		t.Fatalf("%s not ready after 60s:\n%s", name, p.tail(30))
	}
	return nil, nil
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// kill kills the process if it runs and waits for it.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.exited
}

// stop sends SIGTERM and waits for the exit.
func (p *proc) stop() {
	p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

func (p *proc) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines[max(0, len(p.lines)-n):], "\n")
}

// matching returns the submatches of every line matching re, in order.
func (p *proc) matching(re *regexp.Regexp) [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out [][]string
	for _, l := range p.lines {
		if m := re.FindStringSubmatch(l); m != nil {
			out = append(out, m)
		}
	}
	return out
}

var (
	originListening = regexp.MustCompile(`listening on http://(\S+)`)
	gatewayServing  = regexp.MustCompile(`msg="corput serving" listen=(\S+) admin=(\S+)`)
	cpServing       = regexp.MustCompile(`msg="control plane: serving" listen=(\S+) admin=(\S+) fleet_listen=(\S+)`)
	// membershipApplied is the gateway's line once its pickers hold a membership.
	membershipApplied = regexp.MustCompile(`time=(\S+) level=INFO msg="membership applied" origin=(\S+) endpoints=(\d+) urgent=(\w+)`)
)

// logTime parses a slog time (RFC 3339, milliseconds).
func logTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// pod is a `corput origin` standing in for a pod: on the host's own
// address (an EndpointSlice refuses loopback ones), at a port of its own,
// so each pod's endpoint is in an EndpointSlice of its own, as the
// endpoints controller groups endpoints whose ports differ.
type pod struct {
	*proc
	id, ip, zone string
	port         int
	addr         string
}

func startPod(t *testing.T, bin, id, ip, zone string) *pod {
	t.Helper()
	p, m := startProc(t, "origin "+id, nil, originListening, bin, "origin", "--listen", net.JoinHostPort(ip, "0"), "--id", id)
	_, port, err := net.SplitHostPort(m[1])
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return &pod{proc: p, id: id, ip: ip, zone: zone, port: n, addr: m[1]}
}

// hostIP is a non-loopback IPv4 address of this machine: pods listen on
// it. Without one the test cannot run (skipped; failed with CI=true).
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no non-loopback IPv4 address for the pods (EndpointSlices refuse loopback addresses)")
	}
	t.Skip("no non-loopback IPv4 address for the pods (EndpointSlices refuse loopback addresses)")
	return ""
}

// stats is the pod's ground truth.
func (p *pod) stats(t *testing.T) testorigin.Stats {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + testorigin.StatsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st testorigin.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// gateway is a `corput serve`.
type gateway struct {
	*proc
	listen, admin, zone string
}

func startGateway(t *testing.T, bin, dir, name, zone, config string) *gateway {
	t.Helper()
	path := filepath.Join(dir, name+".yaml")
	writeFile(t, path, config)
	env := []string{"CORPUT_ZONE=" + zone}
	p, m := startProc(t, "gateway "+name, env, gatewayServing, bin, "serve", "--config", path)
	g := &gateway{proc: p, listen: m[1], admin: m[2], zone: zone}
	waitfor.Within(t, time.Minute, name+" ready", func() bool {
		resp, err := http.Get("http://" + g.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return g
}

// subsetsView is the gateway's /admin/subsets of origin app.
func subsetsView(t *testing.T, g *gateway) cluster.SubsetsView {
	t.Helper()
	resp, err := http.Get("http://" + g.admin + "/admin/subsets?origin=app")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v cluster.SubsetsView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// indices is the gateway's ring of origin app: address → index.
func (g *gateway) indices(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, e := range subsetsView(t, g).Endpoints {
		out[e.Address] = e.Index
	}
	return out
}

// metricValue reads one series from a /metrics page (0 when absent).
func metricValue(t *testing.T, admin, series string) float64 {
	t.Helper()
	return sumSeries(t, admin, series+" ")
}

// sumSeries sums every series of a /metrics page whose line starts with
// prefix.
func sumSeries(t *testing.T, admin, prefix string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return scrape(string(b), prefix)
}

// scrape sums the values of the exposition's lines that start with prefix
// and contain every one of has.
func scrape(exposition, prefix string, has ...string) float64 {
	var sum float64
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		match := true
		for _, h := range has {
			match = match && strings.Contains(line, h)
		}
		if match {
			f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += f
		}
	}
	return sum
}

// regexpFor matches s literally.
func regexpFor(s string) *regexp.Regexp { return regexp.MustCompile(regexp.QuoteMeta(s)) }

// applied lists the memberships the gateway applied: when (its log's
// time), how many endpoints, and whether urgently.
func (g *gateway) applied(t *testing.T) []applyLine {
	var out []applyLine
	for _, m := range g.matching(membershipApplied) {
		out = append(out, applyLine{at: logTime(t, m[1]), endpoints: m[3], urgent: m[4] == "true"})
	}
	return out
}

type applyLine struct {
	at        time.Time
	endpoints string
	urgent    bool
}

// request is one request of the load as its client saw it.
type request struct {
	sent   time.Time
	gw     int
	origin string // the answering origin's id
	err    error
	status int
}

// load sends requests through gateways from workers per gateway, each
// pausing pause between requests, recording every request.
type load struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex
	reqs []request
}

func startLoad(gws []*gateway, workers int, pause time.Duration) *load {
	l := &load{stop: make(chan struct{})}
	for i, g := range gws {
		for range workers {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
				defer c.CloseIdleConnections()
				for {
					select {
					case <-l.stop:
						return
					default:
					}
					r := request{sent: time.Now(), gw: i}
					resp, err := c.Get("http://" + g.listen + "/")
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						r.status, r.origin = resp.StatusCode, resp.Header.Get(testorigin.IDHeader)
					}
					r.err = err
					l.mu.Lock()
					l.reqs = append(l.reqs, r)
					l.mu.Unlock()
					time.Sleep(pause)
				}
			}()
		}
	}
	return l
}

func (l *load) halt() []request {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

func (l *load) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// failures lists the requests that failed (an error, or not a 200).
func failures(reqs []request) []request {
	var out []request
	for _, r := range reqs {
		if r.err != nil || r.status != http.StatusOK {
			out = append(out, r)
		}
	}
	return out
}
