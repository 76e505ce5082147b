package controlplane

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/kubetest"
	"github.com/corput/corput/internal/testbin"
	"github.com/corput/corput/internal/waitfor"
)

// cpProc is a `corput control-plane` replica.
type cpProc struct {
	*proc
	listen, admin, fleet string
}

func startControlPlaneProc(t *testing.T, bin, name string, args ...string) *cpProc {
	t.Helper()
	p, m := startProc(t, name, nil, cpServing, bin, append([]string{"control-plane"}, args...)...)
	unq := func(s string) string { return strings.Trim(s, `"`) }
	return &cpProc{proc: p, listen: m[1], admin: unq(m[2]), fleet: unq(m[3])}
}

// readyz is the replica's /readyz: its status and body.
func (c *cpProc) readyz() (int, string) {
	resp, err := http.Get("http://" + c.admin + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (c *cpProc) leading() bool {
	code, body := c.readyz()
	return code == 200 && strings.Contains(body, "role: leader")
}

// gatewayYAML is a gateway of origin app from the control plane's EDS at
// eds; fleet is its fleet block.
func gatewayYAML(eds, node, fleet string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 2
%s
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    discovery: {type: xds, server: %q, cluster: app, node_id: %s}
    debounce: 2s
    pool: {prewarm: 1}
`, fleet, eds, node)
}

// TestKubernetesRolloutCostsNothing: an origin Service of 8 pods goes
// through a rolling update (one surge pod at a time: the new pod becomes
// ready, the old one turns serving and terminating, then is removed and
// its process stopped) while 2 `corput serve` gateways carry steady load
// through real `corput origin` processes standing in for the pods. The
// control plane follows the EndpointSlices, with its state in the API.
//
//   - No request fails.
//   - No request a gateway received after it logged the terminating
//     state applied reaches the terminating pod: the update skips both
//     debounces (the control plane's 1 s, the gateway's 2 s).
//   - The pods that stay keep their ring indices through every step.
//   - Zones for free: the gateways' zones (CORPUT_ZONE) and the
//     EndpointSlices' zones, with no zone in any corput file, keep
//     85 % ± 3 points of each gateway's requests in its zone.
func TestKubernetesRolloutCostsNothing(t *testing.T) {
	s := kubetest.Shared(t)
	bin := testbin.Corput(t)
	k := newKubeObjects(t, s)
	k.service("app", nil)
	const pods = 8
	zones := []string{"z1", "z2", "z3"}
	ip := hostIP(t)
	old := make([]*pod, pods)
	for i := range old {
		old[i] = startPod(t, bin, fmt.Sprintf("old-%d", i), ip, zones[i%3])
	}
	serving := map[*pod]bool{}
	terminating := map[*pod]bool{}
	var fresh []*pod // the new pods
	// Each pod's endpoint is in a slice of its own (its own port); a pod
	// that is gone has its slice deleted.
	writeSlices := func(changed ...*pod) {
		for _, p := range changed {
			name := "app-" + p.id
			switch {
			case terminating[p]:
				k.slice("app", name, int32(p.port), terminatingEP(p.ip, p.zone))
			case serving[p]:
				k.slice("app", name, int32(p.port), readyEP(p.ip, p.zone))
			default:
				k.deleteSlice(name)
			}
		}
	}
	for _, p := range old {
		serving[p] = true
		writeSlices(p)
	}

	dir := t.TempDir()
	source := filepath.Join(dir, "origins.yaml")
	writeFile(t, source, kubeSourceYAML("app", k.ns, "app"))
	cp := startControlPlaneProc(t, bin, "control plane", "--state", "kubernetes:"+k.ns+"/cp", "--source", source,
		"--kubeconfig", s.Kubeconfig, "--listen", "127.0.0.1:0", "--fleet-listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
		"--debounce", "1s", "--lease-duration", "2s", "--lease-retry", "500ms", "--id", "cp-0")
	waitfor.Within(t, time.Minute, "the control plane to lead", cp.leading)

	gws := []*gateway{
		startGateway(t, bin, dir, "gw-0", "z1", gatewayYAML(cp.listen, "gw-0", "fleet: {instance: 0, size: 2}")),
		startGateway(t, bin, dir, "gw-1", "z2", gatewayYAML(cp.listen, "gw-1", "fleet: {instance: 1, size: 2}")),
	}
	ld := startLoad(gws, 4, time.Millisecond)

	// Steady state: the zones.
	waitfor.Within(t, time.Minute, "load to flow", func() bool { return ld.count() > 100 })
	steadyFrom := time.Now()
	time.Sleep(3 * time.Second)
	steadyTo := time.Now()

	// The rolling update: one pod at a time.
	zoneOf := map[string]string{}
	for _, p := range old {
		zoneOf[p.id] = p.zone
	}
	type step struct {
		pod      *pod
		updated  time.Time    // the EndpointSlice update that made it terminating
		applied  [2]time.Time // each gateway's apply of it
		indexBad []string
		counted  int64 // requests the pod counted (its own ground truth)
	}
	var steps []step
	before := gws[0].indices(t)
	for i := range pods {
		n := startPod(t, bin, fmt.Sprintf("new-%d", i), ip, zones[i%3])
		zoneOf[n.id] = n.zone
		serving[n] = true
		fresh = append(fresh, n)
		writeSlices(n) // the new pod is ready
		time.Sleep(300 * time.Millisecond)

		o := old[i]
		terminating[o] = true
		urgentBefore := [2]int{countUrgent(gws[0].applied(t)), countUrgent(gws[1].applied(t))}
		st := step{pod: o, updated: time.Now()}
		writeSlices(o) // the old pod turns terminating
		for g, gw := range gws {
			waitfor.Within(t, time.Minute, fmt.Sprintf("gateway %d to apply %s terminating", g, o.id), func() bool {
				return countUrgent(gw.applied(t)) > urgentBefore[g]
			})
			st.applied[g] = lastUrgent(gw.applied(t))
		}
		after := gws[0].indices(t)
		for a, idx := range before {
			if j, ok := after[a]; ok && j != idx {
				st.indexBad = append(st.indexBad, fmt.Sprintf("%s %d→%d", a, idx, j))
			}
		}
		before = after
		time.Sleep(300 * time.Millisecond) // the pod's grace: requests in flight finish
		delete(serving, o)
		delete(terminating, o)
		writeSlices(o) // the pod is gone
		st.counted = o.stats(t).Total().Total()
		steps = append(steps, st)
		o.stop()
	}
	time.Sleep(time.Second)
	reqs := ld.halt()

	if f := failures(reqs); len(f) > 0 {
		t.Errorf("%d of %d requests failed; the first: %+v", len(f), len(reqs), f[0])
	}
	// After its gateway applied the terminating state, no request it
	// received reaches the pod. The log's time is truncated to the
	// millisecond: a request sent a millisecond after it was sent after
	// the apply.
	var report []string
	for _, st := range steps {
		var late []request
		for _, r := range reqs {
			if r.origin == st.pod.id && r.sent.After(st.applied[r.gw].Add(time.Millisecond)) {
				late = append(late, r)
			}
		}
		if len(late) > 0 {
			t.Errorf("%s: %d requests reached it after their gateway applied its terminating state (first sent %v after)",
				st.pod.id, len(late), late[0].sent.Sub(st.applied[late[0].gw]))
		}
		if len(st.indexBad) > 0 {
			t.Errorf("%s's step moved pods that stay: %v", st.pod.id, st.indexBad)
		}
		last, n := lastRequest(reqs, st.pod.id)
		if int64(n) != st.counted {
			t.Errorf("%s counted %d requests and answered %d to the clients: a request in flight was cut", st.pod.id, st.counted, n)
		}
		report = append(report, fmt.Sprintf("%s: EndpointSlice update → applied by gw-0 in %v, gw-1 in %v; it answered %d requests (its own count %d), the last sent %v after the update",
			st.pod.id, st.applied[0].Sub(st.updated).Round(time.Millisecond), st.applied[1].Sub(st.updated).Round(time.Millisecond),
			n, st.counted, last.Sub(st.updated).Round(time.Millisecond)))
	}
	for _, p := range fresh {
		_, n := lastRequest(reqs, p.id)
		report = append(report, fmt.Sprintf("%s (%s): answered %d requests; its own count %d", p.id, p.zone, n, p.stats(t).Total().Total()))
	}
	// Zones: the share of each gateway's requests in the steady window
	// that its own zone's pods answered.
	for g, gw := range gws {
		local, total := 0, 0
		for _, r := range reqs {
			if r.gw != g || r.sent.Before(steadyFrom) || r.sent.After(steadyTo) {
				continue
			}
			total++
			if zoneOf[r.origin] == gw.zone {
				local++
			}
		}
		share := 100 * float64(local) / float64(max(total, 1))
		report = append(report, fmt.Sprintf("gw-%d in %s: %.1f %% of %d requests answered in its zone (steady window)", g, gw.zone, share, total))
		if total < 1000 || share < 82 || share > 88 {
			t.Errorf("gw-%d: %.1f %% of %d requests stayed in zone %s; want 85 ± 3 over at least 1000", g, share, total, gw.zone)
		}
	}
	t.Logf("%d requests, %d failed; per step:\n%s", len(reqs), len(failures(reqs)), strings.Join(report, "\n"))
}

func countUrgent(a []applyLine) int {
	n := 0
	for _, l := range a {
		if l.urgent {
			n++
		}
	}
	return n
}

func lastUrgent(a []applyLine) time.Time {
	for i := len(a) - 1; i >= 0; i-- {
		if a[i].urgent {
			return a[i].at
		}
	}
	return time.Time{}
}

// lastRequest is when the last request origin answered was sent, and
// how many it answered.
func lastRequest(reqs []request, origin string) (last time.Time, n int) {
	for _, r := range reqs {
		if r.origin == origin {
			n++
			if r.sent.After(last) {
				last = r.sent
			}
		}
	}
	return last, n
}
