package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corput/corput/internal/kubetest"
	"github.com/corput/corput/internal/testbin"
	"github.com/corput/corput/internal/waitfor"
)

// TestKubernetesScale measures, against a real API server, what a control
// plane replica following ORIGINS×ENDPOINTS pods costs: its memory once
// every origin is published, and, under churn (CHURN endpoints a second
// turning not ready and back, for 10 s), the API server's watch events
// and bytes sent for EndpointSlices and the replica's CPU. It is a
// measurement, run on demand (docs/control-plane.md, "Scale"):
//
//	CORPUT_KUBE_SCALE=50x80 CORPUT_KUBE_CHURN=20 go test -run TestKubernetesScale -v ./internal/controlplane
func TestKubernetesScale(t *testing.T) {
	spec := os.Getenv("CORPUT_KUBE_SCALE")
	if spec == "" {
		t.Skip("a measurement: set CORPUT_KUBE_SCALE=ORIGINSxENDPOINTS (and CORPUT_KUBE_CHURN=N endpoints a second)")
	}
	var origins, endpoints int
	if _, err := fmt.Sscanf(spec, "%dx%d", &origins, &endpoints); err != nil || origins < 1 || origins > 250 || endpoints < 1 || endpoints > 60000 {
		t.Fatalf("CORPUT_KUBE_SCALE=%q: want ORIGINSxENDPOINTS, 1–250 × 1–60000", spec)
	}
	churn, _ := strconv.Atoi(os.Getenv("CORPUT_KUBE_CHURN"))
	if churn == 0 {
		churn = 20
	}
	s := kubetest.Shared(t)
	bin := testbin.Corput(t)
	ns := s.Namespace(t, "scale")
	ctx := context.Background()
	const perSlice = 100 // the endpoints controller's default maximum
	type sliceRef struct {
		origin int
		obj    *discoveryv1.EndpointSlice
	}
	var slices []*sliceRef
	var b strings.Builder
	b.WriteString("origins:\n")
	for o := range origins {
		name := fmt.Sprintf("svc-%d", o)
		fmt.Fprintf(&b, "  - {name: origin-%d, services: [{namespace: %s, name: %s, port: http}]}\n", o, ns, name)
		port := int32(8080)
		for first := 0; first < endpoints; first += perSlice {
			es := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, first/perSlice), Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: &port}},
			}
			for i := first; i < min(first+perSlice, endpoints); i++ {
				es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
					Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", o, i/250, i%250+1)},
					Conditions: discoveryv1.EndpointConditions{Ready: yes, Serving: yes, Terminating: no},
					Zone:       ptrTo(fmt.Sprintf("z%d", i%3)),
					TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-pod-%d", name, i)},
				})
			}
			got, err := s.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			slices = append(slices, &sliceRef{o, got})
		}
	}
	source := filepath.Join(t.TempDir(), "origins.yaml")
	writeFile(t, source, b.String())
	// The API server watches EndpointSlices itself (and in a cluster every
	// kube-proxy does): the control plane's share is its watches' share.
	baseWatchers := sliceWatches(t, s)
	cp := startControlPlaneProc(t, bin, "control plane", "--state", "kubernetes:"+ns+"/cp", "--source", source,
		"--kubeconfig", s.Kubeconfig, "--listen", "127.0.0.1:0", "--fleet-listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
		"--debounce", "1s", "--lease-duration", "15s", "--lease-retry", "2s", "--id", "cp-0")
	start := time.Now()
	waitfor.Within(t, 10*time.Minute, "every origin published", func() bool {
		return sumSeries(t, cp.admin, "corput_controlplane_endpoints{") == float64(origins*endpoints)
	})
	published := time.Since(start)
	time.Sleep(3 * time.Second) // settle: the state written, the heap after a GC cycle or two
	rss, heap := vmRSS(t, cp.cmd.Process.Pid), metricValue(t, cp.admin, "go_memstats_heap_inuse_bytes")
	apiRSS := vmRSS(t, s.APIServerPID())

	// Churn: each second, churn endpoints turn not ready and the ones of
	// the second before turn ready again; one slice update each.
	watch := func() (events, bytes float64) {
		sel := `{group="discovery.k8s.io",resource="endpointslices",version="v1"}`
		return apiMetric(t, s, "apiserver_watch_events_total"+sel), apiMetric(t, s, "apiserver_watch_events_sizes_sum"+sel)
	}
	e0, b0 := watch()
	watchers := sliceWatches(t, s)
	cpu0 := metricValue(t, cp.admin, "process_cpu_seconds_total")
	const seconds = 10
	updates := 0
	next := 0
	var down []*sliceRef
	for sec := range seconds {
		tick := time.Now()
		for _, sr := range down { // back to ready
			sr.obj.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: yes, Serving: yes, Terminating: no}
			updateSlice(t, s, ns, sr.obj)
			updates++
		}
		down = down[:0]
		for range churn / 2 {
			sr := slices[next%len(slices)]
			next++
			sr.obj.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: no, Serving: no, Terminating: no}
			updateSlice(t, s, ns, sr.obj)
			updates++
			down = append(down, sr)
		}
		if sec < seconds-1 {
			time.Sleep(time.Until(tick.Add(time.Second)))
		}
	}
	time.Sleep(2 * time.Second)
	e1, b1 := watch()
	cpu1 := metricValue(t, cp.admin, "process_cpu_seconds_total")
	t.Logf("scale %d origins × %d endpoints = %d (in %d EndpointSlices): published in %v; control plane RSS %.1f MiB, Go heap in use %.1f MiB; kube-apiserver RSS %.1f MiB",
		origins, endpoints, origins*endpoints, len(slices), published.Round(time.Millisecond), rss/(1<<20), heap/(1<<20), apiRSS/(1<<20))
	share := (watchers - baseWatchers) / watchers
	events, bytes := (e1-e0)*share, (b1-b0)*share
	t.Logf("churn %d EndpointSlice updates in %d s: the API server sent the control plane's %.0f watch(es) %.0f events (%.2f per update) of %.0f bytes (%.0f bytes per event; %.0f watches on EndpointSlices in all); the control plane used %.2f CPU-seconds (%.2f ms per update)",
		updates, seconds, watchers-baseWatchers, events, events/float64(updates), bytes, bytes/max(events, 1), watchers, cpu1-cpu0, 1000*(cpu1-cpu0)/float64(updates))
}

// sliceWatches is the API server's open watches on EndpointSlices.
func sliceWatches(t *testing.T, s *kubetest.Server) float64 {
	t.Helper()
	return apiMetricSum(t, s, `apiserver_longrunning_requests{`, `resource="endpointslices"`, `verb="WATCH"`)
}

func updateSlice(t *testing.T, s *kubetest.Server, ns string, es *discoveryv1.EndpointSlice) {
	t.Helper()
	got, err := s.Client.DiscoveryV1().EndpointSlices(ns).Update(context.Background(), es, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	*es = *got
}

// vmRSS is a process's resident set, in bytes.
func vmRSS(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb * 1024
		}
	}
	return 0
}

// apiMetric reads one series of the API server's /metrics.
func apiMetric(t *testing.T, s *kubetest.Server, series string) float64 {
	t.Helper()
	return apiMetricSum(t, s, series+" ")
}

// apiMetricSum sums the API server's series that start with prefix and
// contain every one of has.
func apiMetricSum(t *testing.T, s *kubetest.Server, prefix string, has ...string) float64 {
	t.Helper()
	body, err := s.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return scrape(string(body), prefix, has...)
}
