package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/discovery/xdstest"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/waitfor"
)

const testNode = "gw-0"

// startControlPlane serves ADS on addr ("127.0.0.1:0" for a fresh port)
// until the test ends.
func startControlPlane(t *testing.T, addr string) *controlPlane {
	t.Helper()
	return &controlPlane{xdstest.New(t, addr), t}
}

// controlPlane publishes for testNode, failing the test on an error.
type controlPlane struct {
	*xdstest.Server
	t *testing.T
}

func (cp *controlPlane) set(version string, clas ...*endpointv3.ClusterLoadAssignment) {
	cp.t.Helper()
	cp.MustSet(cp.t, testNode, version, clas...)
}

// lbe is one endpoint of a test ClusterLoadAssignment.
type lbe struct {
	addr   string // host:port
	weight uint32 // 0 = unset
	health corev3.HealthStatus
}

// locality is one zone (at one priority) of a test assignment.
type locality struct {
	zone     string
	priority uint32
	eps      []lbe
}

// cla builds the assignment of cluster, a locality per locs entry (no
// two may share zone and priority).
func cla(cluster string, locs ...locality) *endpointv3.ClusterLoadAssignment {
	var eps []xdstest.Endpoint
	for _, l := range locs {
		for _, e := range l.eps {
			eps = append(eps, xdstest.Endpoint{Addr: e.addr, Zone: l.zone, Priority: l.priority, Weight: e.weight, Health: e.health})
		}
	}
	return xdstest.CLA(cluster, eps...)
}

func TestEndpointsFromCLA(t *testing.T) {
	const (
		healthy   = corev3.HealthStatus_HEALTHY
		unknown   = corev3.HealthStatus_UNKNOWN
		unhealthy = corev3.HealthStatus_UNHEALTHY
	)
	got, err := EndpointsFromCLA(cla("c",
		locality{zone: "us-east-1b", eps: []lbe{{"10.0.0.2:80", 0, unknown}, {"10.0.0.9:80", 5, unhealthy}}},
		locality{zone: "us-east-1a", eps: []lbe{
			{"10.0.0.1:80", 3, healthy},
			{"10.0.0.3:80", 1, corev3.HealthStatus_DRAINING},
			{"10.0.0.4:80", 1, corev3.HealthStatus_DEGRADED},
			{"10.0.0.5:80", 1, corev3.HealthStatus_TIMEOUT},
			{"10.0.0.1:80", 7, healthy}, // duplicate: the first is kept
		}},
		locality{zone: "us-west-2a", priority: 1, eps: []lbe{{"10.1.0.1:80", 1, healthy}}},
	))
	if err != nil {
		t.Fatal(err)
	}
	want := []Endpoint{{Address: "10.0.0.1:80", Zone: "us-east-1a", Weight: 3}, {Address: "10.0.0.2:80", Zone: "us-east-1b", Weight: 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (healthy/unknown only, priority 0, weight unset = 1)", got, want)
	}

	// All of priority 0 down: priority 1 takes over.
	got, err = EndpointsFromCLA(cla("c",
		locality{zone: "a", eps: []lbe{{"10.0.0.1:80", 1, unhealthy}}},
		locality{zone: "b", priority: 1, eps: []lbe{{"[fd00::1]:80", 2, healthy}}},
	))
	if err != nil || !slices.Equal(got, []Endpoint{{Address: "[fd00::1]:80", Zone: "b", Weight: 2}}) {
		t.Fatalf("failover to priority 1: got %v, %v", got, err)
	}

	// Nothing usable: an empty membership, not nil.
	if got, err := EndpointsFromCLA(cla("c")); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty assignment: got %#v, %v", got, err)
	}
}

