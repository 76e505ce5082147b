package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corput/corput/internal/latency"
	testorigin "github.com/corput/corput/internal/origin"
)

// The mirroring measurements (CORPUT_LONG=1, about 5 minutes; run without
// -race, the figures are the point):
//
//	CORPUT_LONG=1 go test -count=1 -run TestMirrorNeverHurtsThePrimary -v -timeout 15m ./internal/gateway/
//
// Three real `corput serve` processes in front of one primary origin:
// without (no mirror), with (10 % mirrored to a live shadow) and
// blackholed (10 % mirrored to an address whose packets are dropped: a
// veth whose peer, in a network namespace, is down; a static neighbour
// entry, so not even ARP answers). Rounds alternate between a mirrored
// gateway and the unmirrored one under the same steady open-loop load;
// each round's p99 is quoted, and the median of the ratios must be at
// most 1.10. Then 60 s of load on the blackholed one, its VmRSS read
// before and after.

const (
	mirrorRate   = 400 // requests per second, open loop
	mirrorSlices = 10  // one second each, five a side
	mirrorRounds = 7
)

func TestMirrorNeverHurtsThePrimary(t *testing.T) {
	if os.Getenv("CORPUT_LONG") != "1" {
		t.Skip("CORPUT_LONG=1: about 4 minutes of load")
	}
	bh := blackhole(t)
	primary := startBackend(t, testorigin.H1, primaryHandler())
	shadow := startShadowProcess(t) // its own process: its work is not the measuring process's
	conf := func(mirror, shadowAddr string) string {
		return `listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
routes: [{name: pay, path_prefix: /, origin: app` + mirror + `}]
origins:
  - name: app
    endpoints: ` + endpointList(primary.addr) + `
  - name: shadow
    endpoints: ` + endpointList(shadowAddr) + "\n"
	}
	without0 := startServe(t, conf("", shadow.addr))
	with := startServe(t, conf(", mirror: {origin: shadow, percent: 10}", shadow.addr))
	holed := startServe(t, conf(", mirror: {origin: shadow, percent: 10}", bh))
	for _, p := range []*serveProcess{without0, with, holed} {
		waitServeReady(t, p)
		steady(t, p.listen, mirrorRate, time.Second) // warm
	}

	rounds := func(name string, mirrored *serveProcess) {
		var ratios []float64
		for i := range mirrorRounds {
			// A round is mirrorSlices one-second slices, alternating
			// between the two gateways (the first alternating too), so
			// that a burst of the machine's other work falls on both.
			var with, without []time.Duration
			for k := range mirrorSlices {
				if (k+i)%2 == 0 {
					without = append(without, steady(t, without0.listen, mirrorRate, time.Second)...)
				} else {
					with = append(with, steady(t, mirrored.listen, mirrorRate, time.Second)...)
				}
			}
			a, b := latency.Of(with), latency.Of(without)
			r := a.P99 / b.P99
			ratios = append(ratios, r)
			t.Logf("%s round %d: p99 with mirroring %.3f ms (p50 %.3f, n %d), without %.3f ms (p50 %.3f, n %d): ratio %.3f",
				name, i+1, a.P99, a.P50, a.Count, b.P99, b.P50, b.Count, r)
		}
		slices.Sort(ratios)
		med := ratios[len(ratios)/2]
		t.Logf("%s: median p99 ratio of %d rounds %.3f (sorted %.3f)", name, len(ratios), med, ratios)
		if med > 1.10 {
			t.Errorf("%s: the primary's p99 with mirroring is %.3f× its p99 without (median); want ≤ 1.10", name, med)
		}
	}

	rounds("live shadow", with)
	time.Sleep(2 * time.Second) // the last mirrors end
	m := scrapeAdmin(t, with.admin)
	mirrored := m.sum("corput_route_mirrored_total", "route", "pay")
	dropped := m.sum("corput_route_mirror_dropped_total", "route", "pay")
	served := m.sum("corput_downstream_requests_total")
	got := float64(shadow.count(t))
	t.Logf("live shadow: %v requests served, %v sampled (%.2f %%): %v mirrored, %v dropped; the shadow received %v (%.2f %% of the sampled)",
		served, mirrored+dropped, 100*(mirrored+dropped)/served, mirrored, dropped, got, 100*got/(mirrored+dropped))
	if got < 0.99*(mirrored+dropped) {
		t.Errorf("the shadow received %v of %v sampled requests; want ≥ 99 %%", got, mirrored+dropped)
	}

	rounds("blackholed shadow", holed)
	m = scrapeAdmin(t, holed.admin)
	t.Logf("blackholed shadow: %v mirrored, dropped %v max_in_flight, %v failed, %v body",
		m.sum("corput_route_mirrored_total"), m.sum("corput_route_mirror_dropped_total", "reason", "max_in_flight"),
		m.sum("corput_route_mirror_dropped_total", "reason", "failed"), m.sum("corput_route_mirror_dropped_total", "reason", "body"))
	if d := m.sum("corput_route_mirror_dropped_total"); d == 0 {
		t.Error("no mirror to the blackholed shadow counted dropped")
	}

	before := vmRSS(t, holed.cmd.Process.Pid)
	p := latency.Of(steady(t, holed.listen, mirrorRate, 60*time.Second))
	after := vmRSS(t, holed.cmd.Process.Pid)
	m = scrapeAdmin(t, holed.admin)
	t.Logf("blackholed shadow, 60 s at %d req/s: VmRSS before %d kB, after %d kB; p99 %.3f ms, n %d; dropped %v",
		mirrorRate, before, after, p.P99, p.Count, m.sum("corput_route_mirror_dropped_total"))
	if after > before+32<<10 {
		t.Errorf("VmRSS grew from %d kB to %d kB in 60 s", before, after)
	}
}

