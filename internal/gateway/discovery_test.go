package gateway

// End-to-end membership tests (docs/discovery.md): a real go-control-plane xDS server
// and a watched file drive a running gateway through RunDiscovery; the
// evidence is what real origins saw, a real /metrics scrape
// (scrapeFamilies, metrics_test.go) and /admin/origins over HTTP.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/discovery/xdstest"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/waitfor"
	"github.com/corput/corput/internal/workload"
)

// xdsNode is the node id every test gateway sends and every test snapshot
// is published for.
const xdsNode = "gw-test"

// controlPlane is a real ADS server (xdstest) publishing cluster "app"
// for xdsNode.
type controlPlane struct{ *xdstest.Server }

// newControlPlane serves on addr ("127.0.0.1:0" for a fresh port, or the
// address of a stopped one to restart it) until the test ends or Stop.
func newControlPlane(t testing.TB, addr string) controlPlane {
	t.Helper()
	return controlPlane{xdstest.New(t, addr)}
}

// publish sets cluster "app" to the given origins (zone z1, weight unset,
// healthy) under version.
func (cp controlPlane) publish(t testing.TB, version string, srvs []*testorigin.Server) {
	t.Helper()
	eps := make([]xdstest.Endpoint, len(srvs))
	for i, s := range srvs {
		eps[i] = xdstest.Endpoint{Addr: s.Addr(), Zone: "z1", Health: corev3.HealthStatus_HEALTHY}
	}
	cp.publishEndpoints(t, version, eps...)
}

// publishEndpoints sets cluster "app" to eps, one locality per zone.
func (cp controlPlane) publishEndpoints(t testing.TB, version string, eps ...xdstest.Endpoint) {
	t.Helper()
	cp.MustSet(t, xdsNode, version, xdstest.CLA("app", eps...))
}

