package deploy

import (
	"io/fs"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/kubetest"
	"github.com/corput/corput/internal/testbin"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testbin.M(kubetest.M(m)))
}

// mutation is one plausible mistake in a deployment file and the problem
// the checks must report for it.
type mutation struct {
	name      string
	file      string // in Files
	old, new  string // replaced once; old must occur
	wantError string // a substring of the reported problems
}

type mutations []mutation

// run applies each mutation to a copy of dir in Files (after the edits
// given first) and checks that report, given the mutated files, names the
// expected problem.
func (ms mutations) run(t *testing.T, dir string, report func(fs.FS) string, first ...mutation) {
	for _, mu := range ms {
		t.Run(mu.name, func(t *testing.T) {
			got := report(mutated(t, dir, append(slices.Clone(first), mu)...))
			t.Logf("reported: %s", got)
			if !strings.Contains(got, mu.wantError) {
				t.Errorf("want a problem containing %q, got:\n%s", mu.wantError, got)
			}
		})
	}
}

// mutated returns a copy of dir in Files with the mutations applied, in
// order.
func mutated(t *testing.T, dir string, mus ...mutation) fs.FS {
	t.Helper()
	out := fstest.MapFS{}
	err := fs.WalkDir(Files, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(Files, p)
		out[strings.TrimPrefix(p, dir+"/")] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, mu := range mus {
		f := out[mu.file]
		if f == nil || !strings.Contains(string(f.Data), mu.old) {
			t.Fatalf("%s: %q not found in %s/%s; update the mutation", mu.name, mu.old, dir, mu.file)
		}
		f.Data = []byte(strings.Replace(string(f.Data), mu.old, mu.new, 1))
	}
	return out
}

// filesIn returns dir of Files, as shipped.
func filesIn(t *testing.T, dir string) fs.FS {
	t.Helper()
	sub, err := fs.Sub(Files, dir)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m, err := loadManifests(filesIn(t, "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{
		"StatefulSet": len(m.statefulSets), "Service": len(m.services), "ConfigMap": len(m.configMaps),
		"ServiceAccount": len(m.serviceAccounts), "PodDisruptionBudget": len(m.pdbs),
		"PodMonitor": len(m.podMonitors), "Kustomization": len(m.kustomizations),
		"Secret": len(m.secrets), "NetworkPolicy": len(m.networkPolicies),
		"Deployment": len(m.deployments), "PersistentVolumeClaim": len(m.pvcs),
		"Role": len(m.roles), "RoleBinding": len(m.roleBindings),
	}
	want := map[string]int{
		"StatefulSet": 1, "Service": 3, "ConfigMap": 2, "ServiceAccount": 2,
		"PodDisruptionBudget": 1, "PodMonitor": 1, "Kustomization": 1,
		"Secret": 1, "NetworkPolicy": 1, "Deployment": 1, "PersistentVolumeClaim": 0,
		"Role": 1, "RoleBinding": 1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: decoded %d, want %d", k, got[k], n)
		}
	}
}

func TestManifestsAgree(t *testing.T) {
	m, err := loadManifests(filesIn(t, "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.problems() {
		t.Error(p)
	}
}

// manifestProblems is every problem the checks find in the manifests of
// fsys, one per line.
func manifestProblems(fsys fs.FS) string {
	m, err := loadManifests(fsys)
	if err != nil {
		return err.Error()
	}
	return strings.Join(m.problems(), "\n")
}

// TestManifestChecksCatchMistakes proves each check can fail: every
// mutation is a mistake someone could make, and must be reported.
func TestManifestChecksCatchMistakes(t *testing.T) {
	mutations{
		{"misspelt field", "statefulset.yaml", "  replicas: 3", "  replcas: 3", `unknown field "spec.replcas"`},
		{"field in the wrong case", "statefulset.yaml", "serviceName:", "ServiceName:", `"spec.ServiceName"`},
		{"duplicate field", "poddisruptionbudget.yaml", "  maxUnavailable: 1\n", "  maxUnavailable: 1\n  maxUnavailable: 2\n", "already set"},
		{"misspelt kind", "podmonitor.yaml", "kind: PodMonitor", "kind: PodMonitr", "not a kind the deployment uses"},
		{"misspelt field of a CRD", "podmonitor.yaml", "honorLabels: true", "honourLabels: true", `unknown field "spec.podMetricsEndpoints[0].honourLabels"`},
		{"fleet size out of step with replicas", "configmap.yaml", "fleet: {size: 3}", "fleet: {size: 4}", "fleet.size is 4 but spec.replicas is 3"},
		{"fleet size left to its default", "configmap.yaml", "fleet: {size: 3}", "", "fleet.size is 1 but spec.replicas is 3"},
		{"fleet size in the environment", "statefulset.yaml", "          env:\n", "          env:\n            - {name: CORPUT_FLEET_SIZE, value: \"3\"}\n", "CORPUT_FLEET_SIZE is set"},
		{"fleet instance in the ConfigMap", "configmap.yaml", "fleet: {size: 3}", "fleet: {instance: 0, size: 3}", "the ConfigMap sets fleet.instance"},
		{"fleet instance not the ordinal", "statefulset.yaml", "apps.kubernetes.io/pod-index", "statefulset.kubernetes.io/pod-name", "CORPUT_FLEET_INSTANCE"},
		{"readiness on the wrong path", "statefulset.yaml", "path: /readyz", "path: /ready", "readinessProbe: path"},
		{"liveness on the traffic port", "statefulset.yaml", "path: /healthz\n              port: admin", "path: /healthz\n              port: http", "livenessProbe: port"},
		{"grace period no longer than the drain", "statefulset.yaml", "terminationGracePeriodSeconds: 35", "terminationGracePeriodSeconds: 25", "the drain would be killed"},
		{"admin on loopback", "configmap.yaml", "listen: 0.0.0.0:9901", "listen: 127.0.0.1:9901", "binds 127.0.0.1 only"},
		{"admin port not the container's", "configmap.yaml", "listen: 0.0.0.0:9901", "listen: 0.0.0.0:9902", "not the container port named \"admin\""},
		{"admin without a token", "configmap.yaml", "admin: {listen: 0.0.0.0:9901, token_file: /etc/corput/admin-token}", "admin: 0.0.0.0:9901", "config warning: /etc/corput/corput.yaml:8: admin.token_file: warning:"},
		{"token file not mounted", "statefulset.yaml", "                      path: admin-token", "                      path: token", "admin.token_file: cannot read /etc/corput/admin-token"},
		{"token not in the Secret", "statefulset.yaml", "                    - key: admin-token", "                    - key: token", `Secret corput-admin-token has no key "token"`},
		{"Secret missing", "secret.yaml", "  name: corput-admin-token", "  name: corput-admin", "Secret corput-admin-token is not among the manifests"},
		{"empty token", "secret.yaml", "admin-token: REPLACE-ME-with-the-output-of-openssl-rand-hex-32", `admin-token: ""`, "/etc/corput/admin-token is empty"},
		{"admin port open to all", "networkpolicy.yaml", "        - port: http", "        - port: admin", "admits everyone to the admin port"},
		{"http port closed", "networkpolicy.yaml", "        - port: http", "        - port: 8081", "no rule admits everyone to the http port"},
		{"Prometheus not admitted", "networkpolicy.yaml", "        - port: admin", "        - port: 9902", "no rule admits Prometheus to the admin port"},
		{"admin from every pod of a namespace", "networkpolicy.yaml", "          podSelector:\n            matchLabels:\n              app.kubernetes.io/name: prometheus\n", "", "no pod labels"},
		{"admin from every namespace", "networkpolicy.yaml", "namespaceSelector:\n            matchLabels:\n              kubernetes.io/metadata.name: monitoring", "namespaceSelector: {}", "an empty namespaceSelector"},
		{"admin from every address", "networkpolicy.yaml", "        - namespaceSelector:", "        - ipBlock: {cidr: 0.0.0.0/0}\n        - namespaceSelector:", "admits everyone to the admin port"},
		{"NetworkPolicy selects no pod", "networkpolicy.yaml", "      app.kubernetes.io/component: gateway\n  policyTypes", "      app.kubernetes.io/component: gatway\n  policyTypes", "NetworkPolicy corput: selector"},
		{"NetworkPolicy restricts nothing", "networkpolicy.yaml", "policyTypes: [Ingress]", "policyTypes: [Egress]", "policyTypes lacks Ingress"},
		{"Prometheus selector undocumented", "networkpolicy.yaml", "              app.kubernetes.io/name: prometheus", "              app.kubernetes.io/name: vmagent", "the label app.kubernetes.io/name: vmagent is not in"},
		{"config the gateway refuses", "configmap.yaml", "max_pending: 50 ", "max_pending: 0 ", "ERR_UNBOUNDED_QUEUE_REJECTED"},
		{"config moved", "statefulset.yaml", "/etc/corput/corput.yaml", "/etc/corput/gateway.yaml", `has no key "gateway.yaml"`},
		{"admin port published", "service.yaml", "targetPort: http", "targetPort: admin", "publishes the admin port"},
		{"no governing Service", "statefulset.yaml", "serviceName: corput-peers", "serviceName: corput", "names no headless Service"},
		{"PDB selects no pod", "poddisruptionbudget.yaml", "      app.kubernetes.io/component: gateway\n", "      app.kubernetes.io/component: gatway\n", "PodDisruptionBudget corput: selector"},
		{"writable root filesystem", "statefulset.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem must be true"},
		{"capabilities kept", "statefulset.yaml", `drop: ["ALL"]`, `drop: ["NET_RAW"]`, "capabilities must drop ALL"},
		{"no memory limit", "statefulset.yaml", "              memory: 512Mi\n", "", "memory: want both"},
		{"no zone spread", "statefulset.yaml", "topologyKey: topology.kubernetes.io/zone", "topologyKey: example.com/rack", "no topology spread across topology.kubernetes.io/zone"},
		{"corput's endpoint label renamed by the scrape", "podmonitor.yaml", "honorLabels: true", "honorLabels: false", "set honorLabels: true"},
		{"file left out of the kustomization", "kustomization.yaml", "  - podmonitor.yaml\n", "", "podmonitor.yaml is not in resources"},
		{"NetworkPolicy left out of the kustomization", "kustomization.yaml", "  - networkpolicy.yaml\n", "", "networkpolicy.yaml is not in resources"},
		{"namespace hard-coded", "serviceaccount.yaml", "  name: corput\n", "  name: corput\n  namespace: prod\n", `sets namespace "prod"`},
		// The control plane (controlplane.yaml) and the gateways' link to it.
		{"misspelt field of the Deployment", "controlplane.yaml", "  strategy:", "  stratgy:", `unknown field "spec.stratgy"`},
		{"one replica", "controlplane.yaml", "  replicas: 2", "  replicas: 1", "control plane replicas: replicas must be at least 2"},
		{"state in a file", "controlplane.yaml", "kubernetes:$(POD_NAMESPACE)/corput-control-plane", "/var/lib/corput/state.json", "keep the state in the Kubernetes API"},
		{"state in another namespace", "controlplane.yaml", "fieldPath: metadata.namespace", "fieldPath: metadata.name", "the namespace must be $(VAR) with VAR from the downward API field metadata.namespace"},
		{"state on a volume", "controlplane.yaml", "          configMap:\n            name: corput-control-plane-origins\n", "          configMap:\n            name: corput-control-plane-origins\n        - name: state\n          persistentVolumeClaim: {claimName: corput-state}\n", "volume state is a PersistentVolumeClaim"},
		{"Lease not in the Role", "controlplane.yaml", "resourceNames: [corput-control-plane]", "resourceNames: [corput]", "the Role does not allow get leases.coordination.k8s.io corput-control-plane"},
		{"Role wider than needed", "controlplane.yaml", "resources: [configmaps]", "resources: [configmaps, secrets]", "the Role allows get secrets, which the control plane does not need"},
		{"Lease unnamed in the Role", "controlplane.yaml", "    resourceNames: [corput-control-plane]\n", "", "the Role allows update leases.coordination.k8s.io, which"},
		{"EndpointSlices not readable", "controlplane.yaml", "resources: [endpointslices]\n    verbs: [get, list, watch]", "resources: [endpointslices]\n    verbs: [get]", "the Role does not allow watch endpointslices.discovery.k8s.io"},
		{"Role bound to another account", "controlplane.yaml", "  - kind: ServiceAccount\n    name: corput-control-plane", "  - kind: ServiceAccount\n    name: corput", "no RoleBinding binds ServiceAccount corput-control-plane"},
		{"no token", "controlplane.yaml", "      automountServiceAccountToken: true\n", "      automountServiceAccountToken: false\n", "token is not mounted"},
		{"static addresses", "controlplane.yaml", "        services:\n          - {name: payments, port: http}", "        endpoints:\n          - {address: 10.0.0.7:8080, zone: us-east-1a}", "origin payments lists static endpoints"},
		{"source the control plane refuses", "controlplane.yaml", "{name: payments, port: http}", "{name: Payments, port: http}", "is not a Kubernetes name"},
		{"source moved", "controlplane.yaml", "/etc/corput-control-plane/origins.yaml", "/etc/corput-control-plane/o.yaml", `has no key "o.yaml"`},
		{"xds on loopback", "controlplane.yaml", "            - 0.0.0.0:18000", "            - 127.0.0.1:18000", "--listen \"127.0.0.1:18000\" binds 127.0.0.1 only"},
		{"fleet port not the container's", "controlplane.yaml", "            - 0.0.0.0:18001", "            - 0.0.0.0:18002", "--fleet-listen \"0.0.0.0:18002\": port 18002 is not the container port named \"fleet\""},
		{"fleet port advertised wrong", "controlplane.yaml", "            - $(POD_IP):18001", "            - $(POD_IP):18000", "the port is not the container port named \"fleet\""},
		{"fleet port advertised on the node", "controlplane.yaml", "fieldPath: status.podIP", "fieldPath: status.hostIP", "VAR from the downward API field status.podIP"},
		{"admin on the default address", "controlplane.yaml", "            - --admin\n            - 0.0.0.0:9902\n", "", "no --admin"},
		{"control plane readiness on the wrong path", "controlplane.yaml", "path: /readyz", "path: /ready", "control plane probes: readinessProbe: path"},
		{"control plane published outside", "controlplane.yaml", "  type: ClusterIP", "  type: LoadBalancer", "(ClusterIP)"},
		{"control plane admin published", "controlplane.yaml", "      targetPort: xds", "      targetPort: admin", "publishes the admin port; only xds and fleet"},
		{"control plane fleet port unpublished", "controlplane.yaml", "      targetPort: fleet", "      targetPort: xds", "publishes no fleet port"},
		{"control plane pods labelled as gateways", "controlplane.yaml", "    metadata:\n      labels:\n        app.kubernetes.io/name: corput\n        app.kubernetes.io/component: control-plane\n", "    metadata:\n      labels:\n        app.kubernetes.io/name: corput\n        app.kubernetes.io/component: gateway\n", "selects the control plane's pods too"},
		{"control plane writable root filesystem", "controlplane.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "control plane security: readOnlyRootFilesystem must be true"},
		{"control plane left out of the kustomization", "kustomization.yaml", "  - controlplane.yaml\n", "", "controlplane.yaml is not in resources"},
		{"gateway zone not the pod's", "statefulset.yaml", "metadata.labels['topology.kubernetes.io/zone']", "metadata.labels['zone']", "CORPUT_ZONE must come from the downward API field"},
		{"one zone for every gateway", "configmap.yaml", "        debounce: 2s\n", "        debounce: 2s\n        zone: {local: us-east-1a}\n", "zone.local \"us-east-1a\" is the same for every pod"},
		{"gateways pointed elsewhere", "configmap.yaml", "server: corput-control-plane:18000", "server: xds-control-plane:18000", "is not the control plane's Service corput-control-plane:18000"},
		{"gateways following a cluster it does not serve", "configmap.yaml", "cluster: payments", "cluster: pay", `discovery.cluster "pay" is not an origin of the control plane's source file`},
		{"gateway sizing unlike the control plane's", "configmap.yaml", "min_size: 25, max_size: 50}", "min_size: 20, max_size: 50}", "ring_subsets would be ignored"},
	}.run(t, "kubernetes", manifestProblems)
}

// TestKustomizeBuild renders the kustomization with kubectl's built-in
// kustomize, when kubectl is installed, and decodes the result strictly:
// every resource is rendered and the image is rewritten as the images
// entry says.
func TestKustomizeBuild(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	src, err := loadManifests(filesIn(t, "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", "kubernetes").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize kubernetes: %v", err)
	}
	built := &manifests{}
	if err := built.addFile("kustomize output", out); err != nil {
		t.Fatal(err)
	}
	if got, want := len(built.objects), len(src.objects); got != want {
		t.Errorf("kustomize rendered %d objects, the files hold %d", got, want)
	}
	img := src.kustomizations[0].Images[0]
	if len(built.statefulSets) != 1 {
		t.Fatalf("kustomize rendered %d StatefulSets, want 1", len(built.statefulSets))
	}
	if got, want := built.statefulSets[0].Spec.Template.Spec.Containers[0].Image, img.NewName+":"+img.NewTag; got != want {
		t.Errorf("rendered image %q, want %q", got, want)
	}
}

func loadDashboard(t *testing.T, fsys fs.FS) *grafanaDashboard {
	t.Helper()
	data, err := fs.ReadFile(fsys, "corput.json")
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := strictDecode(data, &d); err != nil {
		t.Fatalf("grafana/corput.json: %v", err)
	}
	return &d
}

func TestDashboardMatchesTelemetry(t *testing.T) {
	d := loadDashboard(t, filesIn(t, "grafana"))
	series, err := exportedSeries()
	if err != nil {
		t.Fatal(err)
	}
	queries := 0
	for _, p := range d.allPanels() {
		queries += len(p.Targets)
	}
	if queries < 15 {
		t.Errorf("%d queries; the dashboard should cover every docs/contract.md metric", queries)
	}
	for _, p := range d.problems(series) {
		t.Error(p)
	}
}

// TestDashboardChecksCatchMistakes proves each dashboard check can fail.
func TestDashboardChecksCatchMistakes(t *testing.T) {
	series, err := exportedSeries()
	if err != nil {
		t.Fatal(err)
	}
	mutations{
		{"misspelt key", "corput.json", `"gridPos"`, `"gridpos"`, `unknown field "panels[0].gridpos"`},
		{"metric that does not exist", "corput.json", "corput_upstream_connections_created_total{", "corput_upstream_connection_created_total{", "corput_upstream_connection_created_total is not a metric telemetry.New exports"},
		{"grouping by a label the metric lacks", "corput.json", "sum by (code_class) (rate(corput_downstream_requests_total", "sum by (origin) (rate(corput_downstream_requests_total", `corput_downstream_requests_total has no label "origin"`},
		{"selector label the metric lacks", "corput.json", `corput_downstream_requests_total{job=~\"$job\"}`, `corput_downstream_requests_total{job=~\"$job\",origin=~\"$origin\"}`, `corput_downstream_requests_total has no label "origin"`},
		{"label value never exported", "corput.json", `locality=\"local\"`, `locality=\"locl\"`, `no series has such a value`},
		{"rate of a gauge", "corput.json", `max by (origin) (corput_pool_utilization{job=~\"$job\",origin=~\"$origin\"})`, `max by (origin) (rate(corput_pool_utilization{job=~\"$job\",origin=~\"$origin\"}[5m]))`, "rate() of corput_pool_utilization, a GAUGE"},
		{"rate without a range", "corput.json", `rate(corput_requests_shed_total{job=~\"$job\",origin=~\"$origin\"}[$__rate_interval])`, `rate(corput_requests_shed_total{job=~\"$job\",origin=~\"$origin\"})`, "rate() needs a range selector"},
		{"quantile without le", "corput.json", "histogram_quantile(0.99, sum by (le) (", "histogram_quantile(0.99, sum by (origin) (", "drops the le label"},
		{"quantile of a sum series", "corput.json", "corput_pool_acquire_wait_seconds_bucket", "corput_pool_acquire_wait_seconds_sum", "not a _bucket series"},
		{"misspelt function", "corput.json", "histogram_quantile(0.5,", "histogram_quantil(0.5,", `unknown function "histogram_quantil"`},
		{"undefined variable", "corput.json", `origin=~\"$origin\"`, `origin=~\"$orgin\"`, "variable $orgin is not defined"},
		{"variable query on a missing label", "corput.json", "label_values(corput_downstream_requests_total, job)\"", "label_values(corput_downstream_requests_total, origin)\"", `corput_downstream_requests_total has no label "origin"`},
		{"duplicate panel id", "corput.json", `"id": 2,`, `"id": 1,`, "id must be positive and unique"},
		{"panel off the grid", "corput.json", `"x": 20,`, `"x": 22,`, "off the 24-column grid"},
		{"panels overlap", "corput.json", `"x": 20,`, `"x": 16,`, "overlaps panel"},
		{"metric without a panel", "corput.json", "sum by (origin) (increase(corput_membership_changes_total", "sum by (origin) (increase(corput_outlier_ejections_total", "corput_membership_changes_total (exported by telemetry) has no panel"},
	}.run(t, "grafana", func(fsys fs.FS) string {
		data, err := fs.ReadFile(fsys, "corput.json")
		if err != nil {
			return err.Error()
		}
		var d grafanaDashboard
		if err := strictDecode(data, &d); err != nil {
			return err.Error()
		}
		return strings.Join(d.problems(series), "\n")
	})
}

// render prints a parsed expression back in a canonical form, to compare
// trees in tests.
func (e *expr) render() string {
	var b strings.Builder
	switch e.kind {
	case selectorExpr:
		b.WriteString(e.name)
		if len(e.matchers) > 0 {
			parts := make([]string, len(e.matchers))
			for i, m := range e.matchers {
				parts[i] = m.label + m.op + strconv.Quote(m.value)
			}
			b.WriteString("{" + strings.Join(parts, ",") + "}")
		}
	case numberExpr:
		b.WriteString(e.name)
	case stringExpr:
		b.WriteString(strconv.Quote(e.name))
	case callExpr, aggExpr:
		b.WriteString(e.name)
		if len(e.grouping) > 0 || e.without {
			b.WriteString(map[bool]string{false: " by (", true: " without ("}[e.without] + strings.Join(e.grouping, ",") + ") ")
		}
		parts := make([]string, len(e.args))
		for i, a := range e.args {
			parts[i] = a.render()
		}
		b.WriteString("(" + strings.Join(parts, ", ") + ")")
	case binaryExpr:
		b.WriteString("(" + e.args[0].render() + " " + e.name)
		if e.grouping != nil || e.without {
			b.WriteString(map[bool]string{false: " on(", true: " ignoring("}[e.without] + strings.Join(e.grouping, ",") + ")")
		}
		b.WriteString(" " + e.args[1].render() + ")")
	}
	if e.rng != "" {
		b.WriteString("[" + e.rng + "]")
	}
	return b.String()
}

func TestParsePromQL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`up`, `up`},
		{`rate(a_total{x="1", y=~"b|c",}[5m])`, `rate(a_total{x="1",y=~"b|c"}[5m])`},
		{`sum by (le, origin) (rate(h_bucket{o=~"$o"}[$__rate_interval]))`, `sum by (le,origin) (rate(h_bucket{o=~"$o"}[$__rate_interval]))`},
		{`sum(rate(a[1m])) without (loop)`, `sum without (loop) (rate(a[1m]))`},
		{`histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m])))`, `histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m])))`},
		{`topk(10, sum by (endpoint) (g))`, `topk(10, sum by (endpoint) (g))`},
		{`count(max by (o) (p) > 0) or vector(0)`, `(count((max by (o) (p) > 0)) or vector(0))`},
		{`a / on(origin) group_left b`, `(a / on(origin) b)`},
		{`a / ignoring(locality) b`, `(a / ignoring(locality) b)`},
		{`-a + 2e3`, `(a + 2e3)`}, // signs and precedence are not modelled
		{`a == bool b`, `(a == b)`},
		{`max_over_time(rate(a[1m])[10m:1m])`, `max_over_time(rate(a[1m])[10m:1m])`},
		{`label_x{a!="b\"c"}`, `label_x{a!="b\"c"}`},
	} {
		e, err := parsePromQL(c.in)
		if err != nil {
			t.Errorf("parsePromQL(%q): %v", c.in, err)
			continue
		}
		if got := e.render(); got != c.want {
			t.Errorf("parsePromQL(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	for _, bad := range []string{
		`sum(rate(a[5m])`,         // unclosed call
		`rte(a[5m])`,              // unknown function
		`a{b="c"`,                 // unclosed matchers
		`a{b=1}`,                  // unquoted value
		`a{b="c}`,                 // unterminated string
		`sum by (o)`,              // aggregation without its argument
		`a offset 5m`,             // modifier the checker does not understand
		`{__name__="a"}`,          // selector without a name
		`a ] b`,                   // stray bracket
		`topk(a)`,                 // missing parameter
		`a[5m`,                    // unclosed range
		`histogram_quantile(0.9)`, // too few arguments
		`sum by (o) (a) by (o)`,   // grouped twice
		`a b`,                     // two expressions
		`and`,                     // keyword alone
	} {
		if e, err := parsePromQL(bad); err == nil {
			t.Errorf("parsePromQL(%q) = %s, want an error", bad, e.render())
		}
	}
}
