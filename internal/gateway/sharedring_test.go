package gateway

// Shared ring indices (docs/discovery.md "Shared ring indices"): a control
// plane sends every endpoint's ring index in EDS metadata (or a file
// carries ring_index:), and gateways whatever their history place the
// origin by it. The control plane here is a subset.Ring standing in for
// `corput control-plane`, published through a real go-control-plane
// server to gateways running corput's own xDS client.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/controlplane"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/discovery/xdstest"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/waitfor"
)

// ringPublisher is the control plane's side: a ring over the origin's
// endpoints, evolving by the Ring's rules, published to cluster "app"
// with (shared) or without (!shared) its indices and subset count.
type ringPublisher struct {
	cp      controlPlane
	ring    *subset.Ring
	shared  bool
	version int
}

// newRingPublisher builds the control plane's ring over addrs, sized for a
// fleet of the given frontends.
func newRingPublisher(t testing.TB, cp controlPlane, fleet subset.Fleet, shared bool, addrs []string) *ringPublisher {
	t.Helper()
	r, err := subset.NewRing(subset.Config{Origin: "app", Fleet: fleet}, addrs)
	if err != nil {
		t.Fatal(err)
	}
	return &ringPublisher{cp: cp, ring: r, shared: shared}
}

// publish sends the ring's current membership as a new version.
func (p *ringPublisher) publish(t testing.TB) {
	t.Helper()
	p.version++
	p.cp.publishEndpoints(t, fmt.Sprint(p.version), ringEndpoints(p.ring.Indices(), p.ring.Subsets(), p.shared)...)
}

// ringEndpoints is an EDS membership of the given indices, healthy, with
// the indices and count in corput's metadata when shared.
func ringEndpoints(indices map[string]int, subsets int, shared bool) []xdstest.Endpoint {
	var eps []xdstest.Endpoint
	for _, a := range slices.Sorted(maps.Keys(indices)) {
		e := xdstest.Endpoint{Addr: a, Zone: "z1", Health: corev3.HealthStatus_HEALTHY}
		if shared {
			e.Metadata = discovery.RingMetadata(indices[a], subsets)
		}
		eps = append(eps, e)
	}
	return eps
}

// addrs is the ring's membership, sorted.
func (p *ringPublisher) addrs() []string { return slices.Sorted(maps.Keys(p.ring.Indices())) }

// xdsFleetMember is one gateway of a fleet following cluster "app" on an
// xDS server through RunDiscovery. It is not started (no listener) and its
// pools do not pre-warm, so the endpoints are never dialled.
type xdsFleetMember struct {
	g    *Gateway
	stop func()
}

func startXDSFleetMember(t testing.TB, server string, instance, size, loops int) *xdsFleetMember {
	t.Helper()
	g := newGateway(t, xdsFleetConfig(server, instance, size, loops), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- g.RunDiscovery(ctx) }()
	var once sync.Once
	m := &xdsFleetMember{g: g}
	m.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-ran; err != nil {
				t.Errorf("RunDiscovery: %v", err)
			}
			g.Close()
		})
	}
	t.Cleanup(m.stop)
	return m
}

// xdsFleetConfig is the configuration of an xDS fleet member.
func xdsFleetConfig(server string, instance, size, loops int) string {
	return fleetConfig(instance, size, loops, "debounce: 0s",
		fmt.Sprintf("discovery: {type: xds, server: %q, cluster: app, node_id: %s}", server, xdsNode))
}

