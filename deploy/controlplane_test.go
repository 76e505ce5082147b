package deploy

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/controlplane"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/testbin"
)

// The component label tells the gateways' objects from the control
// plane's.
const (
	componentLabel        = "app.kubernetes.io/component"
	gatewayComponent      = "gateway"
	controlPlaneComponent = "control-plane"
	xdsPortName           = "xds"
	fleetPortName         = "fleet"
)

// servicesOf returns the Services of one component.
func (m *manifests) servicesOf(component string) []*corev1.Service {
	return ofComponent(m.services, component)
}

// ofComponent returns the objects whose component label is component.
func ofComponent[T metav1.Object](objs []T, component string) []T {
	var out []T
	for _, o := range objs {
		if o.GetLabels()[componentLabel] == component {
			out = append(out, o)
		}
	}
	return out
}

// controlPlane is the decoded manifests reduced to the control plane's
// Deployment, beside the gateway fleet it serves.
type controlPlane struct {
	gw        *fleet
	dep       *appsv1.Deployment
	pod       *corev1.PodSpec
	podLabels labels.Set
	container *corev1.Container
	args      map[string]string // --flag → value
	services  []*corev1.Service
}

var controlPlaneChecks = []struct {
	name  string
	check func(c *controlPlane) []string
}{
	{"replicas", checkCPReplicas},
	{"selectors", checkCPSelectors},
	{"state", checkCPState},
	{"rbac", checkCPRBAC},
	{"source", checkCPSource},
	{"listeners", checkCPListeners},
	{"probes", checkCPProbes},
	{"service", checkCPService},
	{"gateways point at it", checkCPGateways},
	{"security", func(c *controlPlane) []string {
		return append(c.gw.securityProblems(c.pod, c.container), resourceProblems(c.container)...)
	}},
	{"image", checkCPImage},
}

// controlPlaneProblems runs the control plane's checks, each problem
// prefixed by "control plane" and the check's name.
func (f *fleet) controlPlaneProblems() []string {
	var out []string
	for _, s := range f.manifests.services {
		if c := s.Labels[componentLabel]; c != gatewayComponent && c != controlPlaneComponent {
			out = append(out, fmt.Sprintf("Service %s: %s %q is neither %s nor %s", s.Name, componentLabel, c, gatewayComponent, controlPlaneComponent))
		}
	}
	deps := f.deploymentsOf(controlPlaneComponent)
	if len(deps) != 1 {
		return append(out, fmt.Sprintf("control plane: want one Deployment (corput control-plane, %s=%s), have %d", componentLabel, controlPlaneComponent, len(deps)))
	}
	c := &controlPlane{gw: f, dep: deps[0], services: f.servicesOf(controlPlaneComponent)}
	c.pod = &c.dep.Spec.Template.Spec
	c.podLabels = labels.Set(c.dep.Spec.Template.Labels)
	if len(c.pod.Containers) != 1 {
		return append(out, fmt.Sprintf("control plane: want one container, have %d", len(c.pod.Containers)))
	}
	c.container = &c.pod.Containers[0]
	if args := c.container.Args; len(args) == 0 || args[0] != "control-plane" {
		return append(out, fmt.Sprintf("control plane: the container runs %q, not corput control-plane", args))
	}
	c.args = argsOf(c.container.Args)
	for _, ch := range controlPlaneChecks {
		for _, p := range ch.check(c) {
			out = append(out, "control plane "+ch.name+": "+p)
		}
	}
	return out
}

// argsOf maps a `corput control-plane` command line's flags to their
// values (--flag value and --flag=value).
func argsOf(args []string) map[string]string {
	out := map[string]string{}
	for i := 1; i < len(args); i++ {
		k, v, eq := strings.Cut(args[i], "=")
		if !eq && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			v = args[i+1]
			i++
		}
		out[strings.TrimLeft(k, "-")] = v
	}
	return out
}

