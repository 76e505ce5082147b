package controlplane

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/kubetest"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/waitfor"
)

// kubeEP is one endpoint of a test EndpointSlice: its IP, zone and
// conditions (nil: unset, which Kubernetes reads as ready and serving).
type kubeEP struct {
	ip                          string
	zone                        string
	ready, serving, terminating *bool
}

var yes, no = ptrTo(true), ptrTo(false)

func ptrTo[T any](v T) *T { return &v }

func readyEP(ip, zone string) kubeEP {
	return kubeEP{ip: ip, zone: zone, ready: yes, serving: yes, terminating: no}
}

// terminatingEP is a pod in its grace period that still serves.
func terminatingEP(ip, zone string) kubeEP {
	return kubeEP{ip: ip, zone: zone, ready: no, serving: yes, terminating: yes}
}

func notReadyEP(ip, zone string) kubeEP {
	return kubeEP{ip: ip, zone: zone, ready: no, serving: no, terminating: no}
}

// kubeObjects writes a namespace's Services and EndpointSlices as the
// endpoints controller would.
type kubeObjects struct {
	t      *testing.T
	client kubernetes.Interface
	ns     string
}

func newKubeObjects(t *testing.T, s *kubetest.Server) *kubeObjects {
	return &kubeObjects{t: t, client: s.Client, ns: s.Namespace(t, "cp")}
}

func (k *kubeObjects) service(name string, annotations map[string]string) {
	k.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.ns, Annotations: annotations},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}
	ctx := context.Background()
	api := k.client.CoreV1().Services(k.ns)
	if cur, err := api.Get(ctx, name, metav1.GetOptions{}); err == nil {
		cur.Annotations = annotations
		if _, err := api.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			k.t.Fatal(err)
		}
		return
	}
	if _, err := api.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		k.t.Fatal(err)
	}
}

// slice creates or replaces EndpointSlice name of Service svc, its
// endpoints on port http = port.
func (k *kubeObjects) slice(svc, name string, port int32, eps ...kubeEP) {
	k.t.Helper()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: k.ns, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: &port}},
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{Addresses: []string{e.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}}
		if e.zone != "" {
			ep.Zone = ptrTo(e.zone)
		}
		es.Endpoints = append(es.Endpoints, ep)
	}
	ctx := context.Background()
	api := k.client.DiscoveryV1().EndpointSlices(k.ns)
	if cur, err := api.Get(ctx, name, metav1.GetOptions{}); err == nil {
		es.ResourceVersion = cur.ResourceVersion
		if _, err := api.Update(ctx, es, metav1.UpdateOptions{}); err != nil {
			k.t.Fatal(err)
		}
		return
	}
	if _, err := api.Create(ctx, es, metav1.CreateOptions{}); err != nil {
		k.t.Fatal(err)
	}
}

func (k *kubeObjects) deleteSlice(name string) {
	k.t.Helper()
	if err := k.client.DiscoveryV1().EndpointSlices(k.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		k.t.Fatal(err)
	}
}

// kubeSourceYAML is a source file of one origin on Service svc's port http.
func kubeSourceYAML(origin, ns string, svcs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "origins:\n  - name: %s\n    subset: {size: 4}\n    services:\n", origin)
	for _, s := range svcs {
		fmt.Fprintf(&b, "      - {namespace: %s, name: %s, port: http}\n", ns, s)
	}
	return b.String()
}

// published is what the control plane serves for origin: address → its
// zone and weight, and the draining addresses, from the ClusterLoadAssignment.
func published(t *testing.T, cp *ControlPlane, origin string) (map[string]discovery.Endpoint, []string) {
	t.Helper()
	cla, ok := cp.server.Assignment(origin)
	if !ok {
		return nil, nil
	}
	serving := map[string]discovery.Endpoint{}
	var draining []string
	for _, loc := range cla.GetEndpoints() {
		for _, lbe := range loc.GetLbEndpoints() {
			sa := lbe.GetEndpoint().GetAddress().GetSocketAddress()
			addr := net.JoinHostPort(sa.GetAddress(), fmt.Sprint(sa.GetPortValue()))
			switch lbe.GetHealthStatus() {
			case corev3.HealthStatus_DRAINING:
				draining = append(draining, addr)
			case corev3.HealthStatus_HEALTHY:
				serving[addr] = discovery.Endpoint{Address: addr, Zone: loc.GetLocality().GetZone(), Weight: int(lbe.GetLoadBalancingWeight().GetValue())}
			}
		}
	}
	slices.Sort(draining)
	return serving, draining
}

