package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/slo"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/telemetry"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/upstream"
	"github.com/corput/corput/internal/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dials is a pool.Dialer over in-memory connections that records the
// address of every dial: which endpoints a change made pools dial.
type dials struct {
	*memconn.Dialer
	mu    sync.Mutex
	addrs map[string]int
}

func newDials(clk clock.Clock, cfg memconn.Config) *dials {
	return &dials{Dialer: memconn.New(clk, cfg), addrs: map[string]int{}}
}

func (d *dials) Dial(addr string, done func(pool.Conn, error)) {
	d.mu.Lock()
	d.addrs[addr]++
	d.mu.Unlock()
	d.Dialer.Dial(addr, done)
}

// taken returns the dials made since the last call, by address.
func (d *dials) taken() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.addrs
	d.addrs = map[string]int{}
	return out
}

// rig is an Origin built from a static endpoint list, its pools over an
// in-memory dialer (connections open at once), and what it reports to.
type rig struct {
	*Origin
	oc      *config.Origin
	metrics *telemetry.Metrics
	dialer  *dials
	log     *testlog.Buffer
}

// addrs are n endpoint addresses.
func addrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.0.%d.%d:80", i/250, i%250+1)
	}
	return out
}

func endpoints(as []string) []config.Endpoint {
	var eps []config.Endpoint
	for _, a := range as {
		eps = append(eps, config.Endpoint{Address: a, Weight: 1})
	}
	return eps
}

// newRig builds origin "app" over eps on loops loops; edit changes the
// configuration first, env the environment.
func newRig(t *testing.T, loops int, eps []string, edit func(*config.Origin), env func(*Env)) *rig {
	t.Helper()
	oc := config.DefaultOrigin()
	oc.Name = "app"
	oc.Protocol = config.ProtocolH1
	oc.Endpoints = endpoints(eps)
	if edit != nil {
		edit(&oc)
	}
	log, buf := testlog.New(slog.LevelInfo)
	r := &rig{oc: &oc, metrics: telemetry.New(), dialer: newDials(clock.Real(), memconn.Config{}), log: buf}
	e := &Env{Clock: clock.Real(), Log: log, Metrics: r.metrics, Loops: loops, Fleet: config.Fleet{Size: 1}, Seed: 1, Dialer: r.dialer}
	if env != nil {
		env(e)
	}
	o, err := New(&oc, e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	r.Origin = o
	return r
}

// state is each loop's pools, by address.
func (r *rig) state() []map[string]*pool.Pool {
	var out []map[string]*pool.Pool
	for l := range r.loops {
		out = append(out, r.Loop(l).Pools())
	}
	return out
}

// closed reports whether p takes no more requests. An open pool's stream
// it may get is given back at once.
func closed(p *pool.Pool) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no wait
	l, err := p.Acquire(ctx)
	if err == nil {
		l.Release()
	}
	return errors.Is(err, pool.ErrClosed)
}

// TestNewGivesEachLoopItsSubsetsPools: every loop holds a pre-warmed pool
// for exactly the endpoints of its subset, its picker chooses among them,
// and the driver knows every endpoint's home loop.
func TestNewGivesEachLoopItsSubsetsPools(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*config.Origin)
		every bool // every loop holds every endpoint
	}{
		{"ringsteady", func(oc *config.Origin) { oc.Subset.Size = 4 }, false},
		{"sticky places by none", func(oc *config.Origin) {
			oc.Subset.Size = 4
			oc.Balancer.Policy, oc.Balancer.HashOn = config.PolicyMaglev, "header x-user"
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eps := addrs(16)
			r := newRig(t, 4, eps, tc.edit, nil)
			snap := r.Snapshot()
			dialled := r.dialer.taken()
			want := map[string]int{}
			for l := range 4 {
				sub := slices.Sorted(slices.Values(snap.Members(0, l)))
				if tc.every && !slices.Equal(sub, slices.Sorted(slices.Values(eps))) {
					t.Fatalf("loop %d's subset %v, want every endpoint", l, sub)
				}
				if got := slices.Sorted(maps.Keys(r.Loop(l).Pools())); !slices.Equal(got, sub) {
					t.Fatalf("loop %d's pools %v, want its subset %v", l, got, sub)
				}
				if got := slices.Sorted(slices.Values(r.Loop(l).picker.Candidates())); !slices.Equal(got, sub) {
					t.Fatalf("loop %d's picker offers %v, want its subset %v", l, got, sub)
				}
				for _, a := range sub {
					want[a]++
					if p := r.Pool(l, a); p == nil || p.Loop() != l || p.Config().Prewarm != 1 {
						t.Fatalf("loop %d's pool of %s: %v", l, a, p)
					}
				}
			}
			if !maps.Equal(dialled, want) {
				t.Fatalf("dials %v, want one per pool %v", dialled, want)
			}
			if !maps.Equal(r.Driver().Homes(), snap.Homes(0)) {
				t.Fatalf("the driver's homes %v are not the placement's %v", r.Driver().Homes(), snap.Homes(0))
			}
			if !r.Ready() {
				t.Fatal("every pool holds its connection, yet the origin is not ready")
			}
		})
	}
}

