package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/discovery"
)

// strictDecode decodes one YAML (or JSON) document into v the way the API
// server's strict field validation does: a duplicate key, an unknown field
// or a field in the wrong case is an error naming the field.
func strictDecode(doc []byte, v any) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, v)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// podMonitor mirrors the fields of the Prometheus Operator's
// monitoring.coreos.com/v1 PodMonitor that the manifests use; its Go types
// are not among corput's modules. A field the manifests start to use must
// be added here, or the strict decode fails.
type podMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		JobLabel            string               `json:"jobLabel"`
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
			HonorLabels   bool   `json:"honorLabels"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// kustomization mirrors the fields of kustomize's Kustomization that the
// manifests use.
type kustomization struct {
	metav1.TypeMeta `json:",inline"`
	Resources       []string         `json:"resources"`
	Images          []kustomizeImage `json:"images"`
}

// kustomizeImage rewrites the image of every container named Name.
type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName"`
	NewTag  string `json:"newTag"`
}

// kinds maps "apiVersion/kind" to the Go type a document of that kind must
// decode into. A kind not listed here is an error: a typo in apiVersion or
// kind fails like a typo in a field.
var kinds = map[string]func() any{
	"v1/ConfigMap":                                  func() any { return new(corev1.ConfigMap) },
	"v1/Secret":                                     func() any { return new(corev1.Secret) },
	"networking.k8s.io/v1/NetworkPolicy":            func() any { return new(networkingv1.NetworkPolicy) },
	"v1/Service":                                    func() any { return new(corev1.Service) },
	"v1/ServiceAccount":                             func() any { return new(corev1.ServiceAccount) },
	"apps/v1/StatefulSet":                           func() any { return new(appsv1.StatefulSet) },
	"apps/v1/Deployment":                            func() any { return new(appsv1.Deployment) },
	"v1/PersistentVolumeClaim":                      func() any { return new(corev1.PersistentVolumeClaim) },
	"policy/v1/PodDisruptionBudget":                 func() any { return new(policyv1.PodDisruptionBudget) },
	"monitoring.coreos.com/v1/PodMonitor":           func() any { return new(podMonitor) },
	"kustomize.config.k8s.io/v1beta1/Kustomization": func() any { return new(kustomization) },
}

// manifests is the decoded content of deploy/kubernetes.
type manifests struct {
	files           []string // every .yaml file, sorted
	objects         []metav1.Object
	statefulSets    []*appsv1.StatefulSet
	deployments     []*appsv1.Deployment
	pvcs            []*corev1.PersistentVolumeClaim
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	secrets         []*corev1.Secret
	networkPolicies []*networkingv1.NetworkPolicy
	serviceAccounts []*corev1.ServiceAccount
	pdbs            []*policyv1.PodDisruptionBudget
	podMonitors     []*podMonitor
	kustomizations  []*kustomization
}

// loadManifests decodes every document of every .yaml file in fsys. It
// reports all failures at once, each with its file and document number.
func loadManifests(fsys fs.FS) (*manifests, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	m := &manifests{files: names}
	var errs []error
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, m.addFile(name, data))
	}
	return m, errors.Join(errs...)
}

// addFile decodes every document of one multi-document YAML stream.
func (m *manifests) addFile(name string, data []byte) error {
	docs, err := splitDocuments(data)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var errs []error
	for i, doc := range docs {
		if err := m.add(doc); err != nil {
			errs = append(errs, fmt.Errorf("%s, document %d: %w", name, i+1, err))
		}
	}
	return errors.Join(errs...)
}

// splitDocuments returns the non-empty YAML documents of a file.
func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if string(js) != "null" { // only comments
			docs = append(docs, doc)
		}
	}
}