// checkCPReplicas: two replicas or more, so that one takes the Lease
// when the other goes.
func checkCPReplicas(c *controlPlane) []string {
	if c.dep.Spec.Replicas == nil || *c.dep.Spec.Replicas < 2 {
		return []string{"replicas must be at least 2: the one that holds the Lease writes, another takes over when it goes"}
	}
	return nil
}

// selects reports whether a non-empty selector selects set.
func selects(ls *metav1.LabelSelector, set labels.Set) bool {
	if ls == nil || (len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0) {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	return err == nil && sel.Matches(set)
}

// checkCPSelectors: the Deployment and its Services select its pods, and
// nothing of the gateways' selects them (nor the other way round).
func checkCPSelectors(c *controlPlane) []string {
	var out []string
	if !selects(c.dep.Spec.Selector, c.podLabels) {
		out = append(out, fmt.Sprintf("Deployment %s: its selector does not select its pod labels %s", c.dep.Name, c.podLabels))
	}
	if selects(c.dep.Spec.Selector, c.gw.podLabels) {
		out = append(out, fmt.Sprintf("Deployment %s: its selector also selects the gateway pods", c.dep.Name))
	}
	for _, s := range c.services {
		if !selects(&metav1.LabelSelector{MatchLabels: s.Spec.Selector}, c.podLabels) {
			out = append(out, fmt.Sprintf("Service %s: selector %v does not select the control plane's pods", s.Name, s.Spec.Selector))
		}
	}
	gateway := []struct {
		what string
		sel  *metav1.LabelSelector
	}{{c.gw.wl.String(), c.gw.wl.selector}}
	for _, s := range c.gw.services {
		gateway = append(gateway, struct {
			what string
			sel  *metav1.LabelSelector
		}{"Service " + s.Name, &metav1.LabelSelector{MatchLabels: s.Spec.Selector}})
	}
	for _, p := range c.gw.pdbs {
		gateway = append(gateway, struct {
			what string
			sel  *metav1.LabelSelector
		}{"PodDisruptionBudget " + p.Name, p.Spec.Selector})
	}
	for _, g := range gateway {
		if selects(g.sel, c.podLabels) {
			out = append(out, g.what+": selects the control plane's pods too")
		}
	}
	return out
}

// mountOf returns the volume mounted at dir, and its mount.
func (c *controlPlane) mountOf(dir string) (*corev1.Volume, *corev1.VolumeMount) {
	m := slices.IndexFunc(c.container.VolumeMounts, func(vm corev1.VolumeMount) bool { return path.Clean(vm.MountPath) == path.Clean(dir) })
	if m < 0 {
		return nil, nil
	}
	v := slices.IndexFunc(c.pod.Volumes, func(v corev1.Volume) bool { return v.Name == c.container.VolumeMounts[m].Name })
	if v < 0 {
		return nil, &c.container.VolumeMounts[m]
	}
	return &c.pod.Volumes[v], &c.container.VolumeMounts[m]
}

// envField returns the downward-API field an environment variable of the
// container reads, "" when it is not one.
func (c *controlPlane) envField(name string) string {
	i := slices.IndexFunc(c.container.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 || c.container.Env[i].ValueFrom == nil || c.container.Env[i].ValueFrom.FieldRef == nil {
		return ""
	}
	return c.container.Env[i].ValueFrom.FieldRef.FieldPath
}

// podVar reads an argument of the form $(VAR)rest: the variable's name
// and the rest; "" when the argument starts with no variable.
func podVar(arg string) (name, rest string) {
	if !strings.HasPrefix(arg, "$(") {
		return "", arg
	}
	end := strings.IndexByte(arg, ')')
	if end < 0 {
		return "", arg
	}
	return arg[2:end], arg[end+1:]
}

// stateName is the NAME of --state kubernetes:$(POD_NAMESPACE)/NAME.
func (c *controlPlane) stateName() string {
	_, name, _ := strings.Cut(strings.TrimPrefix(c.args["state"], controlplane.StateKubernetesPrefix), "/")
	return name
}

// checkCPState: --state keeps the state in the Kubernetes API, in the
// pod's own namespace (a variable from the downward API), and no volume
// holds it: replicas on any nodes share it.
func checkCPState(c *controlPlane) []string {
	state := c.args["state"]
	ref, ok := strings.CutPrefix(state, controlplane.StateKubernetesPrefix)
	if !ok {
		return []string{fmt.Sprintf("--state %q: keep the state in the Kubernetes API (kubernetes:$(POD_NAMESPACE)/NAME), which every replica reads and the Lease holder writes", state)}
	}
	var out []string
	ns, name, _ := strings.Cut(ref, "/")
	if v, rest := podVar(ns); v == "" || rest != "" || c.envField(v) != "metadata.namespace" {
		out = append(out, fmt.Sprintf("--state %q: the namespace must be $(VAR) with VAR from the downward API field metadata.namespace (the manifests carry no namespace)", state))
	}
	if len(validation.IsDNS1123Label(name)) > 0 || len(name) > 40 {
		out = append(out, fmt.Sprintf("--state %q: NAME %q must be a DNS label of at most 40 characters", state, name))
	}
	for _, v := range c.pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, fmt.Sprintf("volume %s is a PersistentVolumeClaim: the state is in the Kubernetes API, and a volume would tie a replica to a node", v.Name))
		}
	}
	return out
}