// xdsConfig is a one-origin gateway config following cluster "app" on
// server; extra is appended to the origin.
func xdsConfig(server string, loops int, extra string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: %d
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    discovery: {type: xds, server: %q, cluster: app, node_id: %s}
`, loops, server, xdsNode) + extra
}

// runGateway starts a gateway from config text and runs its discovery
// until the test ends. It does not wait for readiness: the first membership
// has to arrive first.
func runGateway(t testing.TB, text string, opts Options) *Gateway {
	t.Helper()
	g := newGateway(t, text, opts)
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- g.RunDiscovery(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("RunDiscovery: %v", err)
		}
	})
	return g
}

// fastOrigins starts n origins answering every path in 1 ms.
func fastOrigins(t testing.TB, n int) []*testorigin.Server {
	return startOrigins(t, n, testorigin.Options{Classes: []workload.Class{{Name: "x", Percent: 100, Latency: time.Millisecond}}})
}

// servedBy returns how many requests each origin has received.
func servedBy(srvs []*testorigin.Server) []int64 {
	out := make([]int64, len(srvs))
	for i, s := range srvs {
		out[i] = s.Stats().Total().Total()
	}
	return out
}

// getOK sends n requests on c and fails unless every one is a 200.
func getOK(t testing.TB, c *http.Client, g *Gateway, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if resp, body := get(t, c, "http://"+g.Addr()+"/x"); resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d (%s) %q", i, resp.StatusCode, resp.Header.Get("X-Corput-Error"), body)
		}
	}
}

// adminOrigin fetches /admin/origins over HTTP and returns origin "app".
func adminOrigin(t testing.TB, g *Gateway) cluster.OriginView {
	t.Helper()
	resp, err := adminHTTP.Get("http://" + g.AdminAddr() + "/admin/origins")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var views []cluster.OriginView
	if err := json.NewDecoder(resp.Body).Decode(&views); err != nil {
		t.Fatalf("/admin/origins: %v", err)
	}
	for _, v := range views {
		if v.Name == "app" {
			return v
		}
	}
	t.Fatal("/admin/origins has no origin app")
	return cluster.OriginView{}
}

// endpointAddrs returns the endpoint addresses of an admin view, sorted.
func endpointAddrs(v cluster.OriginView) []string {
	var out []string
	for _, e := range v.Endpoints {
		out = append(out, e.Address)
	}
	sort.Strings(out)
	return out
}

// addrsOfServers returns the addresses of srvs, sorted.
func addrsOfServers(srvs []*testorigin.Server) []string {
	out := serverAddrs(srvs)
	sort.Strings(out)
	return out
}

// createdByLoop is corput_upstream_connections_created_total of origin app
// per loop.
func createdByLoop(t testing.TB, g *Gateway) []float64 {
	t.Helper()
	fams := scrapeFamilies(t, g)
	out := make([]float64, g.Loops())
	for l := range out {
		out[l] = fams.sum("corput_upstream_connections_created_total", "origin", "app", "loop", strconv.Itoa(l))
	}
	return out
}

func membershipChanges(t testing.TB, g *Gateway) float64 {
	t.Helper()
	return scrapeFamilies(t, g).sum("corput_membership_changes_total", "origin", "app")
}

func TestXDSControlPlaneDrivesRunningGateway(t *testing.T) {
	srvs := fastOrigins(t, 4)
	cp := newControlPlane(t, "127.0.0.1:0")
	cp.publish(t, "1", srvs[:2])
	logger, logs := testlog.New(slog.LevelInfo)
	g := runGateway(t, xdsConfig(cp.Addr(), 1, "    debounce: 100ms\n    balancer: {policy: round_robin}\n"), Options{Logger: logger})
	waitReady(t, g)
	c, closeIdle := client()
	defer closeIdle()

	getOK(t, c, g, 20)
	if n := servedBy(srvs); n[0] == 0 || n[1] == 0 || n[2] != 0 || n[3] != 0 {
		t.Fatalf("requests per origin %v: want only the two published endpoints", n)
	}

	// An add is followed: the new endpoint serves, and enters slow start.
	cp.publish(t, "2", srvs[:3])
	waitfor.Until(t, "the added endpoint in /admin/origins", func() bool {
		return slices.Contains(endpointAddrs(adminOrigin(t, g)), srvs[2].Addr())
	})
	for _, e := range adminOrigin(t, g).Endpoints {
		if e.Address == srvs[2].Addr() && e.EffectiveWeight >= float64(e.Weight) {
			t.Errorf("new endpoint has effective weight %v of %d: not in slow start", e.EffectiveWeight, e.Weight)
		}
	}
	waitfor.Until(t, "requests to reach the added endpoint", func() bool {
		getOK(t, c, g, 3)
		return servedBy(srvs)[2] > 0
	})

	// A remove is followed: the endpoint's connections drain and close,
	// and it gets no new requests.
	cp.publish(t, "3", srvs[1:3])
	waitfor.Until(t, "the removal to apply", func() bool {
		return !slices.Contains(endpointAddrs(adminOrigin(t, g)), srvs[0].Addr())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srvs[0].WaitOpen(ctx, 0); err != nil {
		t.Fatalf("removed endpoint's connections did not close: %v", err)
	}
	before := servedBy(srvs)
	getOK(t, c, g, 20)
	if after := servedBy(srvs); after[0] != before[0] || after[1] == before[1] || after[2] == before[2] {
		t.Fatalf("after the remove, requests per origin went %v → %v: want none to the removed endpoint", before, after)
	}
	if got := membershipChanges(t, g); got != 3 {
		t.Fatalf("corput_membership_changes_total = %v after the initial set, an add and a remove; want 3", got)
	}

	// The control plane goes down: the gateway says so and keeps serving on
	// the last known membership.
	cp.Stop()
	waitfor.Until(t, "source_error to report the outage", func() bool {
		return strings.Contains(adminOrigin(t, g).SourceError, "keeping the last known membership")
	})
	before = servedBy(srvs)
	getOK(t, c, g, 20)
	if after := servedBy(srvs); after[0] != before[0] || after[1] == before[1] || after[2] == before[2] || after[3] != 0 {
		t.Fatalf("with the control plane down, requests per origin went %v → %v: want the last known pair", before, after)
	}
	if !strings.Contains(logs.String(), "keeping the last good membership") {
		t.Errorf("the outage is not in the log:\n%s", logs.String())
	}

	// It restarts on the same address with a fresh cache and a fourth
	// endpoint: the gateway reconnects and follows.
	cp2 := newControlPlane(t, cp.Addr())
	cp2.publish(t, "1", srvs[1:])
	waitfor.Until(t, "requests to reach the endpoint published after the restart", func() bool {
		getOK(t, c, g, 3)
		return servedBy(srvs)[3] > 0
	})
	v := adminOrigin(t, g)
	if v.SourceError != "" || !slices.Equal(endpointAddrs(v), addrsOfServers(srvs[1:])) || v.MembershipChanges != 4 {
		t.Fatalf("after the restart: source_error %q, endpoints %v, %d changes; want none, %v, 4",
			v.SourceError, endpointAddrs(v), v.MembershipChanges, addrsOfServers(srvs[1:]))
	}
}

func TestXDSFlappingWithinOneDebounceWindowAppliesOnce(t *testing.T) {
	srvs := fastOrigins(t, 4)
	cp := newControlPlane(t, "127.0.0.1:0")
	cp.publish(t, "0", srvs[:2])
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// debounce is left at its default, 2 s of the fake clock, which does
	// not move while the membership flaps.
	g := runGateway(t, xdsConfig(cp.Addr(), 1, ""), Options{Clock: clk})
	waitReady(t, g)
	if got := membershipChanges(t, g); got != 1 {
		t.Fatalf("after the first membership: %v applied updates, want 1", got)
	}

	// 100 changes: endpoint 2 and endpoint 3 take turns as the third
	// member. Each is ACKed, so each reached the debouncer.
	for i := 1; i <= 100; i++ {
		v := strconv.Itoa(i)
		cp.publish(t, v, []*testorigin.Server{srvs[0], srvs[1], srvs[2+i%2]})
		waitfor.Until(t, "the ACK of version "+v, func() bool { return cp.Acked(v) })
	}
	if got, v := membershipChanges(t, g), adminOrigin(t, g); got != 1 || v.MembershipChanges != 1 || len(v.Endpoints) != 2 {
		t.Fatalf("inside the window: %v applied updates (admin %d), %d endpoints; want 1 and the first 2", got, v.MembershipChanges, len(v.Endpoints))
	}

	clk.Advance(2 * time.Second)
	want := addrsOfServers([]*testorigin.Server{srvs[0], srvs[1], srvs[2]}) // the 100th change
	v := adminOrigin(t, g)
	if got := membershipChanges(t, g); got != 2 || v.MembershipChanges != 2 || !slices.Equal(endpointAddrs(v), want) {
		t.Fatalf("after the window: %v applied updates (admin %d), endpoints %v; want 2 and %v", got, v.MembershipChanges, endpointAddrs(v), want)
	}
	clk.Advance(time.Minute)
	if got := membershipChanges(t, g); got != 2 {
		t.Fatalf("%v applied updates a minute later, want still 2", got)
	}
}

// loopLoad keeps one sequential client per loop busy until stopped, so
// every pool needs exactly its one pre-warmed connection.
type loopLoad struct {
	stop   chan struct{}
	wg     sync.WaitGroup
	total  atomic.Int64
	failed atomic.Int64
	first  atomic.Value // string: the first failure
}

func startLoopLoad(t testing.TB, g *Gateway) *loopLoad {
	l := &loopLoad{stop: make(chan struct{})}
	for i := 0; i < g.Loops(); i++ {
		c, closeIdle := client()
		// The first request opens the downstream connection; connections
		// are given to loops round-robin, so client i is on loop i.
		getOK(t, c, g, 1)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer closeIdle()
			for {
				select {
				case <-l.stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				l.one(c, g)
			}
		}()
	}
	t.Cleanup(l.halt)
	return l
}

func (l *loopLoad) one(c *http.Client, g *Gateway) {
	l.total.Add(1)
	resp, err := c.Get("http://" + g.Addr() + "/x")
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			return
		}
		err = fmt.Errorf("status %d %s", resp.StatusCode, resp.Header.Get("X-Corput-Error"))
	}
	if l.failed.Add(1) == 1 {
		l.first.Store(err.Error())
	}
}

// halt stops the load and waits for it; it may be called more than once.
func (l *loopLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// waitFor lets the load run until it has sent n more requests.
func (l *loopLoad) waitFor(t testing.TB, n int64) {
	t.Helper()
	target := l.total.Load() + n
	waitfor.Until(t, "the load to go on", func() bool { return l.total.Load() >= target })
}

func (l *loopLoad) check(t testing.TB) {
	t.Helper()
	if n := l.failed.Load(); n > 0 {
		t.Fatalf("%d of %d requests under load failed; first: %v", n, l.total.Load(), l.first.Load())
	}
}

// snapshotOf is origin app's current placement snapshot.
func snapshotOf(g *Gateway) *subset.Snapshot {
	return g.st().origins["app"].Snapshot()
}

// acceptedBy and openConns are each origin's ground truth about connections.
func acceptedBy(srvs []*testorigin.Server) map[string]int64 {
	out := map[string]int64{}
	for _, s := range srvs {
		out[s.Addr()] = s.Stats().Connections.Accepted
	}
	return out
}

func openConns(srvs []*testorigin.Server) map[string]int64 {
	out := map[string]int64{}
	for _, s := range srvs {
		out[s.Addr()] = s.Stats().Connections.Open
	}
	return out
}

func TestMembershipDeltaUnderLoadTouchesOnlyChangedSubsets(t *testing.T) {
	const n = 200
	srvs := fastOrigins(t, n+1)
	base, extra := srvs[:n], srvs[n]
	cp := newControlPlane(t, "127.0.0.1:0")
	cp.publish(t, "1", base)
	// 4 loops, subsets of at most 100: S = 2, so loops 0 and 2 share one
	// subset and loops 1 and 3 the other, and every pool pre-warms one
	// connection.
	g := runGateway(t, xdsConfig(cp.Addr(), 4, "    debounce: 100ms\n    subset: {size: 100}\n    pool: {prewarm: 1}\n"), Options{})
	waitReady(t, g)
	old := snapshotOf(g)
	if old.Subsets() != 2 {
		t.Fatalf("subset count %d, want 2", old.Subsets())
	}
	load := startLoopLoad(t, g)
	load.waitFor(t, 200)

	// Add one endpoint while the load runs.
	created0, acc0 := createdByLoop(t, g), acceptedBy(srvs)
	cp.publish(t, "2", srvs)
	waitfor.Until(t, "the add to apply", func() bool { return snapshotOf(g).Len() == n+1 })
	cur := snapshotOf(g)
	changes := subset.Diff(old, cur, 0)
	gainers := 0
	for _, c := range changes {
		if len(c.Removed) != 0 || !slices.Equal(c.Added, []string{extra.Addr()}) {
			t.Fatalf("loop %d: gained %v and lost %v; one add should only gain the new endpoint", c.Loop, c.Added, c.Removed)
		}
		gainers++
	}
	if gainers != 2 {
		t.Fatalf("%d loops gained the new endpoint, want the 2 that share its subset", gainers)
	}
	waitfor.Until(t, "the new endpoint's pools to pre-warm", func() bool { return extra.Stats().Connections.Accepted == int64(gainers) })
	load.waitFor(t, 200)
	created1, acc1 := createdByLoop(t, g), acceptedBy(srvs)
	for l := range created1 {
		want := 0.0
		if slices.ContainsFunc(changes, func(c subset.LoopChange) bool { return c.Loop == l }) {
			want = 1
		}
		if d := created1[l] - created0[l]; d != want {
			t.Errorf("loop %d created %v connections during the add, want %v (subset.Diff: %+v)", l, d, want, changes)
		}
	}
	for _, s := range base {
		if acc1[s.Addr()] != acc0[s.Addr()] {
			t.Errorf("endpoint %s accepted %d new connections during an add that did not concern it", s.Addr(), acc1[s.Addr()]-acc0[s.Addr()])
		}
	}

	// Remove an endpoint that is not the last on the ring: the last one
	// moves into its place, so at most one survivor changes subset.
	ring := cur.Endpoints()
	removed := ring[3].Address
	var keep []*testorigin.Server
	for _, s := range srvs {
		if s.Addr() != removed {
			keep = append(keep, s)
		}
	}
	open1 := openConns(srvs)
	closed0 := scrapeFamilies(t, g).sum("corput_upstream_connections_closed_total", "origin", "app")
	cp.publish(t, "3", keep)
	waitfor.Until(t, "the remove to apply", func() bool { return snapshotOf(g).Len() == n })
	after := snapshotOf(g)
	changes = subset.Diff(cur, after, 0)
	lost, moved := 0, map[string]bool{}
	gained := map[int]int{}
	for _, c := range changes {
		for _, a := range c.Removed {
			lost++
			if a != removed {
				moved[a] = true
			}
		}
		for _, a := range c.Added {
			gained[c.Loop]++
			moved[a] = true
		}
	}
	if len(moved) > 1 {
		t.Fatalf("the remove moved %d surviving endpoints between subsets (%v), want at most 1", len(moved), moved)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range srvs {
		if s.Addr() == removed {
			if err := s.WaitOpen(ctx, 0); err != nil {
				t.Fatalf("removed endpoint: %v", err)
			}
		}
	}
	waitfor.Until(t, "the moved endpoint's new pools to pre-warm", func() bool {
		total := 0
		for _, k := range gained {
			total += k
		}
		acc := acceptedBy(srvs)
		n := int64(0)
		for a := range moved {
			n += acc[a] - acc1[a]
		}
		return n == int64(total)
	})
	load.waitFor(t, 200)
	load.halt()
	load.check(t)
	t.Logf("add: connections created per loop %v (subset.Diff: %d loops gained it); remove: %d closed, created per loop %v, %d survivor moved; %d requests under load, none failed",
		diffs(created0, created1), gainers, lost, diffs(created1, createdByLoop(t, g)), len(moved), load.total.Load())

	if d := scrapeFamilies(t, g).sum("corput_upstream_connections_closed_total", "origin", "app") - closed0; d != float64(lost) {
		t.Errorf("%v connections closed during the remove; want %d, one per (loop, endpoint) that left a subset", d, lost)
	}
	created2 := createdByLoop(t, g)
	for l := range created2 {
		if d := created2[l] - created1[l]; d != float64(gained[l]) {
			t.Errorf("loop %d created %v connections during the remove, want %d", l, d, gained[l])
		}
	}
	acc2, open2 := acceptedBy(srvs), openConns(srvs)
	for _, s := range keep {
		a := s.Addr()
		if moved[a] {
			continue
		}
		if acc2[a] != acc1[a] || open2[a] != open1[a] {
			t.Errorf("endpoint %s, untouched by the remove: accepted %d→%d, open %d→%d; want no change", a, acc1[a], acc2[a], open1[a], open2[a])
		}
	}
}

func diffs(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = b[i] - a[i]
	}
	return out
}

func endpointsYAML(srvs []*testorigin.Server) string {
	var b strings.Builder
	b.WriteString("endpoints:\n")
	for _, s := range srvs {
		fmt.Fprintf(&b, "  - {address: %q, zone: z1}\n", s.Addr())
	}
	return b.String()
}

func TestFileDiscoveryFollowsEditsAndKeepsLastGoodSetOnGarbage(t *testing.T) {
	srvs := fastOrigins(t, 4)
	path := filepath.Join(t.TempDir(), "app.yaml")
	writeFileAtomic(t, path, endpointsYAML(srvs[:2]))
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	logger, logs := testlog.New(slog.LevelInfo)
	g := runGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    discovery: {type: file, path: %q}
    balancer: {policy: round_robin}
    slow_start: {window: 0s}
`, path), Options{Clock: clk, Logger: logger})
	waitReady(t, g)
	c, closeIdle := client()
	defer closeIdle()
	getOK(t, c, g, 10)
	if n := servedBy(srvs); n[0] != 5 || n[1] != 5 || n[2]+n[3] != 0 {
		t.Fatalf("requests per origin %v: want 5 and 5 on the two listed endpoints", n)
	}

	// Edit the file: the next poll (every second) offers it, the debounce
	// window (2 s) applies it.
	writeFileAtomic(t, path, endpointsYAML(srvs[:3]))
	clk.Advance(time.Second)
	if v := adminOrigin(t, g); v.MembershipChanges != 1 {
		t.Fatalf("applied before the debounce window passed: %d changes", v.MembershipChanges)
	}
	clk.Advance(2 * time.Second)
	if v := adminOrigin(t, g); v.MembershipChanges != 2 || !slices.Equal(endpointAddrs(v), addrsOfServers(srvs[:3])) {
		t.Fatalf("after the edit: %d changes, endpoints %v", v.MembershipChanges, endpointAddrs(v))
	}
	before := servedBy(srvs)
	getOK(t, c, g, 9)
	if after := servedBy(srvs); after[2]-before[2] != 3 {
		t.Fatalf("requests per origin %v → %v: want the added endpoint to take its third", before, after)
	}

	// Garbage: the last good set stays, and the log and /admin/origins say
	// why.
	writeFileAtomic(t, path, "endpoints: [{address: 127.0.0.1, weight: lots}\n\x00\x01")
	clk.Advance(time.Second)
	v := adminOrigin(t, g)
	if !strings.Contains(v.SourceError, path) || !slices.Equal(endpointAddrs(v), addrsOfServers(srvs[:3])) {
		t.Fatalf("after garbage: source_error %q, endpoints %v; want the file named and the last good set", v.SourceError, endpointAddrs(v))
	}
	if log := logs.String(); !strings.Contains(log, "keeping the last good membership") || !strings.Contains(log, path) {
		t.Fatalf("the log does not say why the file was refused:\n%s", log)
	}
	clk.Advance(10 * time.Second)
	before = servedBy(srvs)
	getOK(t, c, g, 9)
	if after := servedBy(srvs); after[0]-before[0] != 3 || after[1]-before[1] != 3 || after[2]-before[2] != 3 {
		t.Fatalf("with a bad file, requests per origin %v → %v: want the last good three", before, after)
	}
	if v := adminOrigin(t, g); v.MembershipChanges != 2 {
		t.Fatalf("garbage was applied: %d changes", v.MembershipChanges)
	}

	// A good file again: followed, and the error clears.
	writeFileAtomic(t, path, endpointsYAML(srvs[1:]))
	clk.Advance(3 * time.Second)
	v = adminOrigin(t, g)
	if v.SourceError != "" || v.MembershipChanges != 3 || !slices.Equal(endpointAddrs(v), addrsOfServers(srvs[1:])) {
		t.Fatalf("after the fix: source_error %q, %d changes, endpoints %v", v.SourceError, v.MembershipChanges, endpointAddrs(v))
	}
	before = servedBy(srvs)
	getOK(t, c, g, 9)
	if after := servedBy(srvs); after[0] != before[0] || after[3]-before[3] != 3 {
		t.Fatalf("after the fix, requests per origin %v → %v: want none to the removed endpoint", before, after)
	}
}

