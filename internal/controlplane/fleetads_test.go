package controlplane

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/waitfor"
)

// fleetClient is a gateway's fleet subscription: an ADS stream asking for
// the resource of type discovery.FleetType named by its node id. It
// records every response and ACKs it.
type fleetClient struct {
	*adsStream
	t    *testing.T
	node string

	mu        sync.Mutex
	responses int
	positions []discovery.Fleet // the positions received, in order
}

func dialFleet(t *testing.T, addr, node string) *fleetClient {
	t.Helper()
	c := &fleetClient{t: t, node: node}
	c.adsStream = openADS(t, addr, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: discovery.FleetType, ResourceNames: []string{node}}, c.answer)
	return c
}

// answer records the positions in resp and ACKs it.
func (c *fleetClient) answer(resp *discoveryv3.DiscoveryResponse) *discoveryv3.DiscoveryRequest {
	c.mu.Lock()
	c.responses++
	for _, a := range resp.GetResources() {
		f, err := discovery.FleetFromResource(a)
		if err != nil {
			c.t.Errorf("%s: a fleet resource the gateway would refuse: %v", c.node, err)
			continue
		}
		c.positions = append(c.positions, f)
	}
	c.mu.Unlock()
	return &discoveryv3.DiscoveryRequest{TypeUrl: discovery.FleetType, ResourceNames: []string{c.node},
		VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
}

// last is the last position received; ok is false before any.
func (c *fleetClient) last() (instance, size int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.positions) == 0 {
		return 0, 0, false
	}
	p := c.positions[len(c.positions)-1]
	return p.Instance, p.Size, true
}

// waitAt waits until the last position received is instance of size.
func (c *fleetClient) waitAt(instance, size int) {
	c.t.Helper()
	waitfor.Until(c.t, fmt.Sprintf("%s at instance %d of %d", c.node, instance, size), func() bool {
		i, s, ok := c.last()
		return ok && i == instance && s == size
	})
}

func (c *fleetClient) responseCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.responses
}

func (c *fleetClient) received() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.positions)
}

// newFleetFixture is a writer on a fake clock (for the grace) with an
// admin listener.
func newFleetFixture(t *testing.T) (*fixture, *clock.Fake) {
	f := newFixture(t, map[string][]string{"payments": endpoints(11001, 3)})
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f.opts.Clock = clk
	f.opts.Admin = "127.0.0.1:0"
	f.opts.Debounce = -1 // each join at once, in order (the join window: TestFleetJoinWindow)
	return f, clk
}

// waitConnected waits until the control plane sees node's fleet stream
// open (or closed), so that a grace is armed before the clock moves.
func waitConnected(t *testing.T, cp *ControlPlane, node string, connected bool) {
	t.Helper()
	waitfor.Until(t, fmt.Sprintf("%s connected=%v", node, connected), func() bool {
		for _, m := range cp.Fleet() {
			if m.Node == node {
				return m.Connected == connected
			}
		}
		return false
	})
}

func fleetNodes(cp *ControlPlane) []string {
	var out []string
	for _, m := range cp.Fleet() {
		out = append(out, m.Node)
	}
	return out
}