// TestAFleetResizeKeepsTheSharedRing: a gateway placed by the control
// plane's shared indices, reloaded from instance 0 of 1 to instance 1 of
// 4, holds the control plane's ring at the count the new fleet allows
// (2 loops × 1 gateway capped the ring's 4 subsets at 2), placed shared,
// and the subsets a gateway started there holds. The control plane's ring
// has by then had endpoints replaced, so a ring rebuilt from the current
// members alone would differ.
func TestAFleetResizeKeepsTheSharedRing(t *testing.T) {
	const loops = 2
	addrs := fakeAddrs(205)
	cp := newControlPlane(t, "127.0.0.1:0")
	pub := newRingPublisher(t, cp, subset.Fleet{Gateways: 4, Loops: loops}, true, addrs[:200])
	pub.publish(t)
	m := startXDSFleetMember(t, cp.Addr(), 0, 1, loops)
	waitFleetHolds(t, []*xdsFleetMember{m}, pub.addrs())
	if _, err := pub.ring.Sync(addrs[5:]); err != nil {
		t.Fatal(err)
	}
	pub.publish(t)
	waitFleetHolds(t, []*xdsFleetMember{m}, pub.addrs())
	if s := snapshotOf(m.g).Subsets(); s != 2 || pub.ring.Snapshot().Subsets() != 4 {
		t.Fatalf("one gateway of 2 loops holds %d subsets of the control plane's %d; want 2 of 4", s, pub.ring.Snapshot().Subsets())
	}

	cfg, err := config.Parse([]byte(xdsFleetConfig(cp.Addr(), 1, 4, loops)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if !sameRing(snapshotOf(m.g), pub.ring.Snapshot()) {
		t.Errorf("after the resize the gateway holds another ring than the control plane's (%d subsets)", snapshotOf(m.g).Subsets())
	}
	if got := m.g.Origins().([]cluster.OriginView)[0].Placement; got != cluster.PlacementShared {
		t.Errorf("after the resize the placement is %q, want shared", got)
	}
	fresh := startXDSFleetMember(t, cp.Addr(), 1, 4, loops)
	waitFleetHolds(t, []*xdsFleetMember{fresh}, pub.addrs())
	if got, want := sortedSubsets(m.g), sortedSubsets(fresh.g); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("after the resize the loops' subsets differ from those of a gateway started at instance 1 of 4")
	}
}

// holds reports whether the gateway's placement of origin app has exactly
// want (sorted) as its endpoints.
func holds(g *Gateway, want []string) bool {
	var got []string
	for _, e := range snapshotOf(g).Endpoints() {
		got = append(got, e.Address)
	}
	slices.Sort(got)
	return slices.Equal(got, want)
}

func waitFleetHolds(t testing.TB, fleet []*xdsFleetMember, want []string) {
	t.Helper()
	for i, m := range fleet {
		waitfor.Until(t, fmt.Sprintf("gateway %d to apply the membership", i), func() bool { return holds(m.g, want) })
	}
}

// coverage is how many frontends (gateway, loop) use each endpoint, from
// every loop's subset as /admin/origins reports it.
func coverage(fleet []*xdsFleetMember, addrs []string) (lo, hi int, mean float64) {
	uses := map[string]int{}
	for _, m := range fleet {
		for _, s := range sortedSubsets(m.g) {
			for _, a := range s {
				uses[a]++
			}
		}
	}
	lo, hi, total := len(fleet)*64, 0, 0
	for _, a := range addrs {
		lo, hi, total = min(lo, uses[a]), max(hi, uses[a]), total+uses[a]
	}
	return lo, hi, float64(total) / float64(len(addrs))
}

// changedSubsets counts the ring subsets whose members differ between two
// snapshots of one origin with the same subset count.
func changedSubsets(t testing.TB, old, cur *subset.Snapshot) int {
	t.Helper()
	if old.Subsets() != cur.Subsets() {
		t.Fatalf("the subset count changed %d → %d", old.Subsets(), cur.Subsets())
	}
	n := 0
	for j := range old.Subsets() {
		if !slices.Equal(sortedCopyOf(old.Subset(j)), sortedCopyOf(cur.Subset(j))) {
			n++
		}
	}
	return n
}

func sortedCopyOf(s []string) []string { return slices.Sorted(slices.Values(s)) }

// sameRing reports whether two snapshots hold the same endpoints at the
// same indices with the same subset count.
func sameRing(a, b *subset.Snapshot) bool {
	return a.Subsets() == b.Subsets() && slices.Equal(a.Endpoints(), b.Endpoints())
}

// The fleet of docs/discovery.md's "Ring history": 8 gateways × 2 loops in
// front of 200 endpoints (S = 4), all following one real xDS server; 5
// endpoints are replaced and then half the fleet restarts. Without shared
// indices the two halves hold differently ordered rings and frontends per
// endpoint spread (0..8 in the docs' static run); with the control plane's
// indices and subset count every gateway holds the control plane's ring and
// every endpoint has exactly 4 frontends. Then one endpoint is added and
// one removed: on every gateway at most two subsets change, and with
// shared indices every gateway still holds the same ring.
func TestSharedIndicesFleetCoverageAcrossRingHistories(t *testing.T) {
	const size, loops = 8, 2
	addrs := fakeAddrs(207)
	start, final := addrs[:200], addrs[5:205]
	for _, shared := range []bool{false, true} {
		mode := map[bool]string{false: "without shared indices", true: "with shared indices"}[shared]
		cp := newControlPlane(t, "127.0.0.1:0")
		pub := newRingPublisher(t, cp, subset.Fleet{Gateways: size, Loops: loops}, shared, start)
		pub.publish(t)
		fleet := make([]*xdsFleetMember, size)
		for i := range fleet {
			fleet[i] = startXDSFleetMember(t, cp.Addr(), i, size, loops)
		}
		waitFleetHolds(t, fleet, pub.addrs())

		// 5 endpoints replaced, then half the fleet restarts.
		if _, err := pub.ring.Sync(final); err != nil {
			t.Fatal(err)
		}
		pub.publish(t)
		waitFleetHolds(t, fleet, pub.addrs())
		for i := 1; i < size; i += 2 {
			fleet[i].stop()
			fleet[i] = startXDSFleetMember(t, cp.Addr(), i, size, loops)
		}
		waitFleetHolds(t, fleet, pub.addrs())

		lo, hi, mean := coverage(fleet, final)
		t.Logf("%s: 8 gateways × 2 loops, 200 endpoints (S = %d), half restarted after 5 were replaced: frontends per endpoint %d..%d (mean %.1f)",
			mode, snapshotOf(fleet[0].g).Subsets(), lo, hi, mean)
		switch {
		case shared && (lo != 4 || hi != 4):
			t.Errorf("%s: frontends per endpoint %d..%d; want exactly 4 each", mode, lo, hi)
		case !shared && lo == hi:
			t.Errorf("%s: frontends per endpoint %d..%d; the two halves' rings were expected to differ", mode, lo, hi)
		}
		for i, m := range fleet {
			if got := m.g.Origins().([]cluster.OriginView)[0].Placement; got != map[bool]string{false: "local", true: "shared"}[shared] {
				t.Errorf("%s: gateway %d reports placement %q", mode, i, got)
			}
			if shared && !sameRing(snapshotOf(m.g), pub.ring.Snapshot()) {
				t.Errorf("%s: gateway %d holds another ring than the control plane's", mode, i)
			}
		}

		// One endpoint added, then one removed (the hole filled by the
		// highest index): at most two subsets change on every gateway.
		for _, step := range []string{"add", "remove"} {
			before := make([]*subset.Snapshot, size)
			for i, m := range fleet {
				before[i] = snapshotOf(m.g)
			}
			if step == "add" {
				_, err := pub.ring.Add(addrs[205])
				if err != nil {
					t.Fatal(err)
				}
			} else {
				victim := pub.ring.Snapshot().Endpoints()[17].Address // low index: the highest moves into its hole
				if _, err := pub.ring.Remove(victim); err != nil {
					t.Fatal(err)
				}
			}
			pub.publish(t)
			waitFleetHolds(t, fleet, pub.addrs())
			var changed []int
			for i, m := range fleet {
				n := changedSubsets(t, before[i], snapshotOf(m.g))
				changed = append(changed, n)
				if n > 2 || n == 0 {
					t.Errorf("%s, one endpoint %s: %d subsets changed on gateway %d; want 1 or 2", mode, step, n, i)
				}
				if shared && !sameRing(snapshotOf(m.g), pub.ring.Snapshot()) {
					t.Errorf("%s, after the %s: gateway %d holds another ring than the control plane's", mode, step, i)
				}
			}
			t.Logf("%s, one endpoint %s: subsets changed per gateway %v", mode, step, changed)
		}
		for _, m := range fleet {
			m.stop()
		}
		cp.Stop()
	}
}

// placementGauge is corput_subset_placement of origin app for mode.
func placementGauge(t testing.TB, g *Gateway, mode string) float64 {
	t.Helper()
	return scrapeFamilies(t, g).sum("corput_subset_placement", "origin", "app", "mode", mode)
}

func checkPlacement(t testing.TB, g *Gateway, want string) {
	t.Helper()
	other := map[string]string{"shared": "local", "local": "shared"}[want]
	if v := adminOrigin(t, g); v.Placement != want {
		t.Fatalf("/admin/origins placement %q, want %q", v.Placement, want)
	}
	if in, out := placementGauge(t, g, want), placementGauge(t, g, other); in != 1 || out != 0 {
		t.Fatalf("corput_subset_placement{mode=%q} = %v and {mode=%q} = %v; want 1 and 0", want, in, other, out)
	}
}

// The first indexed membership switches an origin from local to shared
// placement: a re-subset through the same per-loop diff as any change, so
// only loops whose subset changed open or drain pools, and an endpoint
// that stays in a loop's subset keeps its connection. /admin/origins and
// corput_subset_placement say which placement is in use. A membership
// that comes without any index afterwards is accepted (docs/decisions.md):
// the placement goes local again, continuing from the shared ring, so the
// switch back moves nothing.
func TestSharedIndicesSwitchReSubsetsOnlyChangedLoops(t *testing.T) {
	srvs := fastOrigins(t, 8)
	cp := newControlPlane(t, "127.0.0.1:0")
	// 4 loops, subsets of at most 4: S = 2, loops 0 and 2 share a subset.
	g := runGateway(t, xdsConfig(cp.Addr(), 4, "    debounce: 0s\n    subset: {size: 4}\n    pool: {prewarm: 1}\n"), Options{})
	addrs := addrsOfServers(srvs)
	cp.publishEndpoints(t, "1", ringEndpoints(indexOf(addrs), 0, false)...)
	waitReady(t, g)
	checkPlacement(t, g, "local")
	local := snapshotOf(g)

	// The control plane's ring over the same endpoints, shuffled its own
	// way: a different order from the gateway's (sorted, as first added).
	r, err := subset.NewRing(subset.Config{Origin: "app", Sizing: subset.FixedSize(4), Fleet: subset.Fleet{Gateways: 1, Loops: 4}}, addrs)
	if err != nil {
		t.Fatal(err)
	}
	created0, acc0 := createdByLoop(t, g), acceptedBy(srvs)
	closed0 := scrapeFamilies(t, g).sum("corput_upstream_connections_closed_total", "origin", "app")
	cp.publishEndpoints(t, "2", ringEndpoints(r.Indices(), r.Subsets(), true)...)
	waitfor.Until(t, "the shared placement", func() bool { return sameRing(snapshotOf(g), r.Snapshot()) })
	checkPlacement(t, g, "shared")

	changes := subset.Diff(local, snapshotOf(g), 0)
	if len(changes) == 0 {
		t.Fatal("the control plane's ring places the endpoints as the gateway did: the test shows nothing")
	}
	gained, lost := make([]int, 4), 0
	gainedBy := map[string]int{}
	for _, c := range changes {
		gained[c.Loop] += len(c.Added)
		lost += len(c.Removed)
		for _, a := range c.Added {
			gainedBy[a]++
		}
	}
	waitfor.Until(t, "the gained pools to pre-warm", func() bool {
		acc := acceptedBy(srvs)
		for _, a := range addrs {
			if acc[a]-acc0[a] != int64(gainedBy[a]) {
				return false
			}
		}
		return true
	})
	created1 := createdByLoop(t, g)
	for l := range created1 {
		if d := created1[l] - created0[l]; d != float64(gained[l]) {
			t.Errorf("loop %d created %v connections in the switch; subset.Diff says it gained %d endpoints", l, d, gained[l])
		}
	}
	waitfor.Until(t, "the lost pools to close", func() bool {
		return scrapeFamilies(t, g).sum("corput_upstream_connections_closed_total", "origin", "app")-closed0 == float64(lost)
	})
	t.Logf("local → shared: %d loops changed, %v connections created per loop, %d closed; every other pool kept", len(changes), diffs(created0, created1), lost)
	c, closeIdle := client()
	defer closeIdle()
	getOK(t, c, g, 8)

	// The same endpoints without indices: local again, nothing moves.
	before := snapshotOf(g)
	cp.publishEndpoints(t, "3", ringEndpoints(r.Indices(), 0, false)...)
	waitfor.Until(t, "the unindexed membership to apply", func() bool { return adminOrigin(t, g).MembershipChanges == 3 })
	checkPlacement(t, g, "local")
	if !sameRing(before, snapshotOf(g)) {
		t.Fatal("a membership without indices reshuffled the ring it continued from")
	}
	if created2 := createdByLoop(t, g); !slices.Equal(created1, created2) {
		t.Fatalf("connections created per loop %v → %v when the placement went local; want none", created1, created2)
	}
}

// indexOf gives addrs the indices of their order.
func indexOf(addrs []string) map[string]int {
	out := map[string]int{}
	for i, a := range addrs {
		out[a] = i
	}
	return out
}

// Refused updates, over a real xDS server and over a watched file: a partly
// indexed update and one with duplicate indices are NACKed (xDS) or kept
// out (file); the last good set keeps serving, requests are still answered
// and the placement does not change — in particular it never goes local.
func TestSharedIndicesRefusedUpdatesKeepTheLastGoodSet(t *testing.T) {
	srvs := fastOrigins(t, 5)
	addrs := serverAddrs(srvs)
	good := indexOf(addrs[:4])
	// A partly indexed update: the fifth endpoint has no index; and one
	// with duplicate indices: the fifth holds index 1 too.
	partly := func(eps []xdstest.Endpoint) []xdstest.Endpoint {
		return append(eps, xdstest.Endpoint{Addr: addrs[4], Zone: "z1", Health: corev3.HealthStatus_HEALTHY})
	}
	duplicate := func(eps []xdstest.Endpoint) []xdstest.Endpoint {
		return append(eps, xdstest.Endpoint{Addr: addrs[4], Zone: "z1", Health: corev3.HealthStatus_HEALTHY, Metadata: discovery.RingMetadata(1, 2)})
	}
	refusals := []struct {
		name  string
		eps   func([]xdstest.Endpoint) []xdstest.Endpoint
		yaml  string
		cause string
	}{
		{"partly indexed", partly, fmt.Sprintf("  - {address: %q, zone: z1}\n", addrs[4]), "ring_index is set on 4 of 5 endpoints"},
		{"duplicate indices", duplicate, fmt.Sprintf("  - {address: %q, zone: z1, ring_index: 1, ring_subsets: 2}\n", addrs[4]), "ring_index 1 is held by both"},
	}
	const extra = "    debounce: 0s\n    subset: {size: 2}\n    balancer: {policy: round_robin}\n    slow_start: {window: 0s}\n"

	// checkServing: the last good set answers every request; the fifth
	// endpoint gets none, and the placement is the one kept.
	checkServing := func(t *testing.T, g *Gateway, kept *subset.Snapshot) {
		t.Helper()
		c, closeIdle := client()
		defer closeIdle()
		before := servedBy(srvs)
		getOK(t, c, g, 8)
		after := servedBy(srvs)
		if after[4] != before[4] {
			t.Fatalf("the refused endpoint got %d requests", after[4]-before[4])
		}
		if !sameRing(kept, snapshotOf(g)) {
			t.Fatal("a refused update changed the placement")
		}
		checkPlacement(t, g, "shared")
	}

	t.Run("xds", func(t *testing.T) {
		cp := newControlPlane(t, "127.0.0.1:0")
		cp.publishEndpoints(t, "1", ringEndpoints(good, 2, true)...)
		g := runGateway(t, xdsConfig(cp.Addr(), 2, extra), Options{})
		waitReady(t, g)
		checkPlacement(t, g, "shared")
		kept := snapshotOf(g)
		for i, r := range refusals {
			version := fmt.Sprint(i + 2)
			n := len(cp.NACKs())
			cp.publishEndpoints(t, version, r.eps(ringEndpoints(good, 2, true))...)
			waitfor.Until(t, "the NACK of the "+r.name+" update", func() bool {
				for _, req := range cp.NACKs()[n:] {
					if strings.Contains(req.GetErrorDetail().GetMessage(), r.cause) {
						return true
					}
				}
				return false
			})
			if v := adminOrigin(t, g); !strings.Contains(v.SourceError, r.cause) || v.MembershipChanges != 1 {
				t.Fatalf("%s: source_error %q, %d changes; want the cause and the first set only", r.name, v.SourceError, v.MembershipChanges)
			}
			checkServing(t, g, kept)
		}
		good5 := indexOf([]string{addrs[1], addrs[0], addrs[2], addrs[3], addrs[4]})
		cp.publishEndpoints(t, "9", ringEndpoints(good5, 2, true)...)
		waitfor.Until(t, "the valid update", func() bool { return snapshotOf(g).Len() == 5 })
		if v := adminOrigin(t, g); v.SourceError != "" || v.Placement != "shared" {
			t.Fatalf("after a valid update: source_error %q, placement %q", v.SourceError, v.Placement)
		}
	})

	t.Run("file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "app.yaml")
		goodYAML := "endpoints:\n"
		for _, a := range addrs[:4] {
			goodYAML += fmt.Sprintf("  - {address: %q, zone: z1, ring_index: %d, ring_subsets: 2}\n", a, good[a])
		}
		writeFileAtomic(t, path, goodYAML)
		clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		g := runGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 2
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    discovery: {type: file, path: %q}
`, path)+extra, Options{Clock: clk})
		waitReady(t, g)
		checkPlacement(t, g, "shared")
		kept := snapshotOf(g)
		for _, r := range refusals {
			writeFileAtomic(t, path, goodYAML+r.yaml)
			clk.Advance(time.Second)
			if v := adminOrigin(t, g); !strings.Contains(v.SourceError, r.cause) || !strings.Contains(v.SourceError, path) || v.MembershipChanges != 1 {
				t.Fatalf("%s: source_error %q, %d changes; want the file, the cause and the first set only", r.name, v.SourceError, v.MembershipChanges)
			}
			checkServing(t, g, kept)
		}
		writeFileAtomic(t, path, goodYAML+fmt.Sprintf("  - {address: %q, zone: z1, ring_index: 4, ring_subsets: 2}\n", addrs[4]))
		clk.Advance(time.Second)
		if v := adminOrigin(t, g); v.SourceError != "" || v.Placement != "shared" || len(v.Endpoints) != 5 {
			t.Fatalf("after a valid file: source_error %q, placement %q, %d endpoints", v.SourceError, v.Placement, len(v.Endpoints))
		}
	})
}

// Indices reach only ringsteady: an origin with another algorithm ignores
// them (placed locally, with a warning in the log) and serves as before.
func TestSharedIndicesIgnoredByOtherAlgorithms(t *testing.T) {
	srvs := fastOrigins(t, 4)
	cp := newControlPlane(t, "127.0.0.1:0")
	addrs := addrsOfServers(srvs)
	cp.publishEndpoints(t, "1", ringEndpoints(indexOf(addrs), 0, true)...)
	logger, logs := testlog.New(slog.LevelInfo)
	g := runGateway(t, xdsConfig(cp.Addr(), 2, "    subset: {algorithm: rendezvous, size: 2}\n"), Options{Logger: logger})
	waitReady(t, g)
	checkPlacement(t, g, "local")
	if !strings.Contains(logs.String(), "shared ring indices ignored") {
		t.Fatalf("no warning that the indices are ignored:\n%s", logs.String())
	}
	c, closeIdle := client()
	defer closeIdle()
	getOK(t, c, g, 4)
}

// A reload that changes the subset sizing builds a new placement; an origin
// placed by shared indices keeps them on it, so every gateway reloaded
// alike holds the same new ring: the same indices, the new count. A reload
// to another algorithm ignores them, and one back to ringsteady places
// them again.
func TestSharedIndicesSurviveReloadsOfTheSubsetSettings(t *testing.T) {
	srvs := fastOrigins(t, 8)
	cp := newControlPlane(t, "127.0.0.1:0")
	addrs := addrsOfServers(srvs)
	r, err := subset.NewRing(subset.Config{Origin: "app", Sizing: subset.FixedSize(4), Fleet: subset.Fleet{Gateways: 1, Loops: 4}}, addrs)
	if err != nil {
		t.Fatal(err)
	}
	// Not the order a fresh ring of these endpoints would have: the
	// control plane's history differs from any gateway's start.
	reversed := map[string]int{}
	for i, a := range addrs {
		reversed[a] = len(addrs) - 1 - i
	}
	if _, err := r.Place(reversed, 0); err != nil {
		t.Fatal(err)
	}
	cp.publishEndpoints(t, "1", ringEndpoints(r.Indices(), r.Subsets(), true)...)
	text := xdsConfig(cp.Addr(), 4, "    subset: {size: 4}\n    pool: {prewarm: 0}\n")
	logger, logs := testlog.New(slog.LevelInfo)
	g := runGateway(t, text, Options{Logger: logger})
	waitReady(t, g)
	if !sameRing(snapshotOf(g), r.Snapshot()) || snapshotOf(g).Subsets() != 2 {
		t.Fatalf("before the reload: not the control plane's ring of 2 subsets")
	}
	cfg, err := config.Parse([]byte(strings.Replace(text, "size: 4", "size: 2", 1)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	got := snapshotOf(g)
	if got.Subsets() != 4 {
		t.Fatalf("after the reload: %d subsets", got.Subsets())
	}
	for i, e := range got.Endpoints() {
		if want, _ := r.Index(e.Address); want != i {
			t.Fatalf("after the reload %s has index %d, the control plane's is %d", e.Address, i, want)
		}
	}
	checkPlacement(t, g, "shared")

	// To an algorithm that cannot place by them, and back: the indices
	// are ignored meanwhile (with a warning) and placed again after.
	reload := func(text string) {
		reloadText(t, g, text)
	}
	reload(strings.Replace(text, "size: 4", "algorithm: rendezvous, size: 4", 1))
	checkPlacement(t, g, "local")
	if log := logs.String(); !strings.Contains(log, "shared ring indices ignored") || strings.Contains(log, "came without shared ring indices") {
		t.Fatalf("the log does not say the indices are ignored by the algorithm:\n%s", log)
	}
	reload(text)
	checkPlacement(t, g, "shared")
	if !sameRing(snapshotOf(g), r.Snapshot()) {
		t.Fatal("back on ringsteady, the gateway does not hold the control plane's ring")
	}
}

// With `corput control-plane` itself (internal/controlplane, a source file,
// its state file) in front of two gateways that started at different
// memberships: both hold the control plane's ring, so every endpoint has
// exactly F/S = 1 frontend. The control plane then restarts on the same
// state and address mid-test: no ring index changes, no gateway applies a
// membership or re-subsets, and the origins accept 0 new connections;
// requests are answered throughout.
func TestControlPlaneRestartMovesNothingOnTheGateways(t *testing.T) {
	srvs := fastOrigins(t, 12)
	dir := t.TempDir()
	source, state := filepath.Join(dir, "origins.yaml"), filepath.Join(dir, "state.json")
	writeSource := func(srvs []*testorigin.Server) {
		text := "origins:\n  - name: app\n    subset: {size: 4}\n    endpoints:\n"
		for _, s := range srvs {
			text += fmt.Sprintf("      - {address: %q, zone: z1}\n", s.Addr())
		}
		writeFileAtomic(t, source, text)
	}
	startCP := func(listen string) *controlplane.ControlPlane {
		t.Helper()
		cp, err := controlplane.Start(controlplane.Options{Listen: listen, StatePath: state, Source: source, Debounce: -1,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cp.Close)
		return cp
	}
	writeSource(srvs[:11])
	cp := startCP("127.0.0.1:0")
	gateway := func(instance int) *Gateway {
		return runGateway(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 2
fleet: {instance: %d, size: 2}
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    discovery: {type: xds, server: %q, cluster: app, node_id: gw-%d}
    debounce: 0s
    subset: {size: 4}
    pool: {prewarm: 1}
`, instance, cp.Addr(), instance), Options{})
	}
	g0 := gateway(0)
	waitReady(t, g0)
	// One endpoint replaced; then the second gateway starts, from the
	// membership as it is now.
	writeSource(srvs[1:])
	waitfor.Until(t, "gateway 0 to follow the change", func() bool { return holds(g0, addrsOfServers(srvs[1:])) })
	waitReady(t, g0)
	g1 := gateway(1)
	waitReady(t, g1)
	fleet := []*Gateway{g0, g1}
	uses := map[string]int{}
	for i, g := range fleet {
		checkPlacement(t, g, "shared")
		if !sameRing(snapshotOf(g), snapshotOf(g0)) {
			t.Fatalf("gateway %d holds another ring than gateway 0", i)
		}
		for _, s := range sortedSubsets(g) {
			for _, a := range s {
				uses[a]++
			}
		}
	}
	for _, s := range srvs[1:] {
		if uses[s.Addr()] != 1 {
			t.Fatalf("endpoint %s has %d frontends, want exactly 1 (4 frontends, 4 subsets): %v", s.Addr(), uses[s.Addr()], uses)
		}
	}
	c, closeIdle := client()
	defer closeIdle()
	serve := func() {
		t.Helper()
		for _, g := range fleet {
			getOK(t, c, g, 6)
		}
	}
	serve()
	acc, rings, changes := acceptedBy(srvs), []*subset.Snapshot{snapshotOf(g0), snapshotOf(g1)}, []uint64{}
	for _, g := range fleet {
		changes = append(changes, adminOrigin(t, g).MembershipChanges)
	}

	addr := cp.Addr()
	cp.Close()
	for i, g := range fleet {
		waitfor.Until(t, fmt.Sprintf("gateway %d to notice the control plane is down", i), func() bool { return adminOrigin(t, g).SourceError != "" })
	}
	serve()
	startCP(addr)
	for i, g := range fleet {
		waitfor.Until(t, fmt.Sprintf("gateway %d to take the restarted control plane's response", i), func() bool { return adminOrigin(t, g).SourceError == "" })
	}
	serve()
	for i, g := range fleet {
		if snap := snapshotOf(g); snap != rings[i] || !sameRing(snap, rings[i]) {
			t.Errorf("gateway %d: the ring changed across the control plane's restart (version %d → %d)", i, rings[i].Version(), snap.Version())
		}
		if n := adminOrigin(t, g).MembershipChanges; n != changes[i] {
			t.Errorf("gateway %d applied %d memberships across the restart, want 0", i, n-changes[i])
		}
		checkPlacement(t, g, "shared")
	}
	if after := acceptedBy(srvs); !maps.Equal(after, acc) {
		t.Errorf("connections accepted per origin %v → %v across the control plane's restart; want no new one", acc, after)
	}
	t.Logf("control plane restarted on its state: 2 gateways, same ring before and after, 0 memberships applied, 0 new upstream connections")
}