func TestEndpointsFromCLARejectsWhatCannotBeDialled(t *testing.T) {
	withAddr := func(a *corev3.Address) *endpointv3.ClusterLoadAssignment {
		return &endpointv3.ClusterLoadAssignment{ClusterName: "c", Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: a}}}},
		}}}
	}
	sock := func(s *corev3.SocketAddress) *corev3.Address {
		return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: s}}
	}
	cases := map[string]*endpointv3.ClusterLoadAssignment{
		"no socket address": withAddr(nil),
		"pipe":              withAddr(&corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: "/x"}}}),
		"named port": withAddr(sock(&corev3.SocketAddress{Address: "10.0.0.1",
			PortSpecifier: &corev3.SocketAddress_NamedPort{NamedPort: "http"}})),
		"udp": withAddr(sock(&corev3.SocketAddress{Address: "10.0.0.1", Protocol: corev3.SocketAddress_UDP,
			PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 53}})),
		"port 0":           withAddr(sock(&corev3.SocketAddress{Address: "10.0.0.1"})),
		"weight 0":         cla("c", locality{eps: []lbe{{addr: "10.0.0.1:80"}}}),
		"weight too large": cla("c", locality{eps: []lbe{{"10.0.0.1:80", MaxWeight + 1, 0}}}),
	}
	cases["weight 0"].Endpoints[0].LbEndpoints[0].LoadBalancingWeight = wrapperspb.UInt32(0)
	for name, c := range cases {
		if _, err := EndpointsFromCLA(c); err == nil || !strings.Contains(err.Error(), `cluster "c" endpoints[0].lb_endpoints[0]`) {
			t.Errorf("%s: err = %v; want a rejection naming the endpoint", name, err)
		}
	}
}

// xdsHarness runs an XDS client against a control plane and collects
// its updates.
type xdsHarness struct {
	t       *testing.T
	src     *XDS
	updates chan Update
	cancel  context.CancelFunc
	done    chan error
}

func startXDS(t *testing.T, cfg XDSConfig) *xdsHarness {
	t.Helper()
	src, err := NewXDS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &xdsHarness{t: t, src: src, updates: make(chan Update, 64), cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- src.Run(ctx, func(u Update) { h.updates <- u }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-h.done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	})
	return h
}

func (h *xdsHarness) next() Update {
	h.t.Helper()
	return receive(h.t, h.updates, "from the xDS client")
}

func testXDSConfig(server string, clk clock.Clock) XDSConfig {
	logger, _ := testlog.New(slog.LevelInfo)
	return XDSConfig{
		Server: server, NodeID: testNode, Zone: "us-east-1a",
		Clusters:    map[string]string{"payments": "payments-eds", "search": "search-eds"},
		BackoffBase: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		Clock: clk, Rand: rng.New(1), Logger: logger,
	}
}