// rbacGrant is one permission: an API group, a resource, a verb and an
// object name ("" for any).
type rbacGrant struct{ group, resource, verb, name string }

func (g rbacGrant) String() string {
	s := g.verb + " " + g.resource
	if g.group != "" {
		s += "." + g.group
	}
	if g.name != "" {
		s += " " + g.name
	}
	return s
}

// controlPlaneNeeds is what the control plane reads and writes: the
// origins' EndpointSlices and Services, its state's ConfigMaps, and its
// Lease (named; only create cannot be narrowed to a name).
func controlPlaneNeeds(lease string) []rbacGrant {
	var out []rbacGrant
	for _, v := range []string{"get", "list", "watch"} {
		out = append(out, rbacGrant{"discovery.k8s.io", "endpointslices", v, ""}, rbacGrant{"", "services", v, ""})
	}
	for _, v := range []string{"get", "list", "watch", "create", "update", "delete"} {
		out = append(out, rbacGrant{"", "configmaps", v, ""})
	}
	for _, v := range []string{"get", "list", "watch", "update"} {
		out = append(out, rbacGrant{"coordination.k8s.io", "leases", v, lease})
	}
	return append(out, rbacGrant{"coordination.k8s.io", "leases", "create", ""})
}

// grants expands a Role's rules; a wildcard stays "*".
func grants(r *rbacv1.Role) []rbacGrant {
	var out []rbacGrant
	for _, rule := range r.Rules {
		names := rule.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					for _, n := range names {
						out = append(out, rbacGrant{g, res, v, n})
					}
				}
			}
		}
	}
	return out
}