// Over gRPC: three gateways join in order and get instances 0, 1, 2, and
// each follows the size to 3; one back within the grace keeps its
// position; one away past the grace is compacted (the highest moves into
// its hole); the state file holds the slots; /admin/fleet lists them.
func TestFleetPositionsOverADS(t *testing.T) {
	f, clk := newFleetFixture(t)
	cp := f.start()
	gws := make([]*fleetClient, 3)
	for i := range gws {
		gws[i] = dialFleet(t, cp.Addr(), fmt.Sprintf("gw-%d", i))
		gws[i].waitAt(i, i+1)
	}
	for i, gw := range gws {
		gw.waitAt(i, 3)
	}
	st, _, err := LoadState(f.state)
	if err != nil || !slices.Equal(st.Fleet, []string{"gw-0", "gw-1", "gw-2"}) {
		t.Fatalf("the state file holds fleet %v (%v); want the three joins in order", st.Fleet, err)
	}

	// gw-1 goes and comes back within the grace: nothing changes.
	before := gws[0].received()
	gws[1].close()
	waitConnected(t, cp, "gw-1", false)
	clk.Advance(29 * time.Second)
	back := dialFleet(t, cp.Addr(), "gw-1")
	back.waitAt(1, 3)
	waitConnected(t, cp, "gw-1", true)
	clk.Advance(time.Hour)
	if n := gws[0].received(); n != before || value(cp.Metrics().FleetMoves) != 0 {
		t.Fatalf("a reconnect within the grace sent gw-0 %d positions and moved %v gateways; want none", n-before, value(cp.Metrics().FleetMoves))
	}

	// gw-1 away past the grace: gw-2 moves into 1, the size is 2.
	back.close()
	waitConnected(t, cp, "gw-1", false)
	clk.Advance(30 * time.Second)
	gws[2].waitAt(1, 2)
	gws[0].waitAt(0, 2)
	if v := value(cp.Metrics().FleetMoves); v != 1 {
		t.Fatalf("fleet_moves_total %v, want 1", v)
	}
	if v := value(cp.Metrics().FleetSize); v != 2 {
		t.Fatalf("fleet_size %v, want 2", v)
	}
	if got := cp.State().Fleet; !slices.Equal(got, []string{"gw-0", "gw-2"}) {
		t.Fatalf("state fleet %v after the compaction, want [gw-0 gw-2]", got)
	}
	if _, ok := cp.server.FleetPosition("gw-1"); ok {
		t.Fatal("the released node's resource is still served")
	}

	resp, err := http.Get("http://" + cp.AdminAddr() + "/admin/fleet")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var listed []FleetMember
	if err := json.NewDecoder(resp.Body).Decode(&listed); err != nil {
		t.Fatal(err)
	}
	want := []FleetMember{{Node: "gw-0", Instance: 0, Connected: true}, {Node: "gw-2", Instance: 1, Connected: true}}
	if !slices.Equal(listed, want) {
		t.Fatalf("/admin/fleet = %+v, want %+v", listed, want)
	}
}

// The highest away past the grace: the size shrinks, nobody moves.
func TestFleetHighestLeavesOverADS(t *testing.T) {
	f, clk := newFleetFixture(t)
	cp := f.start()
	a := dialFleet(t, cp.Addr(), "gw-a")
	a.waitAt(0, 1)
	b := dialFleet(t, cp.Addr(), "gw-b")
	a.waitAt(0, 2)
	b.waitAt(1, 2)
	b.close()
	waitConnected(t, cp, "gw-b", false)
	clk.Advance(30 * time.Second)
	a.waitAt(0, 1)
	if v := value(cp.Metrics().FleetMoves); v != 0 {
		t.Fatalf("fleet_moves_total %v, want 0", v)
	}
}

// A control plane restarted on the same state file: a gateway that
// reconnects gets its old position; one that never does is compacted
// after the grace.
func TestFleetPositionsSurviveARestart(t *testing.T) {
	f, clk := newFleetFixture(t)
	cp := f.start()
	gws := make([]*fleetClient, 3)
	for i := range gws { // one at a time: they join in the order they come
		gws[i] = dialFleet(t, cp.Addr(), fmt.Sprintf("gw-%d", i))
		gws[i].waitAt(i, i+1)
	}
	gws[0].waitAt(0, 3)
	cp.Close()
	for _, gw := range gws {
		gw.close()
	}
	cp = f.start()
	if got := fleetNodes(cp); !slices.Equal(got, []string{"gw-0", "gw-1", "gw-2"}) {
		t.Fatalf("restored fleet %v, want the persisted one", got)
	}
	// gw-0 and gw-2 come back; gw-1 never does.
	g0, g2 := dialFleet(t, cp.Addr(), "gw-0"), dialFleet(t, cp.Addr(), "gw-2")
	g0.waitAt(0, 3)
	g2.waitAt(2, 3)
	waitConnected(t, cp, "gw-0", true)
	waitConnected(t, cp, "gw-2", true)
	clk.Advance(30 * time.Second)
	g2.waitAt(1, 2)
	g0.waitAt(0, 2)
	if got := cp.State().Fleet; !slices.Equal(got, []string{"gw-0", "gw-2"}) {
		t.Fatalf("state fleet %v, want [gw-0 gw-2]", got)
	}
}

// A damaged fleet in the state file is refused at start, not written
// over.
func TestDamagedFleetIsRefused(t *testing.T) {
	for name, fleet := range map[string]string{
		"duplicate": `["gw-0", "gw-1", "gw-0"]`,
		"empty id":  `["gw-0", ""]`,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, map[string][]string{"payments": endpoints(11001, 3)})
			content := `{"format": 1, "generation": 3, "origins": {}, "fleet": ` + fleet + `}`
			if err := os.WriteFile(f.state, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			cp, err := Start(f.opts)
			if err == nil {
				cp.Close()
				t.Fatal("started over a damaged fleet")
			}
			if !IsConfigError(err) || !strings.Contains(err.Error(), "fleet[") {
				t.Errorf("not an input error naming the fleet: %v", err)
			}
			if data, _ := os.ReadFile(f.state); string(data) != content {
				t.Fatal("the damaged state file was written over")
			}
		})
	}
}