// A request can pick an endpoint just before a membership change removes
// it and ask for its pool just after. It must not reopen a connection to
// the removed endpoint (nor leave a pool for it behind): it gets a closed
// pool, so it retries on a current member.
func TestPoolForAnEndpointRemovedMeanwhileIsClosed(t *testing.T) {
	srvs := fastOrigins(t, 3)
	g := startGateway(t, cfgText(1, "    pool: {prewarm: 1}\n"), srvs, Options{})
	gone := srvs[0].Addr()
	if err := g.Apply("app", []balance.Member{{Address: srvs[1].Addr(), Weight: 1}, {Address: srvs[2].Addr(), Weight: 1}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srvs[0].WaitOpen(ctx, 0); err != nil {
		t.Fatal(err)
	}
	o := g.st().origins["app"]
	p, err := o.PoolFor(o.Loop(0), gone)
	if err != nil {
		t.Fatalf("poolFor: %v; want a closed pool, which makes the request retry", err)
	}
	if lease, err := p.Acquire(ctx); !errors.Is(err, pool.ErrClosed) {
		if err == nil {
			lease.Release()
		}
		t.Fatalf("Acquire on the removed endpoint's pool: %v; want pool.ErrClosed", err)
	}
	if _, kept := o.Loop(0).Pools()[gone]; kept {
		t.Fatal("a pool for the removed endpoint was added to the loop")
	}
	if got := srvs[0].Stats().Connections.Accepted; got != 1 {
		t.Fatalf("removed endpoint accepted %d connections, want only its pre-warmed one", got)
	}
}

// fleetGateway builds (without starting) gateway instance of a fleet of
// size with the given loops over static endpoints; pools do not pre-warm,
// so the addresses are never dialled.
func fleetGateway(t testing.TB, instance, size, loops int, addrs []string) *Gateway {
	t.Helper()
	return newGateway(t, fleetConfig(instance, size, loops, "endpoints: "+endpointList(addrs...)), Options{})
}

// fleetConfig is the configuration of gateway instance of a fleet of size
// with the given loops, routing everything to origin app, whose pools do
// not pre-warm and whose membership is given by the lines of members.
func fleetConfig(instance, size, loops int, members ...string) string {
	return fmt.Sprintf(`
loops: %d
fleet: {instance: %d, size: %d}
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    pool: {prewarm: 0}
    %s
`, loops, instance, size, strings.Join(members, "\n    "))
}

// sortedSubsets is each loop's subset of origin app, each sorted.
func sortedSubsets(g *Gateway) [][]string {
	var out [][]string
	for _, l := range g.Origins().([]cluster.OriginView)[0].Loops {
		out = append(out, slices.Sorted(slices.Values(l.Subset)))
	}
	return out
}

// fakeAddrs returns n distinct addresses that are never dialled.
func fakeAddrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.0.%d.%d:80", i/250, i%250+1)
	}
	return out
}