// TestHomesPrewarmOnlyTheHomeLoopWhenMultiplexing: an origin whose
// connections may carry many streams pre-warms each endpoint on its home
// loop only; an HTTP/1.1 one on every loop that holds it.
func TestHomesPrewarmOnlyTheHomeLoopWhenMultiplexing(t *testing.T) {
	for _, tc := range []struct {
		proto config.Protocol
		tls   bool
		mux   bool
	}{
		{config.ProtocolH1, false, false},
		{config.ProtocolH2C, false, true},
		{config.ProtocolH2, false, true},
		{config.ProtocolAuto, false, false},
		{config.ProtocolAuto, true, true},
	} {
		t.Run(fmt.Sprintf("%s tls=%v", tc.proto, tc.tls), func(t *testing.T) {
			r := newRig(t, 3, addrs(4), func(oc *config.Origin) {
				oc.Protocol = tc.proto
				oc.Subset.Algorithm = config.SubsetNone
				if tc.tls {
					oc.TLS = &config.ClientTLS{}
				}
			}, nil)
			homes := r.Driver().Homes()
			for l := range 3 {
				for a, p := range r.Loop(l).Pools() {
					want := 1
					if tc.mux && homes[a] != l {
						want = 0
					}
					if got := p.Config().Prewarm; got != want {
						t.Fatalf("loop %d (home of %s: %d): prewarm %d, want %d", l, a, homes[a], got, want)
					}
				}
			}
			if got := multiplexes(r.oc); got != tc.mux {
				t.Fatalf("multiplexes = %v", got)
			}
		})
	}
}

// TestApplyTouchesOnlyTheLoopsWhoseSubsetChanged: a membership delta (one
// endpoint gone, one new) leaves the loops whose subset did not change
// exactly as they were — the same pool map, no dial — and in the others
// keeps the survivors' pools, drains the departed endpoint's and dials
// the new one's.
func TestApplyTouchesOnlyTheLoopsWhoseSubsetChanged(t *testing.T) {
	all := addrs(33)
	r := newRig(t, 8, all[:32], func(oc *config.Origin) { oc.Subset.Size = 4 }, nil)
	before := r.state()
	r.dialer.taken()
	gone, added := all[5], all[32]
	next := slices.Concat(all[:5], all[6:])
	if err := r.Apply(membersOf(endpoints(next))); err != nil {
		t.Fatal(err)
	}
	after := r.state()
	dialled := r.dialer.taken()
	wantDials := map[string]int{}
	unchanged, changed := 0, 0
	for l := range after {
		sub := slices.Sorted(slices.Values(r.Snapshot().Members(0, l)))
		if got := slices.Sorted(maps.Keys(after[l])); !slices.Equal(got, sub) {
			t.Fatalf("loop %d holds pools %v, want its new subset %v", l, got, sub)
		}
		if slices.Equal(slices.Sorted(maps.Keys(before[l])), sub) {
			unchanged++
			if fmt.Sprintf("%p", before[l]) != fmt.Sprintf("%p", after[l]) {
				t.Fatalf("loop %d: its subset did not change, yet its pool map was replaced", l)
			}
			continue
		}
		changed++
		for a, p := range after[l] {
			if old, ok := before[l][a]; ok && old != p {
				t.Fatalf("loop %d: the pool of %s, which stayed, was replaced", l, a)
			} else if !ok {
				wantDials[a]++
			}
		}
		for a, p := range before[l] {
			if _, ok := after[l][a]; !ok && !closed(p) {
				t.Fatalf("loop %d: the pool of %s, which left the loop, still takes requests", l, a)
			}
		}
	}
	if unchanged == 0 || changed == 0 {
		t.Fatalf("%d loops unchanged, %d changed: the test needs both", unchanged, changed)
	}
	if !maps.Equal(dialled, wantDials) {
		t.Fatalf("dials %v, want one per new pool %v", dialled, wantDials)
	}
	if wantDials[added] == 0 {
		t.Fatalf("no loop took the new endpoint %s", added)
	}
	for l := range after {
		if _, ok := after[l][gone]; ok {
			t.Fatalf("loop %d still holds a pool of the departed %s", l, gone)
		}
	}
	if v := r.View(); v.MembershipChanges != 1 || len(v.Endpoints) != 32 {
		t.Fatalf("view: %d changes, %d endpoints; want 1 and 32", v.MembershipChanges, len(v.Endpoints))
	}
	if got := testutil.ToFloat64(r.metrics.MembershipChanges.WithLabelValues("app")); got != 1 {
		t.Fatalf("corput_membership_changes_total %v, want 1", got)
	}
}