// A follower assigns no fleet positions: a gateway asking it gets none
// (its EDS on the same stream is unaffected), the follower says once per
// node that positions come from the writer, and its /admin/fleet refuses.
func TestFollowerServesNoFleetPosition(t *testing.T) {
	f, _ := newFleetFixture(t)
	writer := f.start()
	dialFleet(t, writer.Addr(), "gw-0").waitAt(0, 1)
	logger, logs := testlog.New(slog.LevelDebug)
	fl, err := Start(Options{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", StatePath: f.state, Follow: true,
		FollowInterval: 20 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fl.Close)
	asking := []*fleetClient{dialFleet(t, fl.Addr(), "gw-0"), dialFleet(t, fl.Addr(), "gw-0")}
	eds := dialADS(t, fl.Addr(), "gw-1", []string{"payments"}, nil)
	if r := eds.wait(1); r.clusters["payments"] == nil {
		t.Fatal("the follower's EDS does not serve payments")
	}
	waitfor.Until(t, "the follower to log that positions come from the writer", func() bool {
		return strings.Contains(logs.String(), "fleet positions come from the writer")
	})
	for _, c := range asking {
		// The first answer to a subscription holds what the cache has for
		// it: nothing.
		waitfor.Until(t, "the follower's answer", func() bool { return c.responseCount() > 0 })
		c.close()
		if n := c.received(); n != 0 {
			t.Fatalf("a follower served %d fleet positions", n)
		}
	}
	if n := strings.Count(logs.String(), "fleet positions come from the writer"); n != 1 {
		t.Fatalf("logged %d times for one node, want once", n)
	}
	if _, ok := fl.server.FleetPosition("gw-0"); ok || fl.Fleet() != nil {
		t.Fatal("a follower holds fleet positions")
	}
	resp, err := http.Get("http://" + fl.AdminAddr() + "/admin/fleet")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "ask the writer") {
		t.Fatalf("a follower's /admin/fleet = %d %q, want 404 naming the writer", resp.StatusCode, body)
	}
	if st, _, err := LoadState(f.state); err != nil || !slices.Equal(st.Fleet, []string{"gw-0"}) {
		t.Fatalf("the writer's state fleet = %v (%v), want [gw-0]", st.Fleet, err)
	}
}

// The gateway's own client (discovery.FleetXDS) follows its position
// from the writer: its join, the size growing as another joins, and a
// reconnect after a control-plane restart at the same position with no
// new emission.
func TestGatewayFleetClientFollowsItsPosition(t *testing.T) {
	f, _ := newFleetFixture(t)
	cp := f.start()
	r := runFleetXDS(t, discovery.XDSConfig{Server: cp.Addr(), NodeID: "gw-x"})
	x, emitted := r.x, r.emitted
	at := func(n, instance, size int) {
		t.Helper()
		waitfor.Until(t, fmt.Sprintf("emission %d: instance %d of %d", n, instance, size), func() bool {
			e := emitted()
			return len(e) >= n && e[n-1].Instance == instance && e[n-1].Size == size
		})
	}
	at(1, 0, 1)
	dialFleet(t, cp.Addr(), "gw-y").waitAt(1, 2)
	at(2, 0, 2)

	cp.Close()
	waitfor.Until(t, "the client to notice the control plane is gone", func() bool { return x.Err() != nil })
	cp = f.start()
	waitfor.Until(t, "the client to take the restarted control plane's response", func() bool { return x.Err() == nil })
	waitConnected(t, cp, "gw-x", true)
	if e := emitted(); len(e) != 2 {
		t.Fatalf("the client emitted %v; a restart must not move it", e)
	}
}

// fleetRunner runs the gateway's fleet client (discovery.FleetXDS) and
// records every position it emits.
type fleetRunner struct {
	x *discovery.FleetXDS
	*emissions[discovery.Fleet]
}

func runFleetXDS(t *testing.T, cfg discovery.XDSConfig) *fleetRunner {
	t.Helper()
	x, err := discovery.NewFleetXDS(clientConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return &fleetRunner{x: x, emissions: record(t, x.Run)}
}

// positions are the emitted positions as {instance, size}.
func (r *fleetRunner) positions() [][2]int {
	var out [][2]int
	for _, f := range r.emitted() {
		out = append(out, [2]int{f.Instance, f.Size})
	}
	return out
}
