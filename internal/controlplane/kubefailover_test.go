package controlplane

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corput/corput/internal/kubetest"
	"github.com/corput/corput/internal/testbin"
	"github.com/corput/corput/internal/waitfor"
)

// service is a TCP proxy that stands in for a Kubernetes Service (what
// kube-proxy does): each connection goes to the next backend, in turn,
// that accepts it. A test can cut it off (cut): every connection closed
// and, while down, new ones refused, as an unreachable server.
type service struct {
	lis      net.Listener
	backends []string
	mu       sync.Mutex
	next     int
	down     bool
	conns    []net.Conn
	wg       sync.WaitGroup
}

func newService(t *testing.T, backends ...string) *service {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &service{lis: lis, backends: backends}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() {
		lis.Close()
		s.cut(true)
		s.wg.Wait()
	})
	return s
}

func (s *service) addr() string { return s.lis.Addr().String() }

func (s *service) serve() {
	defer s.wg.Done()
	for {
		in, err := s.lis.Accept()
		if err != nil {
			return
		}
		var out net.Conn
		s.mu.Lock()
		for i := 0; i < len(s.backends) && !s.down; i++ {
			b := s.backends[s.next%len(s.backends)]
			s.next++
			if out, err = net.DialTimeout("tcp", b, time.Second); err == nil {
				break
			}
		}
		if out == nil {
			s.mu.Unlock()
			in.Close()
			continue
		}
		s.conns = append(s.conns, in, out)
		s.wg.Add(2)
		s.mu.Unlock()
		go func() { defer s.wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
		go func() { defer s.wg.Done(); _, _ = io.Copy(in, out); in.Close() }()
	}
}

// cut closes every connection and, while down, refuses new ones.
func (s *service) cut(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

// kubeFleet is the whole Kubernetes deployment on one machine: pods of
// Service app (an EndpointSlice each), two control-plane replicas sharing
// their state in the API behind Service stand-ins (EDS and fleet ports),
// and two gateways placed by the control plane (fleet.server).
type kubeFleet struct {
	t        *testing.T
	s        *kubetest.Server
	k        *kubeObjects
	bin, ip  string
	pods     []*pod
	replicas []*cpProc
	gws      []*gateway
}

const (
	testLeaseDuration = 2 * time.Second
	testLeaseRetry    = 500 * time.Millisecond
)

func startKubeFleet(t *testing.T, pods int) *kubeFleet {
	t.Helper()
	f := &kubeFleet{t: t, s: kubetest.Shared(t), bin: testbin.Corput(t)}
	f.k = newKubeObjects(t, f.s)
	f.ip = hostIP(t)
	f.k.service("app", nil)
	for range pods {
		f.addPod()
	}
	dir := t.TempDir()
	source := filepath.Join(dir, "origins.yaml")
	writeFile(t, source, kubeSourceYAML("app", f.k.ns, "app"))
	var eds, fleet []string
	for _, id := range []string{"cp-a", "cp-b"} {
		r := startControlPlaneProc(t, f.bin, id, "--state", "kubernetes:"+f.k.ns+"/cp", "--source", source,
			"--kubeconfig", f.s.Kubeconfig, "--listen", "127.0.0.1:0", "--fleet-listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
			"--debounce", "1s", "--fleet-grace", "30s", "--lease-duration", testLeaseDuration.String(), "--lease-retry", testLeaseRetry.String(), "--id", id)
		if id == "cp-a" {
			waitfor.Within(t, time.Minute, "cp-a to lead", r.leading)
		}
		f.replicas = append(f.replicas, r)
		eds, fleet = append(eds, r.listen), append(fleet, r.fleet)
	}
	svcEDS, svcFleet := newService(t, eds...), newService(t, fleet...)
	for i := range 2 {
		name := fmt.Sprintf("gw-%d", i)
		f.gws = append(f.gws, startGateway(t, f.bin, dir, name, "",
			gatewayYAML(svcEDS.addr(), name, fmt.Sprintf("fleet: {server: %q, node_id: %s}", svcFleet.addr(), name))))
	}
	return f
}

// addPod starts a pod, ready in a slice of its own.
func (f *kubeFleet) addPod() *pod {
	p := startPod(f.t, f.bin, fmt.Sprintf("pod-%d", len(f.pods)), f.ip, "")
	f.k.slice("app", "app-"+p.id, int32(p.port), readyEP(p.ip, ""))
	f.pods = append(f.pods, p)
	return p
}

// leader is the replica that leads, and the other.
func (f *kubeFleet) leader() (leader, other *cpProc) {
	f.t.Helper()
	waitfor.Within(f.t, time.Minute, "one leader", func() bool { return f.replicas[0].leading() != f.replicas[1].leading() })
	if f.replicas[0].leading() {
		return f.replicas[0], f.replicas[1]
	}
	return f.replicas[1], f.replicas[0]
}

func (f *kubeFleet) lease() *coordinationv1.Lease {
	f.t.Helper()
	l, err := f.s.Client.CoordinationV1().Leases(f.k.ns).Get(context.Background(), "cp", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

// placement is what a gateway holds: its fleet position and ring.
type placement struct {
	instance, size int
	indices        map[string]int
}

func (f *kubeFleet) placements() []placement {
	var out []placement
	for _, g := range f.gws {
		v := subsetsView(f.t, g)
		p := placement{instance: v.Gateway, size: v.Fleet.Gateways, indices: map[string]int{}}
		for _, e := range v.Endpoints {
			p.indices[e.Address] = e.Index
		}
		out = append(out, p)
	}
	return out
}

// accepted is each pod's accepted upstream connections.
func (f *kubeFleet) accepted() map[string]int64 {
	out := map[string]int64{}
	for _, p := range f.pods {
		out[p.id] = p.stats(f.t).Connections.Accepted
	}
	return out
}

// TestKubernetesLeaderFailsOver: two control-plane replicas; the leader
// is SIGKILLed under load. The other takes the Lease no sooner than
// LeaseDuration after the last renewal (measured from the Lease's own
// times, and quoted against LeaseDuration + RetryPeriod); a pod added
// after the kill reaches both gateways; the gateways, which reach the
// replicas through a Service, see no index change and no fleet move, the
// pods accept no new connection, and no request fails.
func TestKubernetesLeaderFailsOver(t *testing.T) {
	f := startKubeFleet(t, 6)
	ld := startLoad(f.gws, 4, time.Millisecond)
	waitfor.Within(t, time.Minute, "load to flow", func() bool { return ld.count() > 200 })
	leader, other := f.leader()
	before, conns := f.placements(), f.accepted()

	leader.kill()
	killed := time.Now()
	lastRenewal := f.lease().Spec.RenewTime.Time
	var l *coordinationv1.Lease
	waitfor.Within(t, time.Minute, "the other replica to take the Lease", func() bool {
		l = f.lease()
		return ptrOr(l.Spec.HolderIdentity, "") == other.name
	})
	takeover := l.Spec.AcquireTime.Sub(lastRenewal)
	waitfor.Within(t, time.Minute, other.name+" to lead", other.leading)
	p := f.addPod()
	for i, g := range f.gws {
		waitfor.Within(t, time.Minute, fmt.Sprintf("gw-%d to take the pod added after the kill", i), func() bool {
			_, ok := g.indices(t)[p.addr]
			return ok
		})
	}
	time.Sleep(time.Second)
	reqs := ld.halt()
	after := f.placements()

	if bad := failures(reqs); len(bad) > 0 {
		t.Errorf("%d of %d requests failed; the first: %+v", len(bad), len(reqs), bad[0])
	}
	if takeover < testLeaseDuration {
		t.Errorf("the Lease was taken %v after the last renewal, before it expired (%v)", takeover, testLeaseDuration)
	}
	for i := range f.gws {
		b, a := before[i], after[i]
		if a.instance != b.instance || a.size != b.size {
			t.Errorf("gw-%d moved in the fleet: %d of %d → %d of %d", i, b.instance, b.size, a.instance, a.size)
		}
		delete(a.indices, p.addr)
		if !maps.Equal(a.indices, b.indices) {
			t.Errorf("gw-%d's indices changed across the failover: %v → %v", i, b.indices, a.indices)
		}
	}
	now := f.accepted()
	delete(now, p.id)
	if !maps.Equal(now, conns) {
		t.Errorf("the pods accepted new connections across the failover: %v → %v", conns, now)
	}
	t.Logf("SIGKILL of %s at %s; last renewal %s; %s took the Lease %v after it (LeaseDuration %v + RetryPeriod %v = %v), %v after the kill; "+
		"%d requests, %d failed; fleet positions %v → %v; upstream connections accepted per pod %v → %v",
		leader.name, killed.Format("15:04:05.000"), lastRenewal.Format("15:04:05.000"), other.name, takeover.Round(time.Millisecond),
		testLeaseDuration, testLeaseRetry, testLeaseDuration+testLeaseRetry, l.Spec.AcquireTime.Sub(killed).Round(time.Millisecond),
		len(reqs), len(failures(reqs)), positions(before), positions(after), conns, now)
}

func positions(ps []placement) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d/%d", p.instance, p.size))
	}
	return out
}

// TestKubernetesTwoWritersNeverSplitTheRing: the leader is paused
// (SIGSTOP, a partition), the other replica takes the Lease and writes the
// changes made meanwhile (a pod added, a pod terminating then removed);
// then the old leader resumes (SIGCONT) believing it leads, with those
// changes arriving at its informers. It writes nothing (its renewal is too
// old, and the resourceVersions it holds are stale), steps down, and
// serves the new leader's state: every gateway ends on the assignment the
// API holds, the same for both.
func TestKubernetesTwoWritersNeverSplitTheRing(t *testing.T) {
	f := startKubeFleet(t, 6)
	ld := startLoad(f.gws, 2, 2*time.Millisecond)
	leader, other := f.leader()
	writesBefore := metricValue(t, leader.admin, `corput_controlplane_state_writes_total{result="ok"}`)

	leader.signal(syscall.SIGSTOP)
	waitfor.Within(t, time.Minute, other.name+" to lead while "+leader.name+" is paused", other.leading)
	added := f.addPod()
	gone := f.pods[0]
	f.k.slice("app", "app-"+gone.id, int32(gone.port), terminatingEP(gone.ip, ""))
	waitfor.Within(t, time.Minute, "the new leader to publish both changes", func() bool {
		st := stateInAPI(t, f)
		a := st.Origins["app"]
		return a != nil && len(a.Draining) == 1 && a.Indices()[added.addr] >= 0 && len(a.Endpoints) == 6
	})
	f.k.deleteSlice("app-" + gone.id)

	leader.signal(syscall.SIGCONT)
	waitfor.Within(t, time.Minute, leader.name+" to step down", func() bool {
		code, body := leader.readyz()
		return code == 200 && strings.Contains(body, "role: follower")
	})
	waitfor.Within(t, time.Minute, "every gateway on the assignment the API holds", func() bool {
		want := stateInAPI(t, f).Origins["app"]
		if want == nil || len(want.Draining) != 0 {
			return false
		}
		for _, p := range f.placements() {
			if !maps.Equal(p.indices, want.Indices()) {
				return false
			}
		}
		return true
	})
	reqs := ld.halt()
	if bad := failures(reqs); len(bad) > 0 {
		t.Errorf("%d of %d requests failed; the first: %+v", len(bad), len(reqs), bad[0])
	}
	if w := metricValue(t, leader.admin, `corput_controlplane_state_writes_total{result="ok"}`); w != writesBefore {
		t.Errorf("the paused leader wrote %v state objects after it resumed; want none", w-writesBefore)
	}
	refused := len(leader.matching(regexpFor("may no longer hold the Lease")))
	stepped := len(leader.matching(regexpFor("steps down")))
	if stepped == 0 {
		t.Error("the paused leader never logged that it stepped down")
	}
	t.Logf("%s paused; %s led and wrote; %s resumed, refused %d writes of its own (fenced by its stale renewal), stepped down; both gateways hold %d endpoints at the API's indices; %d requests, %d failed",
		leader.name, other.name, leader.name, refused, len(f.placements()[0].indices), len(reqs), len(failures(reqs)))
}

// stateInAPI reads the control plane's state from the API.
func stateInAPI(t *testing.T, f *kubeFleet) *State {
	t.Helper()
	st, err := newKubeStore(f.s.Client, f.k.ns, "cp", nil, nil, NewMetrics()).load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}