// add decodes one document strictly into the type its apiVersion and kind
// name.
func (m *manifests) add(doc []byte) error {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return err
	}
	key := tm.APIVersion + "/" + tm.Kind
	newObject, ok := kinds[key]
	if !ok {
		return fmt.Errorf("apiVersion %q, kind %q: not a kind the deployment uses (typo?)", tm.APIVersion, tm.Kind)
	}
	obj := newObject()
	if err := strictDecode(doc, obj); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if o, ok := obj.(metav1.Object); ok {
		m.objects = append(m.objects, o)
	}
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		m.statefulSets = append(m.statefulSets, o)
	case *appsv1.Deployment:
		m.deployments = append(m.deployments, o)
	case *corev1.PersistentVolumeClaim:
		m.pvcs = append(m.pvcs, o)
	case *corev1.Service:
		m.services = append(m.services, o)
	case *corev1.ConfigMap:
		m.configMaps = append(m.configMaps, o)
	case *corev1.Secret:
		m.secrets = append(m.secrets, o)
	case *networkingv1.NetworkPolicy:
		m.networkPolicies = append(m.networkPolicies, o)
	case *corev1.ServiceAccount:
		m.serviceAccounts = append(m.serviceAccounts, o)
	case *policyv1.PodDisruptionBudget:
		m.pdbs = append(m.pdbs, o)
	case *podMonitor:
		m.podMonitors = append(m.podMonitors, o)
	case *kustomization:
		m.kustomizations = append(m.kustomizations, o)
	}
	return nil
}

// The pod-level facts the checks share.
const (
	podIndexField = "metadata.labels['apps.kubernetes.io/pod-index']"
	adminPortName = "admin"
	httpPortName  = "http"
)

// operatorTargetLabels are the labels the Prometheus Operator puts on every
// series it scrapes through a PodMonitor (job, namespace, pod, container,
// endpoint = the port name) plus Prometheus's own instance. The dashboard
// may select and group by them; a corput metric label of the same name
// needs honorLabels, or Prometheus renames it exported_<name>.
var operatorTargetLabels = []string{"job", "instance", "namespace", "pod", "container", "endpoint"}

// fleetCheck is one consistency check over the decoded manifests.
type fleetCheck struct {
	name  string
	check func(f *fleet) []string
}

// workload is the gateways' controller: the StatefulSet (positions from
// the pod ordinal), or a Deployment (positions from the control plane,
// fleet.server).
type workload struct {
	kind, name  string
	replicas    *int32
	selector    *metav1.LabelSelector
	template    *corev1.PodTemplateSpec
	serviceName string // the StatefulSet's governing Service
}

func (w workload) String() string { return w.kind + " " + w.name }

// gatewayWorkload returns the one StatefulSet or gateway Deployment.
func (m *manifests) gatewayWorkload() (workload, error) {
	var out []workload
	for _, s := range m.statefulSets {
		out = append(out, workload{"StatefulSet", s.Name, s.Spec.Replicas, s.Spec.Selector, &s.Spec.Template, s.Spec.ServiceName})
	}
	for _, d := range m.deploymentsOf(gatewayComponent) {
		out = append(out, workload{"Deployment", d.Name, d.Spec.Replicas, d.Spec.Selector, &d.Spec.Template, ""})
	}
	if len(out) != 1 {
		return workload{}, fmt.Errorf("want exactly one gateway StatefulSet or Deployment (%s=%s), have %d", componentLabel, gatewayComponent, len(out))
	}
	return out[0], nil
}

// deploymentsOf returns the Deployments of one component.
func (m *manifests) deploymentsOf(component string) []*appsv1.Deployment {
	return ofComponent(m.deployments, component)
}

// fleet is the decoded manifests reduced to the one gateway they describe.
type fleet struct {
	*manifests
	services  []*corev1.Service // the gateways' (component gateway), not the control plane's
	wl        workload
	pod       *corev1.PodSpec
	podLabels labels.Set
	container *corev1.Container
	config    *config.Config // nil when configErr is set
	configErr error
}

// problems runs every check and returns what is wrong, each prefixed by
// the check's name.
func (m *manifests) problems() []string {
	if len(m.kustomizations) != 1 {
		return []string{fmt.Sprintf("want exactly one Kustomization, have %d", len(m.kustomizations))}
	}
	wl, err := m.gatewayWorkload()
	if err != nil {
		return []string{err.Error()}
	}
	f := &fleet{manifests: m, wl: wl, services: m.servicesOf(gatewayComponent)}
	f.pod = &wl.template.Spec
	f.podLabels = labels.Set(wl.template.Labels)
	if len(f.pod.Containers) != 1 {
		return []string{fmt.Sprintf("want one container in the gateway pod, have %d", len(f.pod.Containers))}
	}
	f.container = &f.pod.Containers[0]
	f.config, f.configErr = f.loadConfig()
	var out []string
	for _, c := range fleetChecks {
		for _, p := range c.check(f) {
			out = append(out, c.name+": "+p)
		}
	}
	return append(out, f.controlPlaneProblems()...)
}

