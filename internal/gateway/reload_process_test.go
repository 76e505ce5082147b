package gateway

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/waitfor"
)

// These tests send real signals to a real `corput serve` process, and hand
// it real sockets the way systemd does.

// keepAliveLoad is W keep-alive clients, each on its own connection,
// sending GET url(w, i) back to back (pause between two), counting answers
// and, apart, failures of any kind.
type keepAliveLoad struct {
	stop   chan struct{}
	wg     sync.WaitGroup
	ok     atomic.Int64
	failed atomic.Int64
	mu     sync.Mutex
	errs   []string // the first few failures
}

func startKeepAliveLoad(t *testing.T, workers int, pause time.Duration, tlsc *tls.Config, url func(w, i int) string) *keepAliveLoad {
	l := &keepAliveLoad{stop: make(chan struct{})}
	for w := range workers {
		tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, TLSClientConfig: tlsc}
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer tr.CloseIdleConnections()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				case <-time.After(pause):
				}
				l.one(c, url(w, i))
			}
		}()
	}
	t.Cleanup(l.halt)
	return l
}

func (l *keepAliveLoad) one(c *http.Client, url string) {
	resp, err := c.Get(url)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			l.ok.Add(1)
			return
		}
		err = fmt.Errorf("%s: status %d %s", url, resp.StatusCode, resp.Header.Get("X-Corput-Error"))
	}
	l.failed.Add(1)
	l.mu.Lock()
	if len(l.errs) < 5 {
		l.errs = append(l.errs, err.Error())
	}
	l.mu.Unlock()
}

func (l *keepAliveLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

func (l *keepAliveLoad) check(t *testing.T, what string) {
	t.Helper()
	if n := l.failed.Load(); n > 0 {
		l.mu.Lock()
		defer l.mu.Unlock()
		t.Errorf("%s: %d of %d requests failed; first: %v", what, n, n+l.ok.Load(), l.errs)
	}
}

// startSteadyLoad is W plain HTTP clients sending GET url, a millisecond
// apart.
func startSteadyLoad(t *testing.T, url string, workers int) *keepAliveLoad {
	return startKeepAliveLoad(t, workers, time.Millisecond, nil, func(int, int) string { return url })
}

func serveConfig(extraRoutes []string, origins []*testorigin.Server, top string) string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nloops: 2\n" + top + "routes:\n  - {path_prefix: /, origin: app}\n")
	for _, p := range extraRoutes {
		fmt.Fprintf(&b, "  - {path_prefix: %s, origin: app}\n", p)
	}
	fmt.Fprintf(&b, "origins:\n  - name: app\n    endpoints: %s\n", endpointList(serverAddrs(origins)...))
	return b.String()
}

// TestSIGHUPReloadsUnderLoad: five SIGHUPs, each after the file gained a
// route, and one after the file broke, under a keep-alive load: the
// process stays up, loses no request, applies the five (each route
// answers) and refuses the broken one with its diagnostic in the log.
func TestSIGHUPReloadsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/corput")
	}
	origins := startOrigins(t, 2, testorigin.Options{Classes: fastClass})
	file := filepath.Join(t.TempDir(), "corput.yaml")
	var routes []string
	writeFileAtomic(t, file, serveConfig(routes, origins, ""))
	p := startServeWith(t, serveSpec{config: file})
	waitfor.Until(t, "/readyz", func() bool { return statusOf(t, "http://"+p.admin+"/readyz") == 200 })
	load := startSteadyLoad(t, "http://"+p.listen+"/x", 8)
	waitfor.Until(t, "the load to start", func() bool { return load.ok.Load() > 100 })
	hup := func() {
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		prefix := fmt.Sprintf("/hup%d/", i)
		routes = append(routes, prefix)
		writeFileAtomic(t, file, serveConfig(routes, origins, ""))
		hup()
		waitfor.Until(t, "the reloaded route "+prefix, func() bool {
			return strings.Count(p.log(), "configuration reloaded") == i+1
		})
	}
	writeFileAtomic(t, file, strings.Replace(serveConfig(routes, origins, ""), "endpoints:", "endpoint:", 1))
	hup()
	waitfor.Until(t, "the broken file's refusal in the log", func() bool { return strings.Contains(p.log(), "reload refused") })
	time.Sleep(200 * time.Millisecond)
	load.halt()
	load.check(t, "under SIGHUPs")
	select {
	case err := <-p.exited:
		t.Fatalf("corput serve exited after SIGHUP: %v\n%s", err, p.log())
	default:
	}
	if !strings.Contains(p.log(), "origins[0].endpoint") {
		t.Errorf("the refusal does not name the key:\n%s", p.log())
	}
	v := configOf(t, p.admin)
	if v.LastRejected == nil || len(v.LastRejected.Errors) == 0 {
		t.Errorf("GET /admin/config shows no rejected reload: %+v", v)
	}
	t.Logf("%d requests under 5 applied and 1 refused SIGHUP reloads, %d failed", load.ok.Load()+load.failed.Load(), load.failed.Load())
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if exited, err := p.wait(30 * time.Second); !exited || err != nil {
		t.Fatalf("after SIGTERM: exited %v, %v", exited, err)
	}
}