func TestXDSFollowsControlPlaneAcrossNACKAndRestart(t *testing.T) {
	cp := startControlPlane(t, "127.0.0.1:0")
	search := cla("search-eds", locality{zone: "us-east-1a", eps: []lbe{{"10.2.0.1:80", 0, 0}, {"10.2.0.2:80", 1, corev3.HealthStatus_UNHEALTHY}}})
	payments := func(n int) *endpointv3.ClusterLoadAssignment {
		l := locality{zone: "us-east-1b"}
		for i := 1; i <= n; i++ {
			l.eps = append(l.eps, lbe{fmt.Sprintf("10.1.0.%d:80", i), uint32(i), corev3.HealthStatus_HEALTHY})
		}
		return cla("payments-eds", l)
	}
	paymentsWant := func(n int) []Endpoint {
		var out []Endpoint
		for i := 1; i <= n; i++ {
			out = append(out, Endpoint{Address: fmt.Sprintf("10.1.0.%d:80", i), Zone: "us-east-1b", Weight: i})
		}
		return out
	}
	cp.set("1", payments(2), search)
	h := startXDS(t, testXDSConfig(cp.Addr(), clock.Real()))

	// Both origins arrive over one stream, with zone, weight and health.
	got := map[string][]Endpoint{}
	for range 2 {
		u := h.next()
		got[u.Origin] = u.Endpoints
	}
	if !slices.Equal(got["payments"], paymentsWant(2)) || !slices.Equal(got["search"], []Endpoint{{Address: "10.2.0.1:80", Zone: "us-east-1a", Weight: 1}}) {
		t.Fatalf("initial membership %v", got)
	}
	waitfor.Until(t, "the ACK of version 1", func() bool { return cp.Acked("1") })

	// An add is followed; the unchanged origin is not re-emitted.
	cp.set("2", payments(3), search)
	if u := h.next(); u.Origin != "payments" || !slices.Equal(u.Endpoints, paymentsWant(3)) {
		t.Fatalf("after add: %v", u)
	}
	waitfor.Until(t, "the ACK of version 2", func() bool { return cp.Acked("2") })

	// A malformed assignment is NACKed with the last accepted version and
	// a reason; membership stays.
	bad := payments(3)
	bad.Endpoints[0].LbEndpoints[1].HostIdentifier = &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{}}
	cp.set("3", bad, search)
	waitfor.Until(t, "a NACK", func() bool { return len(cp.NACKs()) > 0 })
	nack := cp.NACKs()[0]
	if nack.GetVersionInfo() != "2" || nack.GetResponseNonce() == "" || !strings.Contains(nack.GetErrorDetail().GetMessage(), "no socket address") {
		t.Fatalf("NACK = version %q nonce %q detail %q; want version 2, a nonce and the reason",
			nack.GetVersionInfo(), nack.GetResponseNonce(), nack.GetErrorDetail().GetMessage())
	}
	if err := h.src.Err(); err == nil || !strings.Contains(err.Error(), `rejected (NACK) version "3"`) {
		t.Fatalf("Err() = %v; want the rejection", err)
	}

	// A valid snapshot after it is accepted; a remove is followed.
	cp.set("4", payments(1), search)
	if u := h.next(); u.Origin != "payments" || !slices.Equal(u.Endpoints, paymentsWant(1)) {
		t.Fatalf("after remove: %v", u)
	}
	waitfor.Until(t, "Err to clear", func() bool { return h.src.Err() == nil })

	// The control plane goes away: the client says so and emits nothing,
	// so the last known membership stays in force.
	addr := cp.Addr()
	cp.Stop()
	waitfor.Until(t, "Err to report the outage", func() bool {
		err := h.src.Err()
		return err != nil && strings.Contains(err.Error(), "keeping the last known membership")
	})
	select {
	case u := <-h.updates:
		t.Fatalf("emitted %v while the control plane was down", u)
	default:
	}

	// It comes back on the same address with a fresh cache: the client
	// reconnects and follows; search, unchanged, is not re-emitted.
	cp2 := startControlPlane(t, addr)
	cp2.set("1", payments(2), search)
	if u := h.next(); u.Origin != "payments" || !slices.Equal(u.Endpoints, paymentsWant(2)) {
		t.Fatalf("after restart: %v", u)
	}
	waitfor.Until(t, "Err to clear after reconnect", func() bool { return h.src.Err() == nil })
	select {
	case u := <-h.updates:
		t.Fatalf("unexpected extra update %v", u)
	default:
	}
}

func TestXDSPacesRepeatedNACKsOnTheClock(t *testing.T) {
	cp := startControlPlane(t, "127.0.0.1:0")
	clk := clock.NewFake(epoch)
	search := cla("search-eds", locality{eps: []lbe{{"10.2.0.1:80", 0, 0}}})
	bad := cla("payments-eds", locality{eps: []lbe{{"10.1.0.1:80", MaxWeight + 1, 0}}})
	cp.set("bad", bad, search)
	h := startXDS(t, testXDSConfig(cp.Addr(), clk))

	// The snapshot cache resends a NACKed version at once. The first
	// NACK goes out immediately; the next waits on the clock.
	waitfor.Until(t, "a paced NACK", func() bool { return clk.Pending() == 1 })
	if n := len(cp.NACKs()); n != 1 {
		t.Fatalf("%d NACKs before the clock moved; want 1", n)
	}
	// Step fires the paced wait alone: an Advance past it could also fire
	// the next wait, if the client armed it before Advance returned.
	clk.Step()
	waitfor.Until(t, "the second paced NACK", func() bool { return clk.Pending() == 1 && len(cp.NACKs()) == 2 })

	// A fixed snapshot is picked up when the paced NACK goes out.
	cp.set("good", cla("payments-eds", locality{eps: []lbe{{"10.1.0.1:80", 2, 0}}}), search)
	clk.Step()
	u := h.next()
	if u.Origin != "payments" && u.Origin != "search" {
		t.Fatalf("unexpected update %v", u)
	}
	waitfor.Until(t, "the ACK of the fixed snapshot", func() bool { return cp.Acked("good") })
}