var fleetChecks = []fleetCheck{
	{"namespace", checkNoNamespace},
	{"selectors", checkSelectors},
	{"services", checkServices},
	{"probes", checkProbes},
	{"fleet env", checkFleetEnv},
	{"config", checkConfig},
	{"drain", checkDrain},
	{"security", checkSecurity},
	{"resources", checkResources},
	{"monitoring", checkMonitoring},
	{"network policy", checkNetworkPolicy},
	{"kustomization", checkKustomization},
}

func checkNoNamespace(f *fleet) []string {
	var out []string
	for _, o := range f.objects {
		if o.GetNamespace() != "" {
			out = append(out, fmt.Sprintf("%s sets namespace %q; leave it to the overlay or kubectl -n", o.GetName(), o.GetNamespace()))
		}
	}
	return out
}

// matchesPod reports whether a label selector is non-empty and selects the
// gateway pods.
func (f *fleet) matchesPod(what string, ls *metav1.LabelSelector) []string {
	if ls == nil || (len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0) {
		return []string{what + ": empty selector (selects everything or nothing)"}
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", what, err)}
	}
	if !sel.Matches(f.podLabels) {
		return []string{fmt.Sprintf("%s: selector %s does not select the pod labels %s", what, sel, f.podLabels)}
	}
	return nil
}

func checkSelectors(f *fleet) []string {
	out := f.matchesPod(f.wl.String(), f.wl.selector)
	for _, s := range f.services {
		out = append(out, f.matchesPod("Service "+s.Name, &metav1.LabelSelector{MatchLabels: s.Spec.Selector})...)
	}
	if len(f.pdbs) == 0 {
		out = append(out, "no PodDisruptionBudget")
	}
	for _, p := range f.pdbs {
		out = append(out, f.matchesPod("PodDisruptionBudget "+p.Name, p.Spec.Selector)...)
		if p.Spec.MaxUnavailable == nil && p.Spec.MinAvailable == nil {
			out = append(out, "PodDisruptionBudget "+p.Name+": neither maxUnavailable nor minAvailable")
		}
	}
	zones := false
	for _, c := range f.pod.TopologySpreadConstraints {
		out = append(out, f.matchesPod("topology spread on "+c.TopologyKey, c.LabelSelector)...)
		zones = zones || c.TopologyKey == corev1.LabelTopologyZone
	}
	if !zones {
		out = append(out, "no topology spread across "+corev1.LabelTopologyZone)
	}
	return out
}

// port resolves a Service target port or probe port against the container.
func (f *fleet) port(p intstr.IntOrString) (corev1.ContainerPort, bool) {
	for _, cp := range f.container.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp, true
		}
	}
	return corev1.ContainerPort{}, false
}

func checkServices(f *fleet) []string {
	var out []string
	governing := false
	for _, s := range f.services {
		headless := s.Spec.ClusterIP == corev1.ClusterIPNone
		if s.Name == f.wl.serviceName && headless {
			governing = true
		}
		for _, sp := range s.Spec.Ports {
			target := sp.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(sp.Port)
			}
			cp, ok := f.port(target)
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("Service %s port %q: target %s is no container port", s.Name, sp.Name, target.String()))
			case cp.Name == adminPortName && !headless:
				out = append(out, fmt.Sprintf("Service %s (type %s) publishes the admin port; keep it on the pods and the headless Service", s.Name, s.Spec.Type))
			}
		}
	}
	if !governing && f.wl.kind == "StatefulSet" {
		out = append(out, fmt.Sprintf("serviceName %q names no headless Service (clusterIP: None)", f.wl.serviceName))
	}
	return out
}

func checkProbes(f *fleet) []string {
	var out []string
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{
		{"readinessProbe", f.container.ReadinessProbe, "/readyz"},
		{"livenessProbe", f.container.LivenessProbe, "/healthz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			out = append(out, p.what+": want an httpGet probe on "+p.path)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			out = append(out, fmt.Sprintf("%s: path %q, want %q", p.what, p.probe.HTTPGet.Path, p.path))
		}
		if cp, ok := f.port(p.probe.HTTPGet.Port); !ok || cp.Name != adminPortName {
			out = append(out, fmt.Sprintf("%s: port %s is not the admin port", p.what, p.probe.HTTPGet.Port.String()))
		}
	}
	return out
}