// What docs/discovery.md and docs/deployment.md say about resizing a
// fleet: frontend g·loops+l uses subset (g·loops+l) mod S whatever the
// fleet size, so a size change moves no gateway's subsets unless
// loops × size caps the subset count S.
func TestFleetSizeChangeMovesSubsetsOnlyWhenItCapsTheSubsetCount(t *testing.T) {
	addrs := fakeAddrs(200) // default sizing: S = 4 subsets of 50
	ref := fleetGateway(t, 1, 2, 2, addrs)
	if s := ref.Origins().([]cluster.OriginView)[0].Subsets; s != 4 {
		t.Fatalf("%d subsets, want 4", s)
	}
	for _, size := range []int{3, 4, 8, 64} {
		if g := fleetGateway(t, 1, size, 2, addrs); !slices.EqualFunc(sortedSubsets(g), sortedSubsets(ref), slices.Equal) {
			t.Errorf("fleet size 2 → %d moved gateway 1's subsets; 2 loops × %d gateways do not cap S = 4", size, size)
		}
	}
	// One gateway of 2 loops: 2 frontends cap S at 2, so instance 0's
	// subsets double in size and change.
	small, big := fleetGateway(t, 0, 1, 2, addrs), fleetGateway(t, 0, 2, 2, addrs)
	if s := small.Origins().([]cluster.OriginView)[0].Subsets; s != 2 {
		t.Fatalf("fleet of 1 × 2 loops: %d subsets, want 2 (capped by the frontends)", s)
	}
	if slices.EqualFunc(sortedSubsets(small), sortedSubsets(big), slices.Equal) || len(sortedSubsets(small)[0]) != 100 {
		t.Fatal("fleet size 1 → 2 kept instance 0's subsets, though 2 frontends capped S at 2")
	}
}