// checkCPRBAC: the pod's service account (with its token mounted) is
// bound to a Role among the manifests that allows what the control plane
// needs, and nothing more.
func checkCPRBAC(c *controlPlane) []string {
	sa := c.pod.ServiceAccountName
	var out []string
	i := slices.IndexFunc(c.gw.serviceAccounts, func(s *corev1.ServiceAccount) bool { return s.Name == sa })
	switch {
	case sa == "" || i < 0:
		return []string{fmt.Sprintf("serviceAccountName %q is not a ServiceAccount among the manifests", sa)}
	case c.pod.AutomountServiceAccountToken != nil && !*c.pod.AutomountServiceAccountToken,
		c.pod.AutomountServiceAccountToken == nil && c.gw.serviceAccounts[i].AutomountServiceAccountToken != nil && !*c.gw.serviceAccounts[i].AutomountServiceAccountToken:
		out = append(out, fmt.Sprintf("ServiceAccount %s's token is not mounted: the control plane has no credentials for the Kubernetes API", sa))
	}
	var roles []*rbacv1.Role
	for _, b := range c.gw.roleBindings {
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa }) {
			continue
		}
		j := slices.IndexFunc(c.gw.roles, func(r *rbacv1.Role) bool { return b.RoleRef.Kind == "Role" && r.Name == b.RoleRef.Name })
		if j < 0 {
			out = append(out, fmt.Sprintf("RoleBinding %s: roleRef %s %s is not a Role among the manifests", b.Name, b.RoleRef.Kind, b.RoleRef.Name))
			continue
		}
		roles = append(roles, c.gw.roles[j])
	}
	if len(roles) == 0 {
		return append(out, fmt.Sprintf("no RoleBinding binds ServiceAccount %s to a Role among the manifests", sa))
	}
	var granted []rbacGrant
	for _, r := range roles {
		granted = append(granted, grants(r)...)
	}
	need := controlPlaneNeeds(c.stateName())
	covers := func(g, n rbacGrant) bool {
		return (g.group == n.group || g.group == "*") && (g.resource == n.resource || g.resource == "*") &&
			(g.verb == n.verb || g.verb == "*") && (g.name == "" || g.name == n.name)
	}
	for _, n := range need {
		if !slices.ContainsFunc(granted, func(g rbacGrant) bool { return covers(g, n) }) {
			out = append(out, fmt.Sprintf("the Role does not allow %s", n))
		}
	}
	for _, g := range granted {
		if !slices.Contains(need, g) {
			out = append(out, fmt.Sprintf("the Role allows %s, which the control plane does not need", g))
		}
	}
	return out
}

// sourceOrigins reads the --source file from its ConfigMap volume and
// parses it as the control plane does.
func (c *controlPlane) sourceOrigins() ([]controlplane.Origin, error) {
	src := c.args["source"]
	if src == "" {
		return nil, nil
	}
	dir, key := path.Split(src)
	vol, _ := c.mountOf(dir)
	if vol == nil {
		return nil, fmt.Errorf("--source %s: no volume is mounted at %s", src, dir)
	}
	files, err := c.gw.volumeFiles(*vol)
	if err != nil {
		return nil, fmt.Errorf("--source %s: %w", src, err)
	}
	data, ok := files[key]
	if !ok {
		return nil, fmt.Errorf("--source %s: the volume at %s has no key %q", src, dir, key)
	}
	return controlplane.ParseSource(src, []byte(data), c.args["relay"] == "")
}

// checkCPSource: the source file the pod reads is one the control plane
// accepts, and its origins follow Services: addresses written by hand go
// stale with the first rollout.
func checkCPSource(c *controlPlane) []string {
	if c.args["source"] == "" && c.args["relay"] == "" {
		return []string{"neither --source nor --relay: the control plane has no membership"}
	}
	origins, err := c.sourceOrigins()
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, o := range origins {
		if c.args["relay"] == "" && o.Services == nil {
			out = append(out, fmt.Sprintf("origin %s lists static endpoints: name its Kubernetes Service (services:), whose pods change with every rollout", o.Name))
		}
	}
	return out
}

func (c *controlPlane) port(p intstr.IntOrString) (corev1.ContainerPort, bool) {
	for _, cp := range c.container.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp, true
		}
	}
	return corev1.ContainerPort{}, false
}