func TestNewXDSValidates(t *testing.T) {
	cases := []struct {
		cfg  XDSConfig
		want string
	}{
		{XDSConfig{Server: "nohost", NodeID: "n", Clusters: map[string]string{"o": "c"}}, "discovery.server"},
		{XDSConfig{Server: "h:1", Clusters: map[string]string{"o": "c"}}, "discovery.node_id"},
		{XDSConfig{Server: "h:1", NodeID: "n"}, "discovery.cluster"},
		{XDSConfig{Server: "h:1", NodeID: "n", Clusters: map[string]string{"o": ""}}, "origin o: discovery.cluster is empty"},
	}
	for _, c := range cases {
		if _, err := NewXDS(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v; want %q", c.cfg, err, c.want)
		}
	}
}

func TestBackoffIsJitteredExponentialAndCapped(t *testing.T) {
	b := backoff{base: 100 * time.Millisecond, max: time.Second, rand: rng.New(7)}
	for attempt := range 70 {
		ceil := min(time.Second, 100*time.Millisecond<<min(attempt, 20))
		for range 50 {
			if d := b.delay(attempt); d < ceil/2 || d > ceil {
				t.Fatalf("attempt %d: delay %v outside [%v, %v]", attempt, d, ceil/2, ceil)
			}
		}
	}
	a := backoff{base: time.Second, max: time.Minute, rand: rng.New(42)}
	c := backoff{base: time.Second, max: time.Minute, rand: rng.New(42)}
	distinct := map[time.Duration]bool{}
	for i := range 20 {
		d := a.delay(3)
		if d != c.delay(3) {
			t.Fatalf("draw %d: the same seed gave different delays", i)
		}
		distinct[d] = true
	}
	if len(distinct) < 10 {
		t.Fatalf("only %d distinct delays in 20 draws: not jittered", len(distinct))
	}
}

func TestXDSFlappingThroughDebouncerAppliesOnce(t *testing.T) {
	cp := startControlPlane(t, "127.0.0.1:0")
	search := cla("search-eds", locality{eps: []lbe{{"10.2.0.1:80", 0, 0}}})
	members := func(n int) *endpointv3.ClusterLoadAssignment {
		l := locality{zone: "a"}
		for i := range 3 {
			l.eps = append(l.eps, lbe{fmt.Sprintf("10.1.%d.%d:80", n, i), 0, 0})
		}
		return cla("payments-eds", l)
	}
	cp.set("0", members(0), search)

	clk := clock.NewFake(epoch)
	var mu sync.Mutex
	applies := map[string][]Update{}
	d := NewDebouncer(clk, func(u Update) {
		mu.Lock()
		defer mu.Unlock()
		applies[u.Origin] = append(applies[u.Origin], u)
	})
	defer d.Close()
	src, err := NewXDS(testXDSConfig(cp.Addr(), clock.Real()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, d.Offer) }()
	defer func() { cancel(); <-done }()
	count := func(origin string) int {
		mu.Lock()
		defer mu.Unlock()
		return len(applies[origin])
	}
	waitfor.Until(t, "the first membership", func() bool { return count("payments") == 1 && count("search") == 1 })

	// 100 changes while the fake clock stands still: all inside one window.
	for v := 1; v <= 100; v++ {
		cp.set(fmt.Sprint(v), members(v), search)
	}
	waitfor.Until(t, "the ACK of version 100", func() bool { return cp.Acked("100") })
	if n := count("payments"); n != 1 {
		t.Fatalf("%d applies during the window; want only the first", n)
	}
	clk.Advance(DefaultDebounce)
	mu.Lock()
	defer mu.Unlock()
	p := applies["payments"]
	if len(p) != 2 || p[1].Endpoints[0].Address != "10.1.100.0:80" || len(applies["search"]) != 1 {
		t.Fatalf("applies %v; want one more for payments, with version 100's membership, and none for search", applies)
	}
}