// A gateway builds its ring from the membership it starts with and then
// follows deltas, so gateways that started at different memberships hold
// different rings. When every gateway's loops cover every subset
// (loops ≥ S) the fleet still uses every endpoint equally; with fewer
// loops than subsets, coverage is exact only among gateways that share the
// ring's history. docs/discovery.md states both.
func TestFleetCoverageAcrossGatewaysWithDifferentRingHistories(t *testing.T) {
	addrs := fakeAddrs(205)
	start, final := addrs[:200], addrs[5:] // 5 endpoints replaced
	members := make([]balance.Member, len(final))
	for i, a := range final {
		members[i] = balance.Member{Address: a, Weight: 1}
	}
	coverage := func(loops int, mixed bool) (lo, hi int) {
		const size = 8
		uses := map[string]int{}
		for inst := 0; inst < size; inst++ {
			g := fleetGateway(t, inst, size, loops, final)
			if mixed && inst%2 == 0 { // half the fleet has run since before the change
				g = fleetGateway(t, inst, size, loops, start)
				if err := g.Apply("app", members); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range sortedSubsets(g) {
				for _, a := range s {
					uses[a]++
				}
			}
			g.Close()
		}
		lo, hi = len(final), 0
		for _, a := range final {
			lo, hi = min(lo, uses[a]), max(hi, uses[a])
		}
		return lo, hi
	}
	// 200 endpoints: S = 4. 8 gateways × 4 loops: every endpoint is used
	// by 8 frontends whatever the history.
	for _, mixed := range []bool{false, true} {
		if lo, hi := coverage(4, mixed); lo != 8 || hi != 8 {
			t.Errorf("4 loops, mixed histories %v: frontends per endpoint %d..%d, want exactly 8", mixed, lo, hi)
		}
	}
	// 2 loops: each gateway uses half the subsets. With one history every
	// endpoint has 4 frontends; with two, the halves no longer line up.
	if lo, hi := coverage(2, false); lo != 4 || hi != 4 {
		t.Errorf("2 loops, one history: frontends per endpoint %d..%d, want exactly 4", lo, hi)
	}
	if lo, hi := coverage(2, true); lo == hi {
		t.Errorf("2 loops, two histories: frontends per endpoint %d..%d; the rings were expected to differ", lo, hi)
	} else {
		t.Logf("2 loops, half the fleet started before a change: frontends per endpoint %d..%d (mean 4)", lo, hi)
	}
}

// corput serve cancels discovery and shuts the gateway down at the same
// time, so a debounced update can land after the origins closed. It must
// not open pools (and connections) that nothing will close.
func TestApplyAfterShutdownOpensNothing(t *testing.T) {
	srvs := fastOrigins(t, 2)
	g := newGateway(t, xdsConfig("127.0.0.1:1", 1, ""), Options{})
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	err := g.Apply("app", []balance.Member{{Address: srvs[0].Addr(), Weight: 1}, {Address: srvs[1].Addr(), Weight: 1}})
	if err == nil {
		t.Error("Apply after shutdown succeeded; want an error saying the gateway is closed")
	}
	if pools := g.st().origins["app"].Loop(0).Pools(); len(pools) != 0 {
		t.Fatalf("a closed gateway holds %d pools for endpoints added after shutdown", len(pools))
	}
	if p, err := g.st().origins["app"].PoolFor(g.st().origins["app"].Loop(0), srvs[0].Addr()); err == nil {
		if _, err := p.Acquire(context.Background()); !errors.Is(err, pool.ErrClosed) {
			t.Fatalf("a request outliving shutdown got a pool: Acquire = %v, want pool.ErrClosed", err)
		}
	}
	for _, s := range srvs {
		if got := s.Stats().Connections.Accepted; got != 0 {
			t.Fatalf("a closed gateway opened %d connections to %s", got, s.Addr())
		}
	}
}

// What EDS says about an endpoint reaches the gateway: locality zone →
// zone, load_balancing_weight → weight (unset = 1), and an endpoint that is
// not HEALTHY or UNKNOWN is left out.
func TestXDSZoneWeightAndHealthReachTheGateway(t *testing.T) {
	srvs := fastOrigins(t, 4)
	cp := newControlPlane(t, "127.0.0.1:0")
	cp.publishEndpoints(t, "1",
		xdstest.Endpoint{Addr: srvs[0].Addr(), Zone: "z1", Weight: 3, Health: corev3.HealthStatus_HEALTHY},
		xdstest.Endpoint{Addr: srvs[1].Addr(), Zone: "z2", Health: corev3.HealthStatus_UNKNOWN},
		xdstest.Endpoint{Addr: srvs[2].Addr(), Zone: "z1", Weight: 5, Health: corev3.HealthStatus_UNHEALTHY},
		xdstest.Endpoint{Addr: srvs[3].Addr(), Zone: "z2", Weight: 2, Health: corev3.HealthStatus_DRAINING},
	)
	g := runGateway(t, xdsConfig(cp.Addr(), 1, "    balancer: {policy: round_robin}\n    slow_start: {window: 0s}\n"), Options{})
	waitReady(t, g)
	got := map[string]string{}
	for _, e := range adminOrigin(t, g).Endpoints {
		got[e.Address] = fmt.Sprintf("%s/%d", e.Zone, e.Weight)
	}
	want := map[string]string{srvs[0].Addr(): "z1/3", srvs[1].Addr(): "z2/1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("endpoints (zone/weight) %v, want %v", got, want)
	}
	c, closeIdle := client()
	defer closeIdle()
	getOK(t, c, g, 16)
	if n := servedBy(srvs); n[0] != 12 || n[1] != 4 || n[2] != 0 || n[3] != 0 {
		t.Fatalf("requests per origin %v: want 12 and 4 (weights 3:1), none to the unhealthy and draining ones", n)
	}
}