// checkCPListeners: --listen, --fleet-listen and --admin are the
// container's xds, fleet and admin ports, bound to the pod address, and
// --advertise is the pod's IP at the fleet port.
func checkCPListeners(c *controlPlane) []string {
	var out []string
	if adv := c.args["advertise"]; adv != "" {
		v, rest := podVar(adv)
		cp, ok := c.port(intstr.FromString(fleetPortName))
		if v == "" || c.envField(v) != "status.podIP" {
			out = append(out, fmt.Sprintf("--advertise %q: the host must be $(VAR) with VAR from the downward API field status.podIP", adv))
		}
		if !ok || rest != ":"+strconv.Itoa(int(cp.ContainerPort)) {
			out = append(out, fmt.Sprintf("--advertise %q: the port is not the container port named %q", adv, fleetPortName))
		}
	} else {
		out = append(out, "no --advertise: the other replica cannot forward the fleet port to this one")
	}
	for _, l := range []struct{ flag, port string }{{"listen", xdsPortName}, {"fleet-listen", fleetPortName}, {"admin", adminPortName}} {
		addr, ok := c.args[l.flag]
		if !ok {
			out = append(out, fmt.Sprintf("no --%s: the default binds loopback, which the gateways and probes cannot reach", l.flag))
			continue
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			out = append(out, fmt.Sprintf("--%s %q: %v", l.flag, addr, err))
			continue
		}
		n, _ := strconv.Atoi(port)
		if cp, ok := c.port(intstr.FromString(l.port)); !ok || int(cp.ContainerPort) != n {
			out = append(out, fmt.Sprintf("--%s %q: port %s is not the container port named %q", l.flag, addr, port, l.port))
		}
		if ip, err := netip.ParseAddr(host); host != "" && (err != nil || !ip.IsUnspecified()) {
			out = append(out, fmt.Sprintf("--%s %q binds %s only: use 0.0.0.0", l.flag, addr, host))
		}
	}
	return out
}

func checkCPProbes(c *controlPlane) []string {
	var out []string
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{
		{"readinessProbe", c.container.ReadinessProbe, "/readyz"},
		{"livenessProbe", c.container.LivenessProbe, "/healthz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			out = append(out, p.what+": want an httpGet probe on "+p.path)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			out = append(out, fmt.Sprintf("%s: path %q, want %q", p.what, p.probe.HTTPGet.Path, p.path))
		}
		if cp, ok := c.port(p.probe.HTTPGet.Port); !ok || cp.Name != adminPortName {
			out = append(out, fmt.Sprintf("%s: port %s is not the admin port", p.what, p.probe.HTTPGet.Port.String()))
		}
	}
	return out
}

// xdsAddr is the address the gateways use: Service name and the port
// targeting the xds container port.
func (c *controlPlane) xdsAddr() (string, bool) { return c.serviceAddr(xdsPortName) }

// serviceAddr is the Service name and the port targeting the container
// port named port.
func (c *controlPlane) serviceAddr(port string) (string, bool) {
	for _, s := range c.services {
		for _, sp := range s.Spec.Ports {
			if cp, ok := c.port(sp.TargetPort); ok && cp.Name == port {
				return net.JoinHostPort(s.Name, strconv.Itoa(int(sp.Port))), true
			}
		}
	}
	return "", false
}

// checkCPService: one in-cluster Service publishes the xds and fleet
// ports, and nothing leaves the cluster.
func checkCPService(c *controlPlane) []string {
	if len(c.services) != 1 {
		return []string{fmt.Sprintf("want one Service for the control plane, have %d", len(c.services))}
	}
	s := c.services[0]
	var out []string
	if s.Spec.Type != "" && s.Spec.Type != corev1.ServiceTypeClusterIP {
		out = append(out, fmt.Sprintf("Service %s is of type %s: the control plane serves the cluster's gateways only (ClusterIP)", s.Name, s.Spec.Type))
	}
	for _, sp := range s.Spec.Ports {
		if cp, ok := c.port(sp.TargetPort); !ok {
			out = append(out, fmt.Sprintf("Service %s port %q: target %s is no container port", s.Name, sp.Name, sp.TargetPort.String()))
		} else if cp.Name != xdsPortName && cp.Name != fleetPortName {
			out = append(out, fmt.Sprintf("Service %s publishes the %s port; only xds and fleet", s.Name, cp.Name))
		}
	}
	for _, p := range []string{xdsPortName, fleetPortName} {
		if _, ok := c.serviceAddr(p); !ok {
			out = append(out, fmt.Sprintf("Service %s publishes no %s port", s.Name, p))
		}
	}
	return out
}

