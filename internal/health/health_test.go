package health

import (
	"slices"
	"testing"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/health/healthtest"
	"github.com/corput/corput/internal/pool"
)

// check is the health_check of these tests: 1 s apart, up to 100 ms of
// jitter, 500 ms to answer, 2 failures to mark unhealthy.
func check() config.HealthCheck {
	hc := config.DefaultHealthCheck()
	hc.Interval, hc.Jitter, hc.Timeout, hc.UnhealthyThreshold, hc.HealthyThreshold = time.Second, 100*time.Millisecond, 500*time.Millisecond, 2, 2
	return hc
}

// TestSickEndpointWithoutTrafficIsFound: 10 endpoints, no requests; one
// answers 500, one accepts and never answers. Each is marked unhealthy
// within unhealthy_threshold × (interval + jitter) + timeout, both are
// ejected (2 of 10 is within the cap), the others are healthy, and the
// first requests afterwards go to healthy endpoints.
func TestSickEndpointWithoutTrafficIsFound(t *testing.T) {
	hc := check()
	r := newRig(t, 10, hc)
	bad, hung := r.addrs[0], r.addrs[1]
	r.origins[bad].Mode.Store(healthtest.S500)
	r.origins[hung].Mode.Store(healthtest.Hang)
	r.hang[hung] = true
	bound := time.Duration(hc.UnhealthyThreshold)*(hc.Interval+hc.Jitter) + hc.Timeout
	r.run(bound + 100*time.Millisecond)

	for _, a := range []string{bad, hung} {
		if st := r.c.State(a); st != Unhealthy {
			t.Fatalf("%s: state %s after %v; want unhealthy", a, st, bound)
		}
		at := r.changedAt(a)
		t.Logf("%s (%s) marked unhealthy %v after the start; bound %v", a, map[bool]string{true: "never answers", false: "answers 500"}[a == hung], at, bound)
		if at > bound {
			t.Errorf("%s: marked unhealthy after %v, above the bound %v", a, at, bound)
		}
	}
	for _, a := range r.addrs[2:] {
		if st := r.c.State(a); st != Healthy {
			t.Errorf("%s: state %s; want healthy", a, st)
		}
	}
	if n := r.bal.Ejected(); n != 2 {
		t.Fatalf("%d ejected; want the 2 sick ones", n)
	}
	p := r.bal.NewPicker(nil)
	defer p.Close()
	for range 200 {
		ep, err := p.Pick()
		if err != nil {
			t.Fatal(err)
		}
		if a := ep.Address(); a == bad || a == hung {
			t.Fatalf("a request after the checks went to sick %s", a)
		}
		ep.Done(time.Millisecond, balance.Success)
	}
	st := r.bal.Endpoint(bad).Status()
	if st.EjectedBy != balance.ReasonHealthCheck {
		t.Errorf("ejected by %q; want health_check", st.EjectedBy)
	}

	// Recovery: the 500 answers 200 again; healthy_threshold passes bring
	// it back, through slow start.
	r.origins[bad].Mode.Store(healthtest.OK)
	r.run(bound + 100*time.Millisecond + time.Duration(hc.HealthyThreshold)*(hc.Interval+hc.Jitter))
	if st := r.c.State(bad); st != Healthy {
		t.Fatalf("recovered endpoint: state %s", st)
	}
	st = r.bal.Endpoint(bad).Status()
	if st.Ejected || st.EffectiveWeight >= 0.5 {
		t.Fatalf("recovered endpoint: ejected %v, effective weight %.2f; want back, ramping from slow start's floor", st.Ejected, st.EffectiveWeight)
	}
}

// TestBusyEndpointsAreNotProbed: under steady live traffic that succeeds,
// at most 1 probe per endpoint per 10 intervals, over 60 s; the pools'
// warm connections are enough (no connection opened). After the traffic
// stops, probing resumes at the interval.
func TestBusyEndpointsAreNotProbed(t *testing.T) {
	hc := check()
	r := newRig(t, 4, hc)
	conns := r.conns()
	stop := r.traffic(100*time.Millisecond, nil)
	r.run(60 * time.Second)
	stop()
	busy := r.probes()
	for a, n := range busy {
		if n > 6 {
			t.Errorf("%s: %d probes in 60 s of steady traffic; want at most 1 per 10 intervals (6)", a, n)
		}
	}
	skipped := uint64(0)
	for _, a := range r.addrs {
		r.c.mu.Lock()
		skipped += r.c.targets[a].skips
		r.c.mu.Unlock()
	}
	t.Logf("60 s of traffic at 10 req/s per endpoint: probes %v, skipped %d", busy, skipped)
	if skipped < 4*50 {
		t.Errorf("skipped %d probes for live traffic; want about 60 per endpoint", skipped)
	}
	if d := r.conns() - conns; d != 0 {
		t.Errorf("%d connections opened under traffic with warm pools; want 0", d)
	}

	r.run(70 * time.Second)
	for a, n := range r.probes() {
		if got := n - busy[a]; got < 7 {
			t.Errorf("%s: %d probes in the 10 s after the traffic stopped; want the interval's (about 9)", a, got)
		}
	}
	if d := r.conns() - conns; d != 0 {
		t.Errorf("%d connections opened by probes on warm pools; want 0", d)
	}
}