// env returns the container's variable named name.
func (f *fleet) env(name string) (corev1.EnvVar, bool) {
	i := slices.IndexFunc(f.container.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		return corev1.EnvVar{}, false
	}
	return f.container.Env[i], true
}

func checkFleetEnv(f *fleet) []string {
	switch {
	case f.config != nil && f.config.Fleet.Server != "":
		return checkFleetFromControlPlane(f)
	case f.config == nil && f.wl.kind != "StatefulSet":
		return nil // reported by the config check
	case f.wl.kind != "StatefulSet":
		return []string{f.wl.String() + ": its pods have no dense ordinals; set fleet.server in the ConfigMap so the control plane assigns the positions"}
	}
	var out []string
	inst, ok := f.env(discovery.EnvFleetInstance)
	if !ok || inst.ValueFrom == nil || inst.ValueFrom.FieldRef == nil || inst.ValueFrom.FieldRef.FieldPath != podIndexField {
		out = append(out, "CORPUT_FLEET_INSTANCE must come from the downward API field "+podIndexField)
	}
	// The size is the ConfigMap's fleet.size, which a reload applies in
	// place; a variable would win over it and change only with a rollout.
	if _, ok := f.env(discovery.EnvFleetSize); ok {
		out = append(out, "CORPUT_FLEET_SIZE is set: it overrides the ConfigMap's fleet.size, so a resize would roll every pod; set fleet.size in the ConfigMap instead")
	}
	switch {
	case f.wl.replicas == nil:
		out = append(out, "spec.replicas is not set; the ConfigMap's fleet.size must equal it")
	case f.config == nil: // reported by the config check
	case !f.config.Written("fleet.size") || f.config.Fleet.Size != int(*f.wl.replicas):
		out = append(out, fmt.Sprintf("the ConfigMap's fleet.size is %d but spec.replicas is %d; change both together", f.config.Fleet.Size, *f.wl.replicas))
	case f.config.Written("fleet.instance"):
		out = append(out, "the ConfigMap sets fleet.instance: every pod would read it; the instance is the pod ordinal (CORPUT_FLEET_INSTANCE)")
	}
	return out
}

// checkFleetFromControlPlane: with fleet.server the control plane is the
// only source of positions (the gateway refuses a CORPUT_FLEET_* beside
// it), and it registers under the pod's name; whether fleet.server is the
// control plane's Service is checkCPGateways'.
func checkFleetFromControlPlane(f *fleet) []string {
	var out []string
	for _, k := range []string{discovery.EnvFleetInstance, discovery.EnvFleetSize} {
		if _, ok := f.env(k); ok {
			out = append(out, k+" is set: with fleet.server the gateway refuses to start; the control plane assigns the position")
		}
	}
	if f.config.Fleet.NodeID != "" {
		out = append(out, fmt.Sprintf("fleet.node_id %q is the same for every pod: leave it unset, so each registers under its pod name", f.config.Fleet.NodeID))
	}
	return out
}

// configPath returns the value of the container's --config flag.
func (f *fleet) configPath() string {
	args := append(slices.Clone(f.container.Command), f.container.Args...)
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			return v
		}
		if a == "--config" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// loadConfig follows --config to the volume mounted at its directory and
// parses it with config.Parse, as `corput serve` will in the pod. The
// volume's files (the ConfigMap's config, the Secret's admin token) are
// laid out in a temporary directory and the config's paths under the
// mount point there, so that Parse reads the files the pod will.
func (f *fleet) loadConfig() (*config.Config, error) {
	p := f.configPath()
	if p == "" {
		return nil, errors.New("the container runs without --config")
	}
	dir, key := path.Split(p)
	mount := slices.IndexFunc(f.container.VolumeMounts, func(vm corev1.VolumeMount) bool {
		return path.Clean(vm.MountPath) == path.Clean(dir)
	})
	if mount < 0 {
		return nil, fmt.Errorf("--config %s: nothing is mounted at %s", p, dir)
	}
	vol := slices.IndexFunc(f.pod.Volumes, func(v corev1.Volume) bool {
		return v.Name == f.container.VolumeMounts[mount].Name
	})
	if vol < 0 {
		return nil, fmt.Errorf("--config %s: no volume %q for the mount at %s", p, f.container.VolumeMounts[mount].Name, dir)
	}
	files, err := f.volumeFiles(f.pod.Volumes[vol])
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", p, err)
	}
	data, ok := files[key]
	if !ok {
		return nil, fmt.Errorf("--config %s: the volume at %s has no key %q", p, dir, key)
	}
	root, err := os.MkdirTemp("", "corput-deploy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	mountDir := path.Clean(dir) + "/"
	cfg, err := config.Parse([]byte(strings.ReplaceAll(data, mountDir, root+"/")), filepath.Join(root, key))
	if err != nil {
		return nil, fmt.Errorf("the config at %s: %s", p, strings.ReplaceAll(err.Error(), root+"/", mountDir))
	}
	return cfg, nil
}