// checkCPGateways: every xDS origin of the gateways' config names the
// control plane's Service as its server, a cluster the control plane
// serves, and the sizing the control plane sizes it with.
func checkCPGateways(c *controlPlane) []string {
	if c.gw.config == nil {
		return nil // reported by the gateway's config check
	}
	addr, ok := c.xdsAddr()
	if !ok {
		return nil // reported by checkCPService
	}
	origins, err := c.sourceOrigins()
	if err != nil {
		return nil // reported by checkCPSource
	}
	var out []string
	fleetAddr, _ := c.serviceAddr(fleetPortName)
	if fs := c.gw.config.Fleet.Server; fs != "" && fs != fleetAddr {
		out = append(out, fmt.Sprintf("fleet.server %q is not the control plane's fleet port %s (the leader assigns positions there; the other replica forwards it)", fs, fleetAddr))
	}
	if _, follower := c.args["follow"]; follower && c.gw.config.Fleet.Server != "" {
		out = append(out, "fleet.server names a --follow control plane, which assigns no positions; point it at the writer")
	}
	xds := 0
	for _, o := range c.gw.config.Origins {
		if o.Discovery.Type != config.DiscoveryXDS {
			continue
		}
		xds++
		if o.Discovery.Server != addr {
			out = append(out, fmt.Sprintf("gateway origin %s: discovery.server %q is not the control plane's Service %s", o.Name, o.Discovery.Server, addr))
		}
		if c.args["source"] == "" || c.args["relay"] != "" {
			continue // relayed clusters: named by --clusters as well
		}
		i := slices.IndexFunc(origins, func(x controlplane.Origin) bool { return x.Name == o.Discovery.Cluster })
		if i < 0 {
			out = append(out, fmt.Sprintf("gateway origin %s: discovery.cluster %q is not an origin of the control plane's source file", o.Name, o.Discovery.Cluster))
			continue
		}
		z, err := subset.NewSizing(o.Subset.Size, o.Subset.MinSize, o.Subset.MaxSize)
		if err == nil && z != origins[i].Sizing {
			out = append(out, fmt.Sprintf("gateway origin %s: subset sizing %d–%d differs from the control plane's %d–%d for %s; ring_subsets would be ignored",
				o.Name, z.Min, z.Max, origins[i].Sizing.Min, origins[i].Sizing.Max, o.Discovery.Cluster))
		}
	}
	if xds == 0 {
		out = append(out, "no gateway origin uses xds discovery: nothing follows the control plane")
	}
	return out
}

func checkCPImage(c *controlPlane) []string {
	image, _, _ := strings.Cut(c.container.Image, ":")
	if !slices.ContainsFunc(c.gw.kustomizations[0].Images, func(i kustomizeImage) bool { return i.Name == image }) {
		return []string{fmt.Sprintf("no images entry for the container image %q", image)}
	}
	return nil
}

// TestControlPlaneArgsAreCorputsFlags: the Deployment runs flags
// `corput control-plane` really has.
func TestControlPlaneArgsAreCorputsFlags(t *testing.T) {
	m, err := loadManifests(filesIn(t, "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.deployments) != 1 {
		t.Fatalf("%d Deployments, want the control plane's", len(m.deployments))
	}
	bin := testbin.Corput(t)
	help, _ := exec.Command(bin, "control-plane", "-h").CombinedOutput()
	args := strings.Join(m.deployments[0].Spec.Template.Spec.Containers[0].Args, " ")
	for _, flag := range regexp.MustCompile(`(?:^| )--([a-z-]+)`).FindAllStringSubmatch(args, -1) {
		if !strings.Contains(string(help), "-"+flag[1]+" ") {
			t.Errorf("the control plane runs --%s, which corput control-plane does not have:\n%s", flag[1], help)
		}
	}
}