func TestXDSReportsWaitingForFirstResponseWithoutWarning(t *testing.T) {
	cp := startControlPlane(t, "127.0.0.1:0") // no snapshot: the server holds the request
	cfg := testXDSConfig(cp.Addr(), clock.Real())
	logger, logs := testlog.New(slog.LevelInfo)
	cfg.Logger = logger
	h := startXDS(t, cfg)
	waitfor.Until(t, "the request to reach the server", func() bool { return len(cp.Requests()) > 0 })
	if err := h.src.Err(); err == nil || !strings.Contains(err.Error(), "waiting for the first response for clusters payments-eds, search-eds") {
		t.Fatalf("Err() = %v; want it to say what it waits for", err)
	}
	if err := h.src.Run(context.Background(), func(Update) {}); err == nil {
		t.Fatal("a second concurrent Run was allowed")
	}
	cp.set("1", cla("payments-eds"), cla("search-eds"))
	h.next()
	waitfor.Until(t, "Err to clear", func() bool { return h.src.Err() == nil })
	if l := logs.String(); strings.Contains(l, "level=WARN") || strings.Contains(l, "recovered") {
		t.Fatalf("a normal start logged a warning or a recovery:\n%s", l)
	}
}

// TestXDSDrainingEndpointSkipsTheDebounce: an endpoint of the membership
// the gateway holds turns DRAINING (a terminating pod). That update is
// Urgent and passes the debouncer at once, with the fake clock standing
// still; a change with no draining endpoint (a join) still waits for its
// window, and so does an endpoint that simply leaves, or a DRAINING one
// the gateway never had.
func TestXDSDrainingEndpointSkipsTheDebounce(t *testing.T) {
	cp := startControlPlane(t, "127.0.0.1:0")
	set := func(version string, eps ...lbe) { cp.set(version, cla("payments-eds", locality{zone: "a", eps: eps})) }
	a, b, c, d := lbe{"10.1.0.1:80", 0, 0}, lbe{"10.1.0.2:80", 0, 0}, lbe{"10.1.0.3:80", 0, 0}, lbe{"10.1.0.4:80", 0, 0}
	drain := func(e lbe) lbe { e.health = corev3.HealthStatus_DRAINING; return e }
	set("1", a, b, c)

	clk := clock.NewFake(epoch)
	var mu sync.Mutex
	var applies []Update
	deb := NewDebouncer(clk, func(u Update) {
		mu.Lock()
		defer mu.Unlock()
		applies = append(applies, u)
	})
	defer deb.Close()
	cfg := testXDSConfig(cp.Addr(), clock.Real())
	cfg.Clusters = map[string]string{"payments": "payments-eds"}
	src, err := NewXDS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, deb.Offer) }()
	defer func() { cancel(); <-done }()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(applies)
	}
	last := func() Update {
		mu.Lock()
		defer mu.Unlock()
		return applies[len(applies)-1]
	}
	waitfor.Until(t, "the first membership", func() bool { return count() == 1 })

	// A join waits for the window.
	set("2", a, b, c, d)
	waitfor.Until(t, "the ACK of version 2", func() bool { return cp.Acked("2") })
	if n := count(); n != 1 {
		t.Fatalf("a join applied at once (%d applies); want it to wait for the window", n)
	}
	// b drains: applied now, with the pending join, the clock unmoved.
	set("3", a, drain(b), c, d)
	waitfor.Until(t, "the draining endpoint applied past the window", func() bool { return count() == 2 })
	if u := last(); !u.Urgent || len(u.Endpoints) != 3 || slices.ContainsFunc(u.Endpoints, func(e Endpoint) bool { return e.Address == b.addr }) {
		t.Fatalf("applied %+v; want urgent, a, c and d (b draining, the join included)", u)
	}
	// A DRAINING endpoint the gateway never had, and a plain leave, are
	// not urgent: both wait for the window.
	set("4", a, drain(b), c, drain(lbe{"10.1.0.9:80", 0, 0}))
	waitfor.Until(t, "the ACK of version 4", func() bool { return cp.Acked("4") })
	if n := count(); n != 2 {
		t.Fatalf("a leave or a foreign DRAINING endpoint applied at once (%d applies); want the window", n)
	}
	clk.Advance(DefaultDebounce)
	if u := last(); count() != 3 || u.Urgent || len(u.Endpoints) != 2 {
		t.Fatalf("after the window: %d applies, last %+v; want a third, not urgent, with a and c", count(), u)
	}
}