// volumeFiles returns the files a ConfigMap or projected volume puts in
// its directory, by name: every key of its ConfigMaps and Secrets, or the
// items listed.
func (f *fleet) volumeFiles(v corev1.Volume) (map[string]string, error) {
	var sources []corev1.VolumeProjection
	switch {
	case v.ConfigMap != nil:
		sources = []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{
			LocalObjectReference: v.ConfigMap.LocalObjectReference, Items: v.ConfigMap.Items}}}
	case v.Projected != nil:
		sources = v.Projected.Sources
	default:
		return nil, fmt.Errorf("volume %s is neither a ConfigMap nor a projected volume", v.Name)
	}
	files := map[string]string{}
	for _, src := range sources {
		var (
			kind, name string
			data       map[string]string
			items      []corev1.KeyToPath
			found      bool
		)
		switch {
		case src.ConfigMap != nil:
			kind, name, items = "ConfigMap", src.ConfigMap.Name, src.ConfigMap.Items
			if i := slices.IndexFunc(f.configMaps, func(cm *corev1.ConfigMap) bool { return cm.Name == name }); i >= 0 {
				data, found = f.configMaps[i].Data, true
			}
		case src.Secret != nil:
			kind, name, items = "Secret", src.Secret.Name, src.Secret.Items
			if i := slices.IndexFunc(f.secrets, func(s *corev1.Secret) bool { return s.Name == name }); i >= 0 {
				data, found = secretData(f.secrets[i]), true
			}
		default:
			return nil, fmt.Errorf("volume %s: a projection of a kind the checks do not read", v.Name)
		}
		if !found {
			return nil, fmt.Errorf("volume %s: %s %s is not among the manifests", v.Name, kind, name)
		}
		if len(items) == 0 {
			maps.Copy(files, data)
			continue
		}
		for _, it := range items {
			content, ok := data[it.Key]
			if !ok {
				return nil, fmt.Errorf("volume %s: %s %s has no key %q", v.Name, kind, name, it.Key)
			}
			files[it.Path] = content
		}
	}
	return files, nil
}

// secretData is a Secret's content as the pod sees it: data, with
// stringData written over it (as the API server merges them).
func secretData(s *corev1.Secret) map[string]string {
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	maps.Copy(out, s.StringData)
	return out
}

// checkConfig: the config parses, its listeners are the container's ports,
// and the admin listener is reachable by the kubelet's probes.
func checkConfig(f *fleet) []string {
	if f.configErr != nil {
		return []string{f.configErr.Error()}
	}
	cfg := f.config
	var out []string
	for _, w := range cfg.Warnings() {
		if plaintextXDS(w) {
			continue
		}
		w.File = f.configPath() // parsed from a temporary copy (loadConfig)
		out = append(out, "config warning: "+w.String())
	}
	for _, l := range []struct{ key, addr, port string }{
		{"listen", cfg.Listen, httpPortName},
		{"admin", cfg.Admin.Listen, adminPortName},
	} {
		host, port, err := net.SplitHostPort(l.addr)
		if err != nil {
			out = append(out, fmt.Sprintf("%s %q: %v", l.key, l.addr, err))
			continue
		}
		n, _ := strconv.Atoi(port)
		if cp, ok := f.port(intstr.FromString(l.port)); !ok || int(cp.ContainerPort) != n {
			out = append(out, fmt.Sprintf("%s %q: port %s is not the container port named %q", l.key, l.addr, port, l.port))
		}
		if ip, err := netip.ParseAddr(host); host != "" && (err != nil || !ip.IsUnspecified()) {
			out = append(out, fmt.Sprintf("%s %q binds %s only; the kubelet and Prometheus reach the pod IP: use 0.0.0.0", l.key, l.addr, host))
		}
	}
	return out
}