// TestSharedIndicesPlaceTheRing: a membership with the control plane's
// ring indices places a ringsteady origin by them (every endpoint at its
// index); indices that do not cover the members once and densely, or a
// subset count that is not a power of two, are refused and change
// nothing; a membership without them places locally again, from that
// ring.
func TestSharedIndicesPlaceTheRing(t *testing.T) {
	eps := addrs(8)
	r := newRig(t, 2, eps, func(oc *config.Origin) { oc.Subset.Size = 4 }, nil)
	indices := map[string]int{}
	for i, a := range eps {
		indices[a] = (i*3 + 1) % 8 // a permutation of 0..7
	}
	m := Membership{Members: membersOf(endpoints(eps)), Shared: &subset.Shared{Indices: indices, Subsets: 2}}
	if err := r.ApplyMembership(m); err != nil {
		t.Fatal(err)
	}
	v := r.Subsets()
	if v.Placement != PlacementShared || v.Subsets != 2 {
		t.Fatalf("placement %s with %d subsets, want shared with 2", v.Placement, v.Subsets)
	}
	for _, e := range v.Endpoints {
		if e.Index != indices[e.Address] {
			t.Fatalf("%s at ring index %d, want the shared %d", e.Address, e.Index, indices[e.Address])
		}
		if len(e.Users) == 0 {
			t.Fatalf("%s: no frontend uses its subset", e.Address)
		}
	}
	if !strings.Contains(r.log.String(), "placed by shared ring indices") {
		t.Fatalf("the switch to shared placement is not logged:\n%s", r.log.String())
	}
	changes := r.View().MembershipChanges
	bad := func(edit func(sh *subset.Shared, ms []balance.Member) []balance.Member) Membership {
		sh := &subset.Shared{Indices: maps.Clone(indices), Subsets: 2}
		ms := edit(sh, membersOf(endpoints(eps)))
		return Membership{Members: ms, Shared: sh}
	}
	for _, tc := range []struct {
		name string
		m    Membership
		want string
	}{
		{"an index short", bad(func(sh *subset.Shared, ms []balance.Member) []balance.Member {
			delete(sh.Indices, eps[0])
			return ms
		}), "every endpoint needs one"},
		{"an endpoint without one", bad(func(sh *subset.Shared, ms []balance.Member) []balance.Member {
			delete(sh.Indices, eps[0])
			sh.Indices["10.9.9.9:80"] = indices[eps[0]]
			return ms
		}), "has no shared ring index"},
		{"an index twice", bad(func(sh *subset.Shared, ms []balance.Member) []balance.Member {
			sh.Indices[eps[0]] = sh.Indices[eps[1]]
			return ms
		}), ""},
		{"three subsets", bad(func(sh *subset.Shared, ms []balance.Member) []balance.Member {
			sh.Subsets = 3
			return ms
		}), "not a power of two"},
	} {
		err := r.ApplyMembership(tc.m)
		if err == nil || !strings.Contains(err.Error(), "the last one stays") || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}
	if got := r.View().MembershipChanges; got != changes {
		t.Fatalf("refused memberships changed the origin (%d changes, was %d)", got, changes)
	}
	ring := r.Subsets().Endpoints
	if err := r.Apply(membersOf(endpoints(eps))); err != nil {
		t.Fatal(err)
	}
	if v := r.Subsets(); v.Placement != PlacementLocal || !slices.EqualFunc(v.Endpoints, ring, func(a, b RingEndpoint) bool { return a.Endpoint == b.Endpoint }) {
		t.Fatalf("placement %s; the switch back to local placement moved the ring", v.Placement)
	}
	if !strings.Contains(r.log.String(), "placed locally again") {
		t.Fatalf("the switch back to local placement is not logged:\n%s", r.log.String())
	}
}