// TestKubernetesSourceFollowsEndpointSlices, against a real API server:
// an origin naming a Service serves its EndpointSlices' ready endpoints
// with the slice's zones and the Service's weight annotation; a serving,
// terminating endpoint is published DRAINING (out of the ring); a
// not-ready one is out. On a fake clock with a long debounce: a join waits
// for the window, and an endpoint turning terminating is published at
// once (with the pending join), reaching corput's own xDS client as an
// urgent update. A new weight, and a slice deleted, follow the window.
func TestKubernetesSourceFollowsEndpointSlices(t *testing.T) {
	s := kubetest.Shared(t)
	k := newKubeObjects(t, s)
	k.service("app", map[string]string{WeightAnnotation: "3"})
	k.slice("app", "app-1", 8080, readyEP("10.1.0.1", "z1"), notReadyEP("10.1.0.2", "z1"),
		terminatingEP("10.1.0.3", "z2"), readyEP("10.1.0.4", "z2"))
	k.slice("app", "app-2", 8080, readyEP("10.1.0.4", "z2"), readyEP("10.1.0.6", "z3"))
	k.slice("other", "other-1", 8080, readyEP("10.9.0.1", "z1")) // another Service's: not followed

	dir := t.TempDir()
	source := filepath.Join(dir, "origins.yaml")
	writeFile(t, source, kubeSourceYAML("app", k.ns, "app"))
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	logger, _ := testlog.New(slog.LevelDebug)
	cp, err := Start(Options{Listen: "127.0.0.1:0", StatePath: filepath.Join(dir, "state.json"), Source: source,
		Kube: s.Config, Debounce: time.Hour, Clock: clk, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	gw := runXDS(t, cp.Addr(), "gw-0", "app")

	want := func(eps map[string]discovery.Endpoint, draining []string) func() bool {
		return func() bool {
			got, d := published(t, cp, "app")
			if len(got) != len(eps) || !slices.Equal(d, draining) {
				return false
			}
			for a, e := range eps {
				if got[a] != e {
					return false
				}
			}
			return true
		}
	}
	ep := func(ip, zone string, w int) (string, discovery.Endpoint) {
		a := ip + ":8080"
		return a, discovery.Endpoint{Address: a, Zone: zone, Weight: w}
	}
	set := func(eps ...func() (string, discovery.Endpoint)) map[string]discovery.Endpoint {
		out := map[string]discovery.Endpoint{}
		for _, f := range eps {
			a, e := f()
			out[a] = e
		}
		return out
	}
	e1 := func() (string, discovery.Endpoint) { return ep("10.1.0.1", "z1", 3) }
	e4 := func() (string, discovery.Endpoint) { return ep("10.1.0.4", "z2", 3) }
	e5 := func() (string, discovery.Endpoint) { return ep("10.1.0.5", "z3", 3) }
	e6 := func() (string, discovery.Endpoint) { return ep("10.1.0.6", "z3", 3) }
	waitfor.Until(t, "the first membership, at once", want(set(e1, e4, e6), []string{"10.1.0.3:8080"}))
	waitfor.Until(t, "the gateway's client to hold it", func() bool { return len(gw.emitted()) == 1 })
	if u := gw.emitted()[0]; len(u.Endpoints) != 3 || u.Urgent {
		t.Fatalf("the gateway's client got %+v; want the 3 ready endpoints, not urgent", u)
	}

	// A join waits for the window.
	k.slice("app", "app-2", 8080, readyEP("10.1.0.4", "z2"), readyEP("10.1.0.6", "z3"), readyEP("10.1.0.5", "z3"))
	waitfor.Until(t, "the source to offer the join", func() bool {
		cp.source.mu.Lock()
		defer cp.source.mu.Unlock()
		return len(cp.source.last["app"].endpoints) == 4
	})
	if got, _ := published(t, cp, "app"); len(got) != 3 {
		t.Fatalf("a join was published before its window: %d endpoints", len(got))
	}
	// 10.1.0.1 turns terminating: published at once, with the join.
	k.slice("app", "app-1", 8080, terminatingEP("10.1.0.1", "z1"), notReadyEP("10.1.0.2", "z1"),
		terminatingEP("10.1.0.3", "z2"), readyEP("10.1.0.4", "z2"))
	waitfor.Until(t, "the terminating endpoint published at once", want(set(e4, e5, e6), []string{"10.1.0.1:8080", "10.1.0.3:8080"}))
	waitfor.Until(t, "the gateway's client to take it", func() bool { return len(gw.emitted()) == 2 })
	if u := gw.emitted()[1]; !u.Urgent || len(u.Endpoints) != 3 {
		t.Fatalf("the gateway's client got %+v; want urgent, 3 endpoints", u)
	}

	// A new weight and a deleted slice wait for the window.
	k.service("app", map[string]string{WeightAnnotation: "5"})
	k.deleteSlice("app-1")
	waitfor.Until(t, "the source to offer both", func() bool {
		cp.source.mu.Lock()
		defer cp.source.mu.Unlock()
		m := cp.source.last["app"]
		return len(m.draining) == 0 && len(m.endpoints) == 3 && m.endpoints[0].Weight == 5
	})
	clk.Advance(time.Hour)
	e4, e5, e6 = func() (string, discovery.Endpoint) { return ep("10.1.0.4", "z2", 5) },
		func() (string, discovery.Endpoint) { return ep("10.1.0.5", "z3", 5) },
		func() (string, discovery.Endpoint) { return ep("10.1.0.6", "z3", 5) }
	waitfor.Until(t, "the weight and the deletion after the window", want(set(e4, e5, e6), nil))
}

// TestKubernetesStateWritesAreOptimistic: two stores write one state. The
// first creates its objects; the second, whose view is older, is refused
// (409 from the API server), counted, and publishes nothing; it reads the
// object again and its next write goes over the first's. A store whose
// fence refuses writes sends nothing.
func TestKubernetesStateWritesAreOptimistic(t *testing.T) {
	s := kubetest.Shared(t)
	ns := s.Namespace(t, "state")
	logger, _ := testlog.New(slog.LevelDebug)
	var fenced bool
	fence := func() error {
		if fenced {
			return errNotLeading
		}
		return nil
	}
	ma, mb := NewMetrics(), NewMetrics()
	a := newKubeStore(s.Client, ns, "cp", func() error { return nil }, logger, ma)
	b := newKubeStore(s.Client, ns, "cp", fence, logger, mb)
	ctx := context.Background()
	for _, st := range []*kubeStore{a, b} {
		if got, err := st.load(ctx); err != nil || len(got.Origins) != 0 {
			t.Fatalf("load of an empty state: %+v, %v", got, err)
		}
	}
	one := testState(1, "10.0.0.1:80", "10.0.0.2:80")
	one.Fleet = []string{"gw-0"}
	if wrote, err := a.write(one); err != nil || !wrote {
		t.Fatal(err)
	}
	two := testState(7, "10.0.0.9:80")
	if _, err := b.write(two); err == nil || value(mb.StateConflicts) != 1 {
		t.Fatalf("a write over another writer's objects: err %v, conflicts %v; want a conflict", err, value(mb.StateConflicts))
	}
	if got, _ := newKubeStore(s.Client, ns, "cp", fence, logger, ma).load(ctx); got.Origins["payments"].Version != 1 {
		t.Fatalf("the refused write changed the object: %+v", got.Origins["payments"])
	}
	for range 3 { // one conflict per object at most (fleet and payments)
		if _, err := b.write(two); err == nil {
			break
		}
	}
	got, err := newKubeStore(s.Client, ns, "cp", fence, logger, ma).load(ctx)
	if err != nil || got.Origins["payments"].Version != 7 || len(got.Fleet) != 0 {
		t.Fatalf("after reading again, the second writer's state: %+v %v (%v); want version 7, no fleet", got.Origins["payments"], got.Fleet, err)
	}
	if _, err := a.write(testState(2, "10.0.0.1:80")); err == nil {
		t.Fatal("the first writer, now behind, wrote without a conflict")
	}
	// A state the store holds already costs no request.
	if wrote, err := b.write(two); err != nil || wrote {
		t.Fatalf("writing the state the objects hold: wrote %v, %v; want nothing sent", wrote, err)
	}
	fenced = true
	before := value(mb.StateConflicts)
	if _, err := b.write(testState(8, "10.0.0.8:80")); err != errNotLeading {
		t.Fatalf("a fenced write: %v, want errNotLeading", err)
	}
	if got, _ := newKubeStore(s.Client, ns, "cp", fence, logger, ma).load(ctx); got.Origins["payments"].Version != 7 || value(mb.StateConflicts) != before {
		t.Fatal("a fenced store wrote")
	}
}

// TestKubernetesUnreachableKeepsServing: with the API server out of
// reach, the control plane keeps serving the last good state; its
// metric and /readyz's detail say so (200: the gateways are better served
// by the last state than by none); once it is back, changes flow again.
func TestKubernetesUnreachableKeepsServing(t *testing.T) {
	s := kubetest.Shared(t)
	k := newKubeObjects(t, s)
	k.service("app", nil)
	k.slice("app", "app-1", 8080, readyEP("10.2.0.1", "z1"), readyEP("10.2.0.2", "z1"))
	proxy := newService(t, strings.TrimPrefix(s.URL, "https://"))
	cfg := rest.CopyConfig(s.Config)
	cfg.Host = "https://" + proxy.addr()

	dir := t.TempDir()
	source := filepath.Join(dir, "origins.yaml")
	writeFile(t, source, kubeSourceYAML("app", k.ns, "app"))
	logger, _ := testlog.New(slog.LevelDebug)
	cp, err := Start(Options{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", StatePath: filepath.Join(dir, "state.json"), Source: source,
		Kube: cfg, Debounce: -1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	waitfor.Until(t, "the first membership", func() bool { got, _ := published(t, cp, "app"); return len(got) == 2 })
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + cp.AdminAddr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	up := func() float64 { return metricValue(t, cp.AdminAddr(), "corput_controlplane_kubernetes_up") }
	if code, body := readyz(); code != 200 || body != "ready\n" || up() != 1 {
		t.Fatalf("/readyz %d %q, kubernetes_up %v; want 200, ready, 1", code, body, up())
	}

	proxy.cut(true)
	waitfor.Within(t, time.Minute, "the control plane to notice the API server is gone", func() bool { return up() == 0 })
	code, body := readyz()
	if code != 200 || !strings.Contains(body, "kubernetes API unreachable since") || !strings.Contains(body, "serving the last good state") {
		t.Fatalf("/readyz while the API server is away: %d %q", code, body)
	}
	if got, _ := published(t, cp, "app"); len(got) != 2 {
		t.Fatalf("the membership served while the API server is away: %d endpoints, want the last good 2", len(got))
	}
	k.slice("app", "app-1", 8080, readyEP("10.2.0.1", "z1"), readyEP("10.2.0.2", "z1"), readyEP("10.2.0.3", "z1"))
	proxy.cut(false)
	waitfor.Within(t, time.Minute, "the change made meanwhile, once the API server is back", func() bool {
		got, _ := published(t, cp, "app")
		return len(got) == 3
	})
	waitfor.Until(t, "kubernetes_up back to 1", func() bool { return up() == 1 })
	if code, body := readyz(); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz once the API server is back: %d %q", code, body)
	}
}

// kubeReplica starts a control plane whose state is in the Kubernetes API
// (ConfigMaps cp-* and the Lease cp of ns), with a short Lease.
func kubeReplica(t *testing.T, s *kubetest.Server, ns, id, source string) *ControlPlane {
	t.Helper()
	logger, _ := testlog.New(slog.LevelDebug)
	cp, err := Start(Options{Listen: "127.0.0.1:0", FleetListen: "127.0.0.1:0", StatePath: StateKubernetesPrefix + ns + "/cp",
		Source: source, Kube: s.Config, ID: id, LeaseDuration: 2 * time.Second, LeaseRetry: 500 * time.Millisecond,
		Debounce: -1, Logger: logger.With("replica", id)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Close)
	return cp
}

// TestKubernetesLeaderHandsOver: two replicas share their state in the
// API. The first takes the Lease and writes; the second serves the same
// assignment read from the ConfigMaps, and forwards its fleet port to the
// leader. The leader closes (SIGTERM): it releases the Lease, and the
// other takes it within a retry period, not a Lease duration. The gateway
// stand-ins (corput's own EDS and fleet clients, on the follower) see no
// index change and keep their fleet position; a change made after the
// hand-over reaches them. A state object another writer changes is
// written back by the leader.
func TestKubernetesLeaderHandsOver(t *testing.T) {
	s := kubetest.Shared(t)
	k := newKubeObjects(t, s)
	k.service("app", nil)
	eps := []kubeEP{}
	for i := 1; i <= 6; i++ {
		eps = append(eps, readyEP(fmt.Sprintf("10.3.0.%d", i), "z1"))
	}
	k.slice("app", "app-1", 8080, eps...)
	source := filepath.Join(t.TempDir(), "origins.yaml")
	writeFile(t, source, kubeSourceYAML("app", k.ns, "app"))

	a := kubeReplica(t, s, k.ns, "a", source)
	waitfor.Within(t, time.Minute, "replica a to lead", a.Leading)
	b := kubeReplica(t, s, k.ns, "b", source)
	waitfor.Until(t, "replica b to serve the leader's assignment", func() bool {
		sa, sb := a.State().Origins["app"], b.State().Origins["app"]
		return sa != nil && sb != nil && sa.Version == sb.Version && sa.sameContent(sb)
	})
	if b.Leading() {
		t.Fatal("two replicas lead")
	}
	before := a.State().Origins["app"]
	gw := runXDS(t, b.Addr(), "gw-0", "app")
	fl := runFleetXDS(t, discovery.XDSConfig{Server: b.FleetAddr(), NodeID: "gw-0"})
	waitfor.Until(t, "the gateway's membership from the follower", func() bool { return len(gw.emitted()) == 1 })
	waitfor.Until(t, "the gateway's fleet position through the follower", func() bool { return len(fl.emitted()) == 1 })
	if p := fl.emitted()[0]; p.Instance != 0 || p.Size != 1 {
		t.Fatalf("fleet position %+v, want 0 of 1", p)
	}

	start := time.Now()
	a.Close()
	waitfor.Within(t, time.Minute, "replica b to take the released Lease", b.Leading)
	took := time.Since(start)
	if st := b.State().Origins["app"]; st.Version != before.Version || !st.sameContent(before) {
		t.Fatalf("the new leader's assignment %+v differs from the old one's %+v", st, before)
	}
	waitfor.Until(t, "the fleet client to reconnect to the new leader", func() bool {
		_, f := b.role()
		return f != nil && slices.ContainsFunc(f.members(), func(m FleetMember) bool { return m.Node == "gw-0" && m.Connected })
	})
	if e := fl.emitted(); len(e) != 1 {
		t.Fatalf("the gateway's fleet positions %v; the hand-over must not move it", e)
	}
	if e := gw.emitted(); len(e) != 1 {
		t.Fatalf("the gateway's memberships %v; the hand-over must not change one", e)
	}
	t.Logf("replica a closed (Lease released); b leads %v later (Lease 2s, retry 0.5s)", took.Round(time.Millisecond))

	// A change after the hand-over reaches the gateway: the joiner at the end.
	k.slice("app", "app-1", 8080, append(eps, readyEP("10.3.0.7", "z1"))...)
	waitfor.Until(t, "the change after the hand-over", func() bool { return len(gw.emitted()) == 2 })
	u := gw.emitted()[1]
	for _, e := range u.Endpoints {
		if i, ok := before.Indices()[e.Address]; ok && i != e.RingIndex {
			t.Fatalf("%s moved %d → %d", e.Address, i, e.RingIndex)
		}
	}

	// Another writer changes the origin's object: the leader puts its own back.
	store := newKubeStore(s.Client, k.ns, "cp", func() error { return nil }, nil, NewMetrics())
	st, err := store.load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := b.State().Origins["app"]
	forged := st.Clone()
	forged.Origins["app"].Endpoints[0].Address, forged.Origins["app"].Endpoints[1].Address =
		forged.Origins["app"].Endpoints[1].Address, forged.Origins["app"].Endpoints[0].Address
	if _, err := store.write(forged); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "the leader to write its state back", func() bool {
		got, err := newKubeStore(s.Client, k.ns, "cp", nil, nil, NewMetrics()).load(context.Background())
		return err == nil && got.Origins["app"].sameContent(want) && got.Origins["app"].Version == want.Version
	})
}