// plaintextXDS is the one warning the gateways' config may carry: their
// xDS to the control plane is plaintext inside the cluster, as the
// control plane's manifest serves it, until both get the certificates
// of docs/deployment.md "Securing xDS" (certificates are the operator's
// to issue; the manifests ship none).
func plaintextXDS(w config.Diagnostic) bool {
	return (w.Key == "fleet.server" || strings.HasSuffix(w.Key, ".discovery.server")) && strings.Contains(w.Message, "plaintext xDS")
}

// checkDrain: on deletion the kubelet runs preStop, then sends SIGTERM and
// kills the pod terminationGracePeriodSeconds after deletion began. The
// grace period must cover the sleep and the gateway's whole drain.
func checkDrain(f *fleet) []string {
	if f.config == nil {
		return nil // reported by checkConfig
	}
	lc := f.container.Lifecycle
	if lc == nil || lc.PreStop == nil || lc.PreStop.Sleep == nil || lc.PreStop.Sleep.Seconds <= 0 {
		return []string{"want a preStop sleep so that endpoints deregister before SIGTERM"}
	}
	if f.pod.TerminationGracePeriodSeconds == nil {
		return []string{"terminationGracePeriodSeconds is not set"}
	}
	grace := time.Duration(*f.pod.TerminationGracePeriodSeconds) * time.Second
	sleep := time.Duration(lc.PreStop.Sleep.Seconds) * time.Second
	drain := f.config.Shutdown.DrainTimeout
	if grace <= sleep+drain {
		return []string{fmt.Sprintf("terminationGracePeriodSeconds %v ≤ preStop sleep %v + shutdown.drain_timeout %v: the drain would be killed", grace, sleep, drain)}
	}
	return nil
}

func checkSecurity(f *fleet) []string { return f.securityProblems(f.pod, f.container) }

// securityProblems checks one pod's hardening: the gateway's and the
// control plane's alike.
func (m *manifests) securityProblems(pod *corev1.PodSpec, container *corev1.Container) []string {
	var out []string
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		out = append(out, "pod securityContext.runAsNonRoot must be true")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		out = append(out, "pod securityContext.seccompProfile must be RuntimeDefault")
	}
	out = append(out, containerHardening(container)...)
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		out = append(out, "automountServiceAccountToken must be false: corput calls no Kubernetes API")
	}
	if !slices.ContainsFunc(m.serviceAccounts, func(sa *corev1.ServiceAccount) bool { return sa.Name == pod.ServiceAccountName }) {
		out = append(out, fmt.Sprintf("serviceAccountName %q is not among the manifests", pod.ServiceAccountName))
	}
	return out
}

// containerHardening checks a container's own securityContext: a
// read-only root filesystem, no privilege escalation, not privileged,
// every capability dropped.
func containerHardening(c *corev1.Container) []string {
	sc := c.SecurityContext
	if sc == nil {
		return []string{"container has no securityContext"}
	}
	var out []string
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		out = append(out, "readOnlyRootFilesystem must be true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		out = append(out, "allowPrivilegeEscalation must be false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		out = append(out, "privileged must not be true")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		out = append(out, "capabilities must drop ALL and add none")
	}
	return out
}

// podTemplate is the pod template of one workload, named for messages.
type podTemplate struct {
	name string // "StatefulSet corput"
	spec *corev1.PodSpec
}

// podTemplates lists the pod template of every workload among the
// manifests, whatever its component.
func (m *manifests) podTemplates() []podTemplate {
	var out []podTemplate
	for _, s := range m.statefulSets {
		out = append(out, podTemplate{"StatefulSet " + s.Name, &s.Spec.Template.Spec})
	}
	for _, d := range m.deployments {
		out = append(out, podTemplate{"Deployment " + d.Name, &d.Spec.Template.Spec})
	}
	return out
}

// runAsUser is the uid a container runs as by its pod's and its own
// securityContext (the container's wins); nil: the image's USER.
func runAsUser(pod *corev1.PodSpec, c *corev1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return c.SecurityContext.RunAsUser
	}
	if pod.SecurityContext != nil {
		return pod.SecurityContext.RunAsUser
	}
	return nil
}