// TestSharedIndicesIgnoredByOtherAlgorithms: an algorithm that cannot place
// by shared indices places locally, and says so once.
func TestSharedIndicesIgnoredByOtherAlgorithms(t *testing.T) {
	eps := addrs(4)
	r := newRig(t, 2, eps, func(oc *config.Origin) { oc.Subset.Algorithm = config.SubsetRendezvous }, nil)
	indices := map[string]int{}
	for i, a := range eps {
		indices[a] = i
	}
	for range 2 {
		if err := r.ApplyMembership(Membership{Members: membersOf(endpoints(eps)), Shared: &subset.Shared{Indices: indices, Subsets: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if v := r.View(); v.Placement != PlacementLocal {
		t.Fatalf("placement %s, want local", v.Placement)
	}
	if n := strings.Count(r.log.String(), "shared ring indices ignored"); n != 1 {
		t.Fatalf("the ignored indices are warned of %d times, want once:\n%s", n, r.log.String())
	}
}

// TestPoolForOutsideTheSubsetAndForARemovedEndpoint: a pick outside the
// loop's subset gets an unwarmed pool made on demand (and the same one
// next time), dropped when its endpoint leaves the origin; a pick of an
// endpoint no longer in the origin gets a closed pool, which the loop
// does not keep.
func TestPoolForOutsideTheSubsetAndForARemovedEndpoint(t *testing.T) {
	eps := addrs(16)
	r := newRig(t, 2, eps, func(oc *config.Origin) { oc.Subset.Size = 4 }, nil)
	ol := r.Loop(0)
	outside := outsideOf(t, ol, eps)
	r.dialer.taken()
	p, err := r.PoolFor(ol, outside)
	if err != nil || p == nil {
		t.Fatalf("PoolFor outside the subset: %v, %v", p, err)
	}
	if p.Config().Prewarm != 0 || len(r.dialer.taken()) != 0 {
		t.Fatal("an on-demand pool pre-warms")
	}
	if closed(p) {
		t.Fatal("the on-demand pool takes no requests")
	}
	if again, _ := r.Open(0, outside); again != p || r.Pool(0, outside) != p {
		t.Fatal("a second pick outside the subset got another pool")
	}
	if mine := r.Pool(0, ol.subset[0]); mine == nil {
		t.Fatal("the loop lost its subset's pools")
	} else if got, _ := r.PoolFor(ol, ol.subset[0]); got != mine {
		t.Fatal("PoolFor of a subset member is not the loop's pool")
	}

	removed := "10.9.9.9:80"
	if p, err := r.PoolFor(ol, removed); err != nil || !closed(p) {
		t.Fatalf("PoolFor of an endpoint outside the origin: %v, %v; want a closed pool", p, err)
	}
	if _, ok := ol.Pools()[removed]; ok {
		t.Fatal("the loop keeps a pool of an endpoint outside the origin")
	}

	// The on-demand endpoint leaves the origin: its pool is dropped.
	if err := r.Apply(membersOf(endpoints(slices.DeleteFunc(slices.Clone(eps), func(a string) bool { return a == outside })))); err != nil {
		t.Fatal(err)
	}
	if _, ok := ol.Pools()[outside]; ok || !closed(p) {
		t.Fatal("the on-demand pool of an endpoint that left the origin is kept")
	}
}

// TestReady: an origin is ready once every pool holds its pre-warmed
// connections, and a discovered one only after its first membership.
func TestReady(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	slow := newDials(clk, memconn.Config{DialLatency: time.Second})
	r := newRig(t, 2, addrs(3), nil, func(e *Env) { e.Dialer = slow; e.Clock = clk })
	if r.Ready() {
		t.Fatal("ready while the pre-warming dials are in flight")
	}
	clk.Advance(time.Second)
	if !r.Ready() {
		t.Fatal("not ready once every pool has its connection")
	}

	d := newRig(t, 2, nil, func(oc *config.Origin) { oc.Discovery.Type = config.DiscoveryFile }, nil)
	if d.Ready() {
		t.Fatal("a discovered origin is ready before its first membership")
	}
	if err := d.Apply(membersOf(endpoints(addrs(3)))); err != nil {
		t.Fatal(err)
	}
	if !d.Ready() {
		t.Fatal("not ready after the first membership")
	}
}

// TestDrainWaitsForRequestsInFlight: Drain returns once the streams in
// flight are back, and from then on the origin refuses membership
// changes, reconfiguration and new pools.
func TestDrainWaitsForRequestsInFlight(t *testing.T) {
	eps := addrs(2)
	r := newRig(t, 1, eps, nil, nil)
	p := r.Pool(0, eps[0])
	lease, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	drained := make(chan struct{})
	go func() {
		r.Drain()
		close(drained)
	}()
	for !closed(p) { // Drain has begun
		time.Sleep(time.Millisecond)
	}
	select {
	case <-drained:
		t.Fatal("Drain returned with a stream in flight")
	case <-time.After(20 * time.Millisecond):
	}
	lease.Release()
	<-drained
	if err := r.Apply(membersOf(endpoints(eps))); err == nil || !strings.Contains(err.Error(), "after shutdown") {
		t.Fatalf("Apply after Drain: %v", err)
	}
	next := *r.oc
	next.Retry.Attempts = 3
	c, err := r.Prepare(&next, config.Fleet{Size: 1})
	if err != nil || c == nil {
		t.Fatalf("Prepare: %v %v", c, err)
	}
	if err := c.Commit(); err == nil {
		t.Fatal("Commit after Drain succeeded")
	}
	if p, err := r.PoolFor(r.Loop(0), "10.9.9.9:80"); err != nil || !closed(p) {
		t.Fatal("a pool made after Drain takes requests")
	}
}

// TestCloseCutsEverything: Close closes every pool at once, streams in
// flight or not.
func TestCloseCutsEverything(t *testing.T) {
	eps := addrs(2)
	r := newRig(t, 2, eps, nil, nil)
	lease, err := r.Pool(0, eps[0]).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	r.Close()
	for _, m := range r.state() {
		for a, p := range m {
			if !closed(p) {
				t.Fatalf("pool of %s open after Close", a)
			}
		}
	}
	if got := testutil.ToFloat64(r.metrics.ConnectionsClosed.WithLabelValues("app", pool.ReasonShutdown.String())); got != 4 {
		t.Fatalf("%v connections closed for shutdown, want 4", got)
	}
}

// TestReconfigureInPlace: what Prepare and Commit change, and what they
// keep.
func TestReconfigureInPlace(t *testing.T) {
	eps := addrs(8)
	for _, tc := range []struct {
		name  string
		edit  func(*config.Origin)
		check func(t *testing.T, r *rig, before []map[string]*pool.Pool)
	}{
		{"retries and timeouts", func(oc *config.Origin) {
			oc.Retry.Attempts = 4
			oc.Timeouts.Request = 3 * time.Second
		}, func(t *testing.T, r *rig, before []map[string]*pool.Pool) {
			if r.policy.Load().Attempts != 5 || r.RequestTimeout() != 3*time.Second {
				t.Fatalf("attempts %d timeout %v", r.policy.Load().Attempts, r.RequestTimeout())
			}
			samePools(t, r, before)
		}},
		{"pool settings", func(oc *config.Origin) {
			oc.Pool.MaxConnections = 7
		}, func(t *testing.T, r *rig, before []map[string]*pool.Pool) {
			samePools(t, r, before)
			for _, m := range r.state() {
				for _, p := range m {
					if p.Config().MaxConnections != 7 {
						t.Fatalf("pool of %s: max_connections %d, want 7", p.Addr(), p.Config().MaxConnections)
					}
				}
			}
		}},
		{"static endpoints", func(oc *config.Origin) {
			oc.Endpoints = endpoints(slices.Concat(eps[1:], addrs(9)[8:]))
		}, func(t *testing.T, r *rig, before []map[string]*pool.Pool) {
			if got := len(r.View().Endpoints); got != 8 || r.View().MembershipChanges != 1 {
				t.Fatalf("%d endpoints, %d changes", got, r.View().MembershipChanges)
			}
			if r.bal.Endpoint(eps[0]) != nil {
				t.Fatal("the removed endpoint is still balanced")
			}
		}},
		{"subset size", func(oc *config.Origin) { oc.Subset.Size = 8 }, func(t *testing.T, r *rig, before []map[string]*pool.Pool) {
			if n := r.Subsets().Subsets; n != 1 {
				t.Fatalf("%d subsets, want 1", n)
			}
			for l, m := range r.state() {
				if len(m) != 8 {
					t.Fatalf("loop %d holds %d pools, want its subset of 8", l, len(m))
				}
				for a, p := range before[l] {
					if m[a] != p {
						t.Fatalf("loop %d: the pool of %s, which stayed in its subset, was replaced", l, a)
					}
				}
			}
		}},
		{"sticky", func(oc *config.Origin) {
			oc.Balancer.Policy, oc.Balancer.HashOn = config.PolicyRingHash, "header x-user"
		}, func(t *testing.T, r *rig, before []map[string]*pool.Pool) {
			if !r.Sticky() {
				t.Fatal("not sticky")
			}
			for l, m := range r.state() {
				if len(m) != 8 {
					t.Fatalf("loop %d holds %d pools, want every endpoint", l, len(m))
				}
			}
		}},
		{"protocol", func(oc *config.Origin) { oc.Protocol = config.ProtocolH2C }, func(t *testing.T, r *rig, before []map[string]*pool.Pool) {
			// Multiplexed: only the home loop's pool of an endpoint pre-warms.
			homes := r.Driver().Homes()
			for l, m := range r.state() {
				for a, p := range m {
					if want := map[bool]int{true: 1, false: 0}[homes[a] == l]; p.Config().Prewarm != want {
						t.Fatalf("loop %d's pool of %s (home %d): prewarm %d, want %d", l, a, homes[a], p.Config().Prewarm, want)
					}
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 2, eps, func(oc *config.Origin) { oc.Subset.Size = 4 }, nil)
			before := r.state()
			if c, err := r.Prepare(r.oc, config.Fleet{Size: 1}); c != nil || err != nil {
				t.Fatalf("Prepare of the same configuration: %v %v, want nothing to do", c, err)
			}
			next := *r.oc
			next.Endpoints = slices.Clone(r.oc.Endpoints)
			tc.edit(&next)
			c, err := r.Prepare(&next, config.Fleet{Size: 1})
			if err != nil || c == nil {
				t.Fatalf("Prepare: %v %v", c, err)
			}
			if err := c.Commit(); err != nil {
				t.Fatal(err)
			}
			if r.Config() != &next {
				t.Fatal("the new configuration is not in force")
			}
			tc.check(t, r, before)
		})
	}
}

// samePools fails unless every loop holds the very pools it held.
func samePools(t *testing.T, r *rig, before []map[string]*pool.Pool) {
	t.Helper()
	for l, m := range r.state() {
		if !maps.Equal(m, before[l]) {
			t.Fatalf("loop %d's pools were replaced", l)
		}
	}
}

// TestPrepareRefusesBadSettings: a reload with a setting the origin cannot
// take is refused whole, naming the key.
func TestPrepareRefusesBadSettings(t *testing.T) {
	r := newRig(t, 1, addrs(2), nil, nil)
	for _, tc := range []struct {
		edit func(*config.Origin)
		want string
	}{
		{func(oc *config.Origin) { oc.Pool.OverCap = "sometimes" }, "origins[app].pool.over_cap"},
		{func(oc *config.Origin) { oc.Pool.MaxConnections = 0 }, "origins[app].pool"},
		{func(oc *config.Origin) { oc.Subset.Algorithm = "bogus" }, "origins[app].subset.algorithm"},
	} {
		next := *r.oc
		tc.edit(&next)
		if c, err := r.Prepare(&next, config.Fleet{Size: 1}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("Prepare: %v %v, want an error naming %s", c, err, tc.want)
		}
	}
	if _, err := New(&config.Origin{Name: "x", Pool: config.Pool{OverCap: "sometimes"}}, &Env{Metrics: telemetry.New(), Loops: 1}); err == nil {
		t.Fatal("New took a bad pool setting")
	}
}

// TestFastNeedsItsOwnDialer: the fast path serves an origin only when its
// dialer opens upstream's own connections.
func TestFastNeedsItsOwnDialer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dialer   bool // an in-memory dialer replaces upstream's
		fastPath bool
		want     bool
	}{
		{"upstream's dialer", false, true, true},
		{"fast path off", false, false, false},
		{"another dialer", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 1, addrs(1), func(oc *config.Origin) { oc.Pool.Prewarm = 0 }, func(e *Env) {
				e.FastPath = tc.fastPath
				if !tc.dialer {
					e.Dialer = nil
				}
			})
			if r.Fast() != tc.want {
				t.Fatalf("Fast() = %v, want %v", r.Fast(), tc.want)
			}
		})
	}
}

// TestStickyKeysAndCookies: a sticky origin reads a request's key from
// hash_on, and makes a cookie for one that has none when it sets one.
func TestStickyKeysAndCookies(t *testing.T) {
	r := newRig(t, 1, addrs(2), func(oc *config.Origin) {
		oc.Balancer.Policy, oc.Balancer.HashOn = config.PolicyMaglev, "cookie sid"
		oc.Balancer.Cookie = &config.StickyCookie{TTL: time.Hour}
	}, nil)
	with := forward.HeaderFields(map[string][]string{"Cookie": {"sid=abc"}})
	if k := r.Key(with, forward.Peer{}); !k.Valid() || k != balance.KeyOfString("abc") {
		t.Fatalf("key %v, want the cookie's", k)
	}
	if k := r.Key(forward.HeaderFields(nil), forward.Peer{}); k.Valid() {
		t.Fatal("a request without the cookie has a key")
	}
	field, k, ok := r.NewCookie(nil)
	if !ok || !k.Valid() || !strings.HasPrefix(string(field), "sid=") || !strings.Contains(string(field), "Max-Age=3600") {
		t.Fatalf("NewCookie: %q %v %v", field, k, ok)
	}

	plain := newRig(t, 1, addrs(2), nil, nil)
	if plain.Sticky() || plain.Key(with, forward.Peer{}).Valid() {
		t.Fatal("a non-sticky origin reads keys")
	}
	if _, _, ok := plain.NewCookie(nil); ok {
		t.Fatal("a non-sticky origin makes cookies")
	}
}

// TestBeginFinishCountTheLoopsRequests: a request begun on a loop counts
// in the loop's requests (the view's share) and in flight until Finish.
func TestBeginFinishCountTheLoopsRequests(t *testing.T) {
	eps := addrs(2)
	r := newRig(t, 2, eps, func(oc *config.Origin) { oc.Subset.Algorithm = config.SubsetNone }, nil)
	var a forward.Attempt
	for range 3 {
		ol := r.Loop(1)
		r.Begin(&a, ol, r.Policy(), forward.Replay{Resend: true}, 1, balance.Key{})
		if r.Driver().InFlight(1) != 1 {
			t.Fatal("a begun request is not in flight on its loop")
		}
		r.Finish(&a, ol)
	}
	r.Begin(&a, r.Loop(0), r.Policy(), forward.Replay{Resend: true}, 1, balance.Key{})
	r.Finish(&a, r.Loop(0))
	v := r.View()
	if v.Loops[1].Requests != 3 || v.Loops[1].Share != 0.75 || v.Loops[0].Share != 0.25 {
		t.Fatalf("loops %+v, want 1 and 3 requests (shares 0.25, 0.75)", v.Loops)
	}
	if r.Driver().InFlight(0)+r.Driver().InFlight(1) != 0 {
		t.Fatal("finished requests still in flight")
	}
	if seen := r.Place(); seen.Index() < 0 || seen.Index() > 1 {
		t.Fatalf("placed on loop %d", seen.Index())
	}
}

// TestViewsAndGauges: the admin views and the gauges refreshed before a
// scrape describe the origin's loops and pools.
func TestViewsAndGauges(t *testing.T) {
	eps := addrs(4)
	r := newRig(t, 2, eps, func(oc *config.Origin) { oc.Subset.Algorithm = config.SubsetNone }, nil)
	lease, err := r.Pool(0, eps[0]).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	r.SetSourceError(errors.New("file gone"))
	v := r.View()
	if v.Name != "app" || v.SourceError != "file gone" || len(v.Loops) != 2 || len(v.Loops[0].Pools) != 4 {
		t.Fatalf("view %+v", v)
	}
	if pv := v.Loops[0].Pools[eps[0]]; pv.Busy != 1 || pv.Open != 1 || pv.Protocol != "h1" || pv.Util != 1 {
		t.Fatalf("the busy pool's view %+v", pv)
	}
	r.SetSourceError(nil)
	if r.View().SourceError != "" {
		t.Fatal("a recovered source still shows its error")
	}
	r.RefreshGauges()
	m := r.metrics
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"subset size", testutil.ToFloat64(m.SubsetSize.WithLabelValues("app", "0")), 4},
		{"open h1 connections", testutil.ToFloat64(m.ConnectionsOpen.WithLabelValues("app", "0", upstream.ProtoH1)), 4},
		{"utilization", testutil.ToFloat64(m.PoolUtilization.WithLabelValues("app", "0")), 0.25},
		{"placement local", testutil.ToFloat64(m.SubsetPlacement.WithLabelValues("app", PlacementLocal)), 1},
		{"placement shared", testutil.ToFloat64(m.SubsetPlacement.WithLabelValues("app", PlacementShared)), 0},
		{"panic", testutil.ToFloat64(m.PanicMode.WithLabelValues("app")), 0},
		{"created", testutil.ToFloat64(m.ConnectionsCreated.WithLabelValues("app", "1", upstream.ProtoH1)), 4},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// TestSLOGuardShedsLowPriority: with a workload whose class is over its
// p99 budget for EnterAfter ticks, the guard sheds routes of priority low
// (counted), and only those; a reload without the workload lifts it.
func TestSLOGuardShedsLowPriority(t *testing.T) {
	sloClk := clock.NewFake(time.Unix(1000, 0))
	mix := &workload.Mix{Classes: []workload.Class{
		{Name: "light", Percent: 70, Latency: 15 * time.Millisecond, SLO: &workload.Budget{P99: 10 * time.Millisecond}},
		{Name: "heavy", Percent: 30, Latency: 140 * time.Millisecond},
	}}
	r := newRig(t, 1, addrs(2), nil, func(e *Env) { e.Workload, e.SLOClock = mix, sloClk })
	light, low := Kind{Class: 0, Cost: 1}, Kind{Class: 0, Cost: 1, Low: true}
	if r.Started(Kind{Class: -1}).IsZero() == false {
		t.Fatal("a request of no class reads the clock")
	}
	start := r.Started(light)
	if start.IsZero() {
		t.Fatal("a request of a class is not timed")
	}
	for range slo.MinSamples {
		r.Served(light, start.Add(-time.Second)) // a second: far over 10 ms
	}
	if r.Admit(low) != forward.None {
		t.Fatal("shed before the guard's ticks")
	}
	sloClk.Advance(slo.EnterAfter * slo.Tick)
	if got := r.Admit(low); got != forward.SLOShed {
		t.Fatalf("a low-priority request: %v, want slo_shed", got)
	}
	if got := r.Admit(light); got != forward.None {
		t.Fatalf("a normal request: %v, want admitted", got)
	}
	if got := testutil.ToFloat64(r.metrics.RequestsShed.WithLabelValues("app", forward.SLOShed.String())); got != 1 {
		t.Fatalf("%v requests counted shed, want 1", got)
	}
	v := r.SLOView()
	if v == nil || len(v.Classes) != 2 || !v.Classes[0].Guarded {
		t.Fatalf("SLO view %+v, want the light class guarded", v)
	}
	r.RefreshGauges()
	if got := testutil.ToFloat64(r.metrics.SLOGuardActive.WithLabelValues("app", "light")); got != 1 {
		t.Fatalf("corput_slo_guard_active{light} %v, want 1", got)
	}
	r.SetWorkload(nil)
	if got := r.Admit(low); got != forward.None {
		t.Fatalf("after the workload was removed: %v, want admitted", got)
	}
	plain := newRig(t, 1, addrs(1), nil, nil)
	if plain.SLOView() != nil || !plain.Started(light).IsZero() || plain.Admit(low) != forward.None {
		t.Fatal("an origin without a workload guards")
	}
}

// TestAttemptsReportToTheOrigin: an attempt begun on the origin runs its
// retry policy, which tells Env.Trace how it ended, and the balancer's
// ejections reach the origin's metrics.
func TestAttemptsReportToTheOrigin(t *testing.T) {
	type heard struct {
		origin, ep string
		step       forward.Step
		reason     forward.Reason
	}
	var mu sync.Mutex
	var got []heard
	eps := addrs(5)
	r := newRig(t, 1, eps, func(oc *config.Origin) {
		oc.Subset.Algorithm = config.SubsetNone
		oc.Retry.On = nil
	}, func(e *Env) {
		e.Trace = func(origin, ep string, s forward.Step, rs forward.Reason) {
			mu.Lock()
			got = append(got, heard{origin, ep, s, rs})
			mu.Unlock()
		}
	})
	ol := r.Loop(0)
	for i := 0; i < 50 && r.View().Ejected == 0; i++ {
		var a forward.Attempt
		r.Begin(&a, ol, r.Policy(), forward.Replay{Resend: true}, 1, balance.Key{})
		if step := r.Driver().Acquire(context.Background(), &a, 0, false, nil); step != forward.Send {
			t.Fatalf("acquire: %v", step)
		}
		a.Respond(503, false)
		if step := a.Settle(); step != forward.Delivered {
			t.Fatalf("settle: %v", step)
		}
		r.Finish(&a, ol)
	}
	if r.View().Ejected != 1 {
		t.Fatal("no endpoint ejected after 50 answers of 503")
	}
	if got := testutil.ToFloat64(r.metrics.OutlierEjections.WithLabelValues("app", telemetry.EjectConsecutive5xx)); got != 1 {
		t.Fatalf("%v ejections counted, want 1", got)
	}
	if got := testutil.ToFloat64(r.metrics.OutlierEjected.WithLabelValues("app")); got != 1 {
		t.Fatalf("corput_outlier_ejected %v, want 1", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || got[0].origin != "app" || !slices.Contains(eps, got[0].ep) || got[0].step != forward.Delivered {
		t.Fatalf("heard %+v, want each attempt delivered by an endpoint of app", got)
	}
}

// TestOriginTLS: an origin over TLS says so; one that skips verification
// is warned of; TLS files that cannot be read refuse the origin, naming
// the key.
func TestOriginTLS(t *testing.T) {
	r := newRig(t, 1, addrs(1), func(oc *config.Origin) {
		oc.TLS = &config.ClientTLS{InsecureSkipVerify: true}
		oc.Pool.MaxResponseHeaderBytes = 12345
	}, func(e *Env) { e.Dialer = nil })
	if !r.TLS() || r.Name() != "app" || r.MaxResponseHead() != 12345 {
		t.Fatalf("TLS %v name %q max head %d", r.TLS(), r.Name(), r.MaxResponseHead())
	}
	if !strings.Contains(r.log.String(), "NOT verified") {
		t.Fatalf("no warning for an unverified origin:\n%s", r.log.String())
	}
	oc := config.DefaultOrigin()
	oc.Name = "app"
	oc.TLS = &config.ClientTLS{CA: t.TempDir() + "/missing.pem"}
	if _, err := New(&oc, &Env{Clock: clock.Real(), Log: slog.New(slog.DiscardHandler), Metrics: telemetry.New(), Loops: 1}); err == nil || !strings.Contains(err.Error(), "origins[app].tls") {
		t.Fatalf("New with a missing CA file: %v, want an error naming origins[app].tls", err)
	}
	next := *r.oc
	next.TLS = &config.ClientTLS{CA: t.TempDir() + "/missing.pem"}
	if _, err := r.Prepare(&next, config.Fleet{Size: 1}); err == nil || !strings.Contains(err.Error(), "origins[app].tls") {
		t.Fatalf("Prepare with a missing CA file: %v, want an error naming origins[app].tls", err)
	}
}

// TestSourceErrors: the view shows the membership source's error, else
// the last apply's.
func TestSourceErrors(t *testing.T) {
	r := newRig(t, 1, addrs(1), nil, nil)
	src, err := discovery.NewStatic("app", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.SetSource(src)
	r.SetSourceError(errors.New("xds: NACK"))
	if got := r.View().SourceError; got != "xds: NACK" {
		t.Fatalf("source error %q", got)
	}
	if err := r.Apply(membersOf(endpoints(addrs(1)))); err != nil {
		t.Fatal(err)
	}
	if got := r.View().SourceError; got != "" {
		t.Fatalf("a good membership leaves the error %q", got)
	}
}

// TestReconfigureSubsetAndEndpointsTogether: a reload that changes the
// subset settings and the static endpoints places the new endpoints by
// the new settings, in one change.
func TestReconfigureSubsetAndEndpointsTogether(t *testing.T) {
	all := addrs(12)
	r := newRig(t, 2, all[:8], func(oc *config.Origin) { oc.Subset.Size = 4 }, nil)
	next := *r.oc
	next.Subset.Size = 12
	next.Endpoints = endpoints(all)
	c, err := r.Prepare(&next, config.Fleet{Size: 1})
	if err != nil || c == nil {
		t.Fatalf("Prepare: %v %v", c, err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	for l, m := range r.state() {
		if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, slices.Sorted(slices.Values(all))) {
			t.Fatalf("loop %d holds %v, want all 12 endpoints in one subset", l, got)
		}
	}
	if v := r.View(); v.MembershipChanges != 1 || len(v.Endpoints) != 12 {
		t.Fatalf("%d changes, %d endpoints", v.MembershipChanges, len(v.Endpoints))
	}
}

// TestFleetResizeKeepsSharedIndices: a resize of the fleet keeps the
// control plane's shared ring, its subset count capped anew.
func TestFleetResizeKeepsSharedIndices(t *testing.T) {
	eps := addrs(16)
	r := newRig(t, 1, eps, func(oc *config.Origin) { oc.Subset.Size = 4 }, nil)
	indices := map[string]int{}
	for i, a := range eps {
		indices[a] = 15 - i
	}
	if err := r.ApplyMembership(Membership{Members: membersOf(endpoints(eps)), Shared: &subset.Shared{Indices: indices, Subsets: 4}}); err != nil {
		t.Fatal(err)
	}
	if n := r.Subsets().Subsets; n != 1 {
		t.Fatalf("%d subsets for a fleet of one loop, want 1 (capped)", n)
	}
	c, err := r.Prepare(r.oc, config.Fleet{Instance: 1, Size: 4})
	if err != nil || c == nil {
		t.Fatalf("Prepare: %v %v", c, err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	v := r.Subsets()
	if v.Subsets != 4 || v.Placement != PlacementShared || v.Gateway != 1 {
		t.Fatalf("after the resize: %d subsets, placement %s, gateway %d; want 4, shared, 1", v.Subsets, v.Placement, v.Gateway)
	}
	for _, e := range v.Endpoints {
		if e.Index != indices[e.Address] {
			t.Fatalf("%s moved to index %d, want the shared %d", e.Address, e.Index, indices[e.Address])
		}
	}
	if got := slices.Sorted(maps.Keys(r.Loop(0).Pools())); !slices.Equal(got, slices.Sorted(slices.Values(r.Snapshot().Members(1, 0)))) {
		t.Fatalf("the loop holds %v, not its subset at instance 1", got)
	}
}

// TestOnDemandPoolJoiningTheSubsetIsPrewarmed: an endpoint a loop reached
// outside its subset (an unwarmed pool made on demand) that a change then
// places in the loop's subset keeps its pool, now pre-warmed like every
// member's: the origin is not ready before its connection is open.
func TestOnDemandPoolJoiningTheSubsetIsPrewarmed(t *testing.T) {
	eps := addrs(16)
	r := newRig(t, 2, eps, func(oc *config.Origin) { oc.Subset.Size = 4 }, nil)
	ol := r.Loop(0)
	outside := outsideOf(t, ol, eps)
	p, err := r.PoolFor(ol, outside)
	if err != nil {
		t.Fatal(err)
	}
	r.dialer.taken()
	next := *r.oc
	next.Subset.Size = 16 // one subset: every loop holds every endpoint
	c, err := r.Prepare(&next, config.Fleet{Size: 1})
	if err != nil || c == nil {
		t.Fatalf("Prepare: %v %v", c, err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if r.Pool(0, outside) != p {
		t.Fatal("the on-demand pool was replaced")
	}
	if got := p.Config().Prewarm; got != 1 {
		t.Fatalf("the pool of %s, now in loop 0's subset, pre-warms %d connections, want 1 as every member's", outside, got)
	}
	if n := r.dialer.taken()[outside]; n == 0 {
		t.Fatalf("no connection dialled to %s on joining the subset", outside)
	}
}

// outsideOf is the first of eps loop ol holds no pool for.
func outsideOf(t *testing.T, ol *Loop, eps []string) string {
	t.Helper()
	for _, a := range eps {
		if _, ok := ol.Pools()[a]; !ok {
			return a
		}
	}
	t.Fatal("the loop holds a pool for every endpoint")
	return ""
}