// TestLiveFailureProbesSooner: a live failure brings the endpoint's next
// probe forward to within jitter; another endpoint's probes keep their
// schedule.
func TestLiveFailureProbesSooner(t *testing.T) {
	hc := check()
	hc.Interval, hc.Timeout = 10*time.Second, time.Second
	r := newRig(t, 2, hc)
	r.run(11 * time.Second) // every endpoint probed once
	before := r.probes()
	x := r.addrs[0]
	r.origins[x].Mode.Store(healthtest.S503)
	p := r.bal.NewPicker([]string{x})
	ep, err := p.Pick()
	p.Close()
	if err != nil {
		t.Fatal(err)
	}
	r.c.mu.Lock()
	due := r.c.targets[x].dueAt.Sub(r.clk.Now())
	r.c.mu.Unlock()
	ep.Done(time.Millisecond, balance.ServerError)
	r.run(11*time.Second + hc.Jitter)
	after := r.probes()
	if after[x]-before[x] != 1 || after[r.addrs[1]] != before[r.addrs[1]] {
		t.Fatalf("within jitter of a live failure (next probe was %v away): probes %v → %v; want one more to %s only", due, before, after, x)
	}
}

// TestBusyPoolIsLeftAlone: an HTTP/1.1 pool at max_connections whose one
// connection carries a live request gets no probe (skipped, pool_busy),
// and no connection is opened; once the connection is free again (and so
// the pool below its cap... here at it, with one idle) probing stays off,
// and resumes when the cap allows a second connection.
func TestBusyPoolIsLeftAlone(t *testing.T) {
	r := newRig(t, 1, check(), func(c *pool.Config) { c.MaxConnections = 1 })
	a := r.addrs[0]
	conns := r.conns()
	lease, ok := r.pools[a].TryAcquire(false)
	if !ok {
		t.Fatal("no warm connection")
	}
	r.run(5 * time.Second)
	if n := r.origins[a].Probes.Load(); n != 0 {
		t.Fatalf("%d probes while the only connection was busy", n)
	}
	r.c.mu.Lock()
	skips := r.c.targets[a].skips
	r.c.mu.Unlock()
	if skips == 0 {
		t.Fatal("no probe counted as skipped")
	}
	lease.Release()
	r.run(10 * time.Second)
	if n := r.origins[a].Probes.Load(); n != 0 {
		t.Fatalf("%d probes took the last idle connection of a pool at max_connections", n)
	}
	if d := r.conns() - conns; d != 0 {
		t.Fatalf("%d connections opened for probes beyond max_connections", d)
	}
	if err := r.pools[a].Reconfigure(func() pool.Config { c := r.pools[a].Config(); c.MaxConnections = 2; return c }(), nil); err != nil {
		t.Fatal(err)
	}
	r.run(15 * time.Second)
	if n := r.origins[a].Probes.Load(); n < 3 {
		t.Fatalf("%d probes once the pool was below max_connections; want the interval's", n)
	}
}

// TestScopeFollowsSync: only the endpoints Sync gives are probed; one
// dropped stops being probed, and what its checks held against it is
// released to passive detection.
func TestScopeFollowsSync(t *testing.T) {
	r := newRig(t, 4, check())
	r.origins[r.addrs[3]].Mode.Store(healthtest.S500)
	r.c.Sync(r.addrs[1:])
	r.run(5 * time.Second)
	if n := r.origins[r.addrs[0]].Probes.Load(); n != 0 {
		t.Fatalf("%d probes to an endpoint outside the subsets", n)
	}
	if !r.bal.Endpoint(r.addrs[3]).Status().Ejected {
		t.Fatal("the failing endpoint in scope was not ejected")
	}
	r.c.Sync(r.addrs[:3])
	if got := r.c.Probed(); !slices.Equal(got, sorted(r.addrs[:3])) {
		t.Fatalf("probed %v", got)
	}
	if r.bal.Endpoint(r.addrs[3]).Status().Ejected {
		t.Fatal("an endpoint out of scope stays ejected by checks nobody runs")
	}
	before := r.origins[r.addrs[3]].Probes.Load()
	r.run(10 * time.Second)
	if n := r.origins[r.addrs[3]].Probes.Load(); n != before {
		t.Fatal("a dropped endpoint is still probed")
	}
	if n := r.origins[r.addrs[0]].Probes.Load(); n < 3 {
		t.Fatalf("%d probes to the endpoint that joined the scope", n)
	}
}

// TestReconfigureInPlace: a reload that turns the checks off releases the
// endpoints they held; turned on again, probing resumes.
func TestReconfigureInPlace(t *testing.T) {
	r := newRig(t, 2, check())
	r.origins[r.addrs[0]].Mode.Store(healthtest.S500)
	r.run(5 * time.Second)
	if !r.bal.Endpoint(r.addrs[0]).Status().Ejected {
		t.Fatal("not ejected")
	}
	oc := config.DefaultOrigin()
	r.c.Configure(&oc) // no health_check
	if r.bal.Endpoint(r.addrs[0]).Status().Ejected {
		t.Fatal("checks turned off, the endpoint stays ejected")
	}
	n := r.probes()
	r.run(10 * time.Second)
	if !maps2Equal(n, r.probes()) {
		t.Fatal("probes after the checks were turned off")
	}
	hc := check()
	hc.Interval = 2 * time.Second
	oc.HealthCheck = &hc
	r.c.Configure(&oc)
	r.run(20 * time.Second)
	if got := r.origins[r.addrs[1]].Probes.Load() - n[r.addrs[1]]; got < 3 || got > 6 {
		t.Fatalf("%d probes in 10 s at a 2 s interval", got)
	}
}

func sorted(s []string) []string { c := slices.Clone(s); slices.Sort(c); return c }

func maps2Equal(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestTheTestOriginKnowsProbes(t *testing.T) {
	if UserAgent != healthtest.ProbeAgent {
		t.Fatalf("healthtest counts probes by %q; probes say %q", healthtest.ProbeAgent, UserAgent)
	}
}