// everyContainerProblems checks every container and init container of
// every workload, whichever component it belongs to: non-root (by the
// pod's or its own runAsNonRoot, and no runAsUser 0) and hardened
// (containerHardening), so that a sidecar or an init container added
// later is held to what corput's own containers are.
func (m *manifests) everyContainerProblems() []string {
	var out []string
	for _, p := range m.podTemplates() {
		for _, c := range append(slices.Clone(p.spec.InitContainers), p.spec.Containers...) {
			at := fmt.Sprintf("%s, container %s: ", p.name, c.Name)
			nonRoot := p.spec.SecurityContext != nil && p.spec.SecurityContext.RunAsNonRoot != nil && *p.spec.SecurityContext.RunAsNonRoot
			if sc := c.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
				nonRoot = *sc.RunAsNonRoot
			}
			if !nonRoot {
				out = append(out, at+"runAsNonRoot must be true (the pod's or the container's)")
			}
			if u := runAsUser(p.spec, &c); u != nil && *u == 0 {
				out = append(out, at+"runAsUser 0 is root")
			}
			for _, h := range containerHardening(&c) {
				out = append(out, at+h)
			}
		}
	}
	return out
}

func checkResources(f *fleet) []string { return resourceProblems(f.container) }

// resourceProblems checks that a container has requests and limits.
func resourceProblems(c *corev1.Container) []string {
	var out []string
	r := c.Resources
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := r.Requests[name]
		lim, okLim := r.Limits[name]
		switch {
		case !okReq || !okLim:
			out = append(out, fmt.Sprintf("%s: want both a request and a limit", name))
		case req.Cmp(lim) > 0:
			out = append(out, fmt.Sprintf("%s: request %s above limit %s", name, req.String(), lim.String()))
		}
	}
	return out
}

// checkMonitoring: the PodMonitor scrapes /metrics on the admin port and
// honours corput's labels where they collide with the operator's target
// labels. The collision is computed from telemetry's registry, not listed.
func checkMonitoring(f *fleet) []string {
	if len(f.podMonitors) != 1 {
		return []string{fmt.Sprintf("want one PodMonitor, have %d", len(f.podMonitors))}
	}
	pm := f.podMonitors[0]
	out := f.matchesPod("PodMonitor "+pm.Name, &pm.Spec.Selector)
	if pm.Spec.JobLabel != "" && f.podLabels[pm.Spec.JobLabel] == "" {
		out = append(out, fmt.Sprintf("jobLabel %q is not a pod label", pm.Spec.JobLabel))
	}
	collide, err := collidingLabels()
	if err != nil {
		out = append(out, err.Error())
	}
	if len(pm.Spec.PodMetricsEndpoints) == 0 {
		out = append(out, "no podMetricsEndpoints")
	}
	for _, ep := range pm.Spec.PodMetricsEndpoints {
		if cp, ok := f.port(intstr.FromString(ep.Port)); !ok || cp.Name != adminPortName {
			out = append(out, fmt.Sprintf("endpoint port %q is not the admin port", ep.Port))
		}
		if ep.Path != "/metrics" {
			out = append(out, fmt.Sprintf("endpoint path %q, want /metrics", ep.Path))
		}
		if len(collide) > 0 && !ep.HonorLabels {
			out = append(out, fmt.Sprintf("corput labels %v collide with the operator's target labels: set honorLabels: true", collide))
		}
	}
	return out
}