// TestCorputControlPlaneGivesTheFleetOneRing is the fleet of
// TestSharedIndicesFleetCoverageAcrossRingHistories with the indices from
// the real `corput control-plane` (in process, on its source file and
// state file) instead of a stand-in: 8 gateways × 2 loops, 200 endpoints,
// 5 replaced, half the fleet restarted — frontends per endpoint exactly
// 4..4. Then the control plane restarts on its state file: no gateway's
// ring changes, none applies a membership. Then one endpoint is added and
// one removed: at most two subsets change on every gateway, and every
// gateway still holds the same ring.
func TestCorputControlPlaneGivesTheFleetOneRing(t *testing.T) {
	const size, loops = 8, 2
	addrs := fakeAddrs(207)
	dir := t.TempDir()
	source, state := filepath.Join(dir, "origins.yaml"), filepath.Join(dir, "state.json")
	writeSource := func(eps []string) {
		var b strings.Builder
		b.WriteString("origins:\n  - name: app\n    endpoints:\n")
		for _, a := range eps {
			fmt.Fprintf(&b, "      - {address: %q}\n", a)
		}
		writeFileAtomic(t, source, b.String())
	}
	startCP := func(listen string) *controlplane.ControlPlane {
		t.Helper()
		cp, err := controlplane.Start(controlplane.Options{Listen: listen, StatePath: state, Source: source, Debounce: -1,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	want := func(eps []string) []string { return slices.Sorted(slices.Values(eps)) }
	writeSource(addrs[:200])
	cp := startCP("127.0.0.1:0")
	defer func() { cp.Close() }()
	fleet := make([]*xdsFleetMember, size)
	for i := range fleet {
		fleet[i] = startXDSFleetMember(t, cp.Addr(), i, size, loops)
	}
	waitFleetHolds(t, fleet, want(addrs[:200]))
	final := addrs[5:205]
	writeSource(final)
	waitFleetHolds(t, fleet, want(final))
	for i := 1; i < size; i += 2 {
		fleet[i].stop()
		fleet[i] = startXDSFleetMember(t, cp.Addr(), i, size, loops)
	}
	waitFleetHolds(t, fleet, want(final))
	sameAcrossFleet := func(when string) {
		t.Helper()
		for i, m := range fleet {
			if got := m.g.Origins().([]cluster.OriginView)[0].Placement; got != "shared" {
				t.Errorf("%s: gateway %d reports placement %q", when, i, got)
			}
			if !sameRing(snapshotOf(m.g), snapshotOf(fleet[0].g)) {
				t.Errorf("%s: gateway %d holds another ring than gateway 0", when, i)
			}
		}
	}
	sameAcrossFleet("after the restarts")
	lo, hi, mean := coverage(fleet, final)
	t.Logf("corput control-plane: 8 gateways × 2 loops, 200 endpoints (S = %d), half restarted after 5 were replaced: frontends per endpoint %d..%d (mean %.1f)",
		snapshotOf(fleet[0].g).Subsets(), lo, hi, mean)
	if lo != 4 || hi != 4 {
		t.Errorf("frontends per endpoint %d..%d; want exactly 4 each", lo, hi)
	}

	// The control plane restarts on its state file.
	rings, changes := make([]*subset.Snapshot, size), make([]uint64, size)
	for i, m := range fleet {
		rings[i], changes[i] = snapshotOf(m.g), m.g.Origins().([]cluster.OriginView)[0].MembershipChanges
	}
	addr := cp.Addr()
	cp.Close()
	cp = startCP(addr)
	for i, m := range fleet {
		waitfor.Until(t, fmt.Sprintf("gateway %d to hear the restarted control plane", i), func() bool {
			return m.g.Origins().([]cluster.OriginView)[0].SourceError == ""
		})
	}
	time.Sleep(200 * time.Millisecond) // a response that would change something has arrived by now
	for i, m := range fleet {
		if snap := snapshotOf(m.g); snap != rings[i] {
			t.Errorf("gateway %d: the ring changed across the control plane's restart (version %d → %d)", i, rings[i].Version(), snap.Version())
		}
		if n := m.g.Origins().([]cluster.OriginView)[0].MembershipChanges; n != changes[i] {
			t.Errorf("gateway %d applied %d memberships across the control plane's restart, want 0", i, n-changes[i])
		}
	}

	// One endpoint added, then one removed.
	for _, step := range []string{"add", "remove"} {
		before := make([]*subset.Snapshot, size)
		for i, m := range fleet {
			before[i] = snapshotOf(m.g)
		}
		if step == "add" {
			final = append(slices.Clone(final), addrs[205])
		} else {
			victim := snapshotOf(fleet[0].g).Endpoints()[17].Address // a low index: the highest moves into its hole
			final = slices.DeleteFunc(slices.Clone(final), func(a string) bool { return a == victim })
		}
		writeSource(final)
		waitFleetHolds(t, fleet, want(final))
		var changed []int
		for i, m := range fleet {
			n := changedSubsets(t, before[i], snapshotOf(m.g))
			changed = append(changed, n)
			if n > 2 || n == 0 {
				t.Errorf("one endpoint %s: %d subsets changed on gateway %d; want 1 or 2", step, n, i)
			}
		}
		sameAcrossFleet("after one endpoint " + step)
		t.Logf("corput control-plane, one endpoint %s: subsets changed per gateway %v", step, changed)
	}
}