// TestWatchReloadsWhenTheFileChanges: with --watch, a file renamed over the
// config (an editor's save) is applied with no signal.
func TestWatchReloadsWhenTheFileChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/corput")
	}
	origins := startOrigins(t, 1, testorigin.Options{Classes: fastClass})
	file := filepath.Join(t.TempDir(), "corput.yaml")
	writeFileAtomic(t, file, serveConfig(nil, origins, ""))
	p := startServeWith(t, serveSpec{config: file, args: []string{"--watch", "--watch-debounce", "50ms"}})
	writeFileAtomic(t, file, serveConfig([]string{"/watched/"}, origins, ""))
	waitfor.Until(t, "the watched file's reload", func() bool { return strings.Contains(p.log(), "configuration reloaded") })
	if v := configOf(t, p.admin); !strings.Contains(fmt.Sprint(v.Config), "/watched/") {
		t.Errorf("GET /admin/config after the watched reload lacks the route: %v", v.Config)
	}
}

// TestRollingRestartLosesNothing hands one listening socket to two
// `corput serve` processes in turn, as a systemd socket unit shared by two
// service instances does: the new one starts and serves beside the old,
// then the old one is sent SIGTERM and drains. A steady keep-alive load
// through the socket sees no connection failure and no failed request;
// the origins count their new connections per second across the handover.
func TestRollingRestartLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/corput")
	}
	origins := startOrigins(t, 4, testorigin.Options{Classes: fastClass})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	file := filepath.Join(t.TempDir(), "corput.yaml")
	writeFileAtomic(t, file, serveConfig(nil, origins, "shutdown: {drain_timeout: 10s}\n"))
	spec := serveSpec{config: file, listeners: []*os.File{f}}

	old := startServeWith(t, spec)
	if old.listen != ln.Addr().String() {
		t.Fatalf("the process serves %s, not the socket handed over (%s)", old.listen, ln.Addr())
	}
	waitfor.Until(t, "the old process ready", func() bool { return statusOf(t, "http://"+old.admin+"/readyz") == 200 })
	load := startSteadyLoad(t, "http://"+ln.Addr().String()+"/x", 8)
	waitfor.Until(t, "the load to start", func() bool { return load.ok.Load() > 200 })
	before := acceptedPerSecond(origins)

	next := startServeWith(t, spec)
	waitfor.Until(t, "the new process ready", func() bool { return statusOf(t, "http://"+next.admin+"/readyz") == 200 })
	if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if exited, err := old.wait(30 * time.Second); !exited || err != nil {
		t.Fatalf("the old process after SIGTERM: exited %v, %v\n%s", exited, err, old.log())
	}
	served := load.ok.Load()
	waitfor.Until(t, "the new process to carry the load", func() bool { return load.ok.Load() > served+200 })
	load.halt()
	load.check(t, "across the handover")
	after := acceptedPerSecond(origins)
	peak, total := 0, 0
	for s, n := range after {
		if d := n - before[s]; d > 0 {
			total += d
			peak = max(peak, d)
		}
	}
	t.Logf("%d requests across the handover, %d failed; new origin connections: %d in all, at most %d in one second (the new process's pre-warm: %d endpoints x 2 loops)",
		load.ok.Load()+load.failed.Load(), load.failed.Load(), total, peak, len(origins))
}