// collidingLabels returns the labels of corput's metrics that are also
// target labels the operator sets.
func collidingLabels() ([]string, error) {
	series, err := exportedSeries()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, info := range series {
		for l := range info.labels {
			if slices.Contains(operatorTargetLabels, l) && !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func checkKustomization(f *fleet) []string {
	var out []string
	k := f.kustomizations[0]
	for _, file := range f.files {
		if file != "kustomization.yaml" && !slices.Contains(k.Resources, file) {
			out = append(out, file+" is not in resources: kubectl apply -k would skip it")
		}
	}
	for _, r := range k.Resources {
		if !slices.Contains(f.files, r) {
			out = append(out, "resource "+r+" does not exist")
		}
	}
	image, _, _ := strings.Cut(f.container.Image, ":")
	if !slices.ContainsFunc(k.Images, func(i kustomizeImage) bool { return i.Name == image }) {
		out = append(out, fmt.Sprintf("no images entry for the container image %q", image))
	}
	return out
}

// deploymentDoc is docs/deployment.md, relative to this package.
var deploymentDoc = filepath.Join("..", "docs", "deployment.md")

// checkNetworkPolicy: one NetworkPolicy restricts ingress to the gateway
// pods; the http port stays open to everyone (the clients); the admin port
// admits only peers picked by both a namespace and a pod label (Prometheus,
// for the PodMonitor's scrape), whose labels docs/deployment.md names so
// that an overlay knows what to change. The kubelet's probes come from the
// node, which a NetworkPolicy does not filter, so no rule is required for
// them.
func checkNetworkPolicy(f *fleet) []string {
	if len(f.networkPolicies) != 1 {
		return []string{fmt.Sprintf("want one NetworkPolicy, have %d", len(f.networkPolicies))}
	}
	np := f.networkPolicies[0]
	what := "NetworkPolicy " + np.Name
	out := f.matchesPod(what, &np.Spec.PodSelector)
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		out = append(out, what+": policyTypes lacks Ingress, so the policy restricts no connection to the pods")
	}
	doc, err := os.ReadFile(deploymentDoc)
	if err != nil {
		out = append(out, err.Error())
	}
	httpOpen, adminAdmits := false, false
	for i, rule := range np.Spec.Ingress {
		rw := fmt.Sprintf("%s ingress[%d]", what, i)
		ports := map[string]bool{}
		for _, p := range rule.Ports {
			if p.Port == nil {
				ports["*"] = true
				continue
			}
			if cp, ok := f.port(*p.Port); ok {
				ports[cp.Name] = true
			} else {
				out = append(out, fmt.Sprintf("%s: port %s is no container port", rw, p.Port.String()))
			}
		}
		covers := func(name string) bool { return len(rule.Ports) == 0 || ports["*"] || ports[name] }
		everyone := len(rule.From) == 0
		for _, peer := range rule.From {
			everyone = everyone || admitsEveryone(peer)
		}
		httpOpen = httpOpen || (covers(httpPortName) && everyone)
		if !covers(adminPortName) {
			continue
		}
		if everyone {
			out = append(out, rw+": admits everyone to the admin port; admit only Prometheus")
			continue
		}
		for j, peer := range rule.From {
			pw := fmt.Sprintf("%s.from[%d]", rw, j)
			if problem := wideAdminPeer(peer); problem != "" {
				out = append(out, pw+": "+problem)
				continue
			}
			adminAdmits = true
			for _, sel := range []*metav1.LabelSelector{peer.NamespaceSelector, peer.PodSelector} {
				if sel == nil {
					continue
				}
				for k, v := range sel.MatchLabels {
					if doc != nil && !strings.Contains(string(doc), k+": "+v) {
						out = append(out, fmt.Sprintf("%s: the label %s: %s is not in %s; say whom the admin port admits", pw, k, v, deploymentDoc))
					}
				}
			}
		}
	}
	if !httpOpen {
		out = append(out, what+": no rule admits everyone to the http port, so clients cannot reach the gateway")
	}
	if !adminAdmits {
		out = append(out, what+": no rule admits Prometheus to the admin port, so the PodMonitor's scrape is dropped")
	}
	return out
}

// admitsEveryone reports whether a peer admits any source: an ipBlock of
// every address.
func admitsEveryone(peer networkingv1.NetworkPolicyPeer) bool {
	if peer.IPBlock == nil {
		return false
	}
	p, err := netip.ParsePrefix(peer.IPBlock.CIDR)
	return err == nil && p.Bits() == 0
}

// wideAdminPeer says why a peer admits more than one kind of pod to the
// admin port, or "". A pod label is required; a namespace selector, when
// there is one, must have labels (an empty one is every namespace). An
// ipBlock (the nodes', on a network plugin that filters node traffic) is
// allowed unless it is every address.
func wideAdminPeer(peer networkingv1.NetworkPolicyPeer) string {
	empty := func(s *metav1.LabelSelector) bool {
		return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
	}
	switch {
	case peer.IPBlock != nil:
		if admitsEveryone(peer) {
			return "an ipBlock of every address"
		}
		return ""
	case empty(peer.PodSelector):
		return "no pod labels: admits every pod of the namespaces selected; select Prometheus's pods"
	case peer.NamespaceSelector != nil && empty(peer.NamespaceSelector):
		return "an empty namespaceSelector admits those pods from every namespace; select Prometheus's namespace"
	}
	return ""
}