// steady sends rate GETs a second for d, open loop (each at its time, on
// one of 64 keep-alive connections), checks every answer is the primary's
// 200, and returns the latencies.
func steady(t *testing.T, addr string, rate int, d time.Duration) []time.Duration {
	t.Helper()
	v, made := steadyClients.LoadOrStore(addr, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}, Timeout: 10 * time.Second})
	c := v.(*http.Client)
	if !made {
		t.Cleanup(func() { c.Transport.(*http.Transport).CloseIdleConnections(); steadyClients.Delete(addr) })
	}
	n := int(d.Seconds() * float64(rate))
	lat := make([]time.Duration, n)
	var bad atomic.Int64
	var firstBad atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	gap := time.Second / time.Duration(rate)
	for i := range n {
		if w := time.Until(start.Add(time.Duration(i) * gap)); w > 0 {
			time.Sleep(w)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := time.Now()
			resp, err := c.Get("http://" + addr + "/pay")
			if err != nil {
				bad.Add(1)
				firstBad.CompareAndSwap(nil, err.Error())
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			lat[i] = time.Since(s)
			if resp.StatusCode != 200 || string(b) != "primary" {
				bad.Add(1)
				firstBad.CompareAndSwap(nil, fmt.Sprintf("%d %q", resp.StatusCode, b))
			}
		}()
	}
	wg.Wait()
	if k := bad.Load(); k > 0 {
		t.Fatalf("%d of %d requests were not the primary's 200 (first: %v)", k, n, firstBad.Load())
	}
	return lat
}

// shadowProcess is the shadow origin of the measurements, in a process
// of its own (this test binary again, running TestMirrorShadowProcess),
// so that its work does not fall on the process that measures.
type shadowProcess struct{ addr string }

func startShadowProcess(t *testing.T) shadowProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMirrorShadowProcess$")
	cmd.Env = append(os.Environ(), "CORPUT_MIRROR_SHADOW=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "shadow listening "); ok {
			go io.Copy(io.Discard, out)
			return shadowProcess{addr: a}
		}
	}
	t.Fatal("the shadow process did not start")
	return shadowProcess{}
}

// count is the requests the shadow received (GET /count is not one).
func (s shadowProcess) count(t *testing.T) int64 {
	t.Helper()
	resp, err := adminHTTP.Get("http://" + s.addr + "/count")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		t.Fatalf("/count: %q", b)
	}
	return n
}

// TestMirrorShadowProcess is the shadow process's body (CORPUT_MIRROR_SHADOW
// set): it answers every request "shadow", counts them, and reports the
// count at /count, until it is killed.
func TestMirrorShadowProcess(t *testing.T) {
	if os.Getenv("CORPUT_MIRROR_SHADOW") == "" {
		t.Skip("the shadow process of TestMirrorNeverHurtsThePrimary")
	}
	var n atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("shadow listening %s\n", ln.Addr())
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/count" {
			fmt.Fprint(w, n.Load())
			return
		}
		n.Add(1)
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "shadow")
	}))
}

// steadyClients are steady's clients by address: their connections stay
// open from one slice to the next.
var steadyClients sync.Map

// waitServeReady waits for the process's /readyz.
func waitServeReady(t *testing.T, p *serveProcess) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if statusOf(t, "http://"+p.admin+"/readyz") == 200 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("corput serve not ready\n%s", p.log())
}

// blackhole returns an address whose packets are dropped without an
// answer, removed when the test ends: a veth whose peer sits down in a
// network namespace, with a static neighbour entry. It needs root and
// ip(8); it skips without them.
func blackhole(t *testing.T) string {
	t.Helper()
	suffix := strconv.Itoa(os.Getpid() % 10000)
	dev, peer, ns := "cmir"+suffix, "cmirp"+suffix, "cmirns"+suffix
	run := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("netns", "add", ns); err != nil {
		t.Skipf("no network namespace (root and ip(8) needed): %v", err)
	}
	t.Cleanup(func() { run("link", "del", dev); run("netns", "del", ns) })
	for _, c := range [][]string{
		{"link", "add", dev, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", ns},
		{"addr", "add", "10.77.38.1/24", "dev", dev},
		{"link", "set", dev, "up"},
		{"-n", ns, "addr", "add", "10.77.38.2/24", "dev", peer},
		{"neigh", "replace", "10.77.38.2", "lladdr", "02:00:00:00:38:02", "dev", dev, "nud", "permanent"},
	} {
		if err := run(c...); err != nil {
			t.Skipf("cannot build the blackhole: %v", err)
		}
	}
	addr := "10.77.38.2:8080"
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	// The dial ends with the context's deadline: the poller's timeout (the
	// same deadline) may report it before the context's timer fires.
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	var ne net.Error
	if timedOut := ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()); err == nil || !timedOut {
		if c != nil {
			c.Close()
		}
		t.Fatalf("%s is not a blackhole: the dial ended before its timeout (%v)", addr, err)
	}
	return addr
}

// vmRSS is process pid's resident set, in kB (/proc/PID/status VmRSS).
func vmRSS(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