// acceptedPerSecond sums the origins' per-second accepted connections by
// the second they count from their start.
func acceptedPerSecond(srvs []*testorigin.Server) map[int64]int {
	out := map[int64]int{}
	for _, s := range srvs {
		st := s.Stats()
		for _, sec := range st.Seconds {
			out[sec.T] += int(sec.Accepted)
		}
	}
	return out
}

// TestSIGHUPMovesTheFleetPosition: corput serve places itself again on
// every reload, from the same flags and the file's fleet block. Started
// with --fleet-size 2 and the file's instance 0, a file that says
// instance 1 of 4 moves it to instance 1 (the file's) of 2 (the flag's),
// re-subset in place under load with no request lost; a file whose
// instance falls outside the flag's size is refused, naming
// fleet.instance, and the position stays.
func TestSIGHUPMovesTheFleetPosition(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/corput")
	}
	origins := startOrigins(t, 8, testorigin.Options{Classes: fastClass})
	file := filepath.Join(t.TempDir(), "corput.yaml")
	fleet := func(instance, size int) string {
		return fmt.Sprintf("fleet: {instance: %d, size: %d}\n", instance, size)
	}
	writeFileAtomic(t, file, serveConfig(nil, origins, fleet(0, 2)))
	p := startServeWith(t, serveSpec{config: file, args: []string{"--fleet-size", "2"}})
	waitfor.Until(t, "/readyz", func() bool { return statusOf(t, "http://"+p.admin+"/readyz") == 200 })
	position := func() (int, int) { return fleetPosition(t, p.admin) }
	if i, n := position(); i != 0 || n != 2 {
		t.Fatalf("at start: instance %d of %d, want 0 of 2", i, n)
	}
	load := startSteadyLoad(t, "http://"+p.listen+"/x", 8)
	waitfor.Until(t, "the load to start", func() bool { return load.ok.Load() > 100 })
	hup := func() {
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	writeFileAtomic(t, file, serveConfig(nil, origins, fleet(1, 4)))
	hup()
	waitfor.Until(t, "the reload", func() bool { return strings.Contains(p.log(), "fleet position changed") })
	if i, n := position(); i != 1 || n != 2 {
		t.Errorf("after the reload: instance %d of %d, want 1 (the file's) of 2 (--fleet-size)", i, n)
	}

	writeFileAtomic(t, file, serveConfig(nil, origins, fleet(3, 4)))
	hup()
	waitfor.Until(t, "the refusal", func() bool { return strings.Contains(p.log(), "reload refused") })
	if !strings.Contains(p.log(), "fleet.instance: 3") {
		t.Errorf("the refusal does not name fleet.instance:\n%s", p.log())
	}
	if i, n := position(); i != 1 || n != 2 {
		t.Errorf("after the refused reload: instance %d of %d, want 1 of 2 kept", i, n)
	}
	waitfor.Until(t, "more load after the reloads", func() bool { return load.ok.Load() > 300 })
	load.halt()
	load.check(t, "under fleet moves")
}

// fleetPosition is the fleet position a gateway's /admin/subsets shows.
func fleetPosition(t *testing.T, admin string) (instance, size int) {
	t.Helper()
	resp, err := adminHTTP.Get("http://" + admin + "/admin/subsets?origin=app")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Gateway int `json:"gateway"`
		Fleet   struct {
			Gateways int `json:"gateways"`
		} `json:"fleet"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Gateway, v.Fleet.Gateways
}
