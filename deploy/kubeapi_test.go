package deploy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/corput/corput/internal/controlplane"
	"github.com/corput/corput/internal/kubetest"
)

// TestControlPlaneRBACSuffices, against a real API server (RBAC on): the
// manifests' ServiceAccount, Role and RoleBinding applied to a namespace,
// and the control plane run as that ServiceAccount with the manifests'
// origins file and state name. It takes the Lease, writes its state and
// publishes the Service's pods: the Role allows what it needs. The same
// account cannot read Secrets or Pods, nor write a Lease of another
// name: the Role allows no more.
func TestControlPlaneRBACSuffices(t *testing.T) {
	s := kubetest.Shared(t)
	m, err := loadManifests(filesIn(t, "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	ns := s.Namespace(t, "deploy")
	ctx := context.Background()
	cp := m.deploymentsOf(controlPlaneComponent)[0]
	saName := cp.Spec.Template.Spec.ServiceAccountName
	for _, sa := range m.serviceAccounts {
		if sa.Name == saName {
			sa := sa.DeepCopy()
			sa.Namespace = ns
			if _, err := s.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, r := range m.roles {
		r := r.DeepCopy()
		r.Namespace = ns
		if _, err := s.Client.RbacV1().Roles(ns).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range m.roleBindings {
		b := b.DeepCopy()
		b.Namespace = ns
		for i := range b.Subjects {
			b.Subjects[i].Namespace = ns // what kustomize's namespace does
		}
		if _, err := s.Client.RbacV1().RoleBindings(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The origin's Service and one ready pod, as the controllers write them.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "payments", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if _, err := s.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	port := int32(8080)
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "payments-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "payments"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.4.0.1"}, Zone: ptr("us-east-1a")}}}
	if _, err := s.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	user := "system:serviceaccount:" + ns + ":" + saName
	as := s.As(user, "system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
	c := &controlPlane{gw: &fleet{manifests: m}, dep: cp, container: &cp.Spec.Template.Spec.Containers[0]}
	c.pod = &cp.Spec.Template.Spec
	c.args = argsOf(c.container.Args)
	origins, err := c.sourceOrigins()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := c.gw.volumeFiles(cp.Spec.Template.Spec.Volumes[0])
	source := filepath.Join(t.TempDir(), "origins.yaml")
	if err := os.WriteFile(source, []byte(files["origins.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	state := strings.Replace(c.args["state"], "$(POD_NAMESPACE)", ns, 1)
	run, err := controlplane.Start(controlplane.Options{Listen: "127.0.0.1:0", FleetListen: "127.0.0.1:0", StatePath: state, Source: source,
		Kube: as, ID: "cp-0", LeaseDuration: 2 * time.Second, LeaseRetry: 500 * time.Millisecond, Debounce: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	deadline := time.Now().Add(time.Minute)
	for !(run.Leading() && run.Ready() && run.State().Origins[origins[0].Name] != nil) {
		if time.Now().After(deadline) {
			t.Fatalf("the control plane, as %s, did not lead and publish %s within a minute", user, origins[0].Name)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a := run.State().Origins[origins[0].Name]; len(a.Endpoints) != 1 || a.Endpoints[0].Address != "10.4.0.1:8080" || a.Endpoints[0].Zone != "us-east-1a" {
		t.Fatalf("published %+v; want the Service's pod 10.4.0.1:8080 in us-east-1a", a)
	}

	client, err := kubernetes.NewForConfig(as)
	if err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"list secrets": func() error { _, err := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); return err }(),
		"list pods":    func() error { _, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); return err }(),
		"get another Lease": func() error {
			_, err := client.CoordinationV1().Leases(ns).Get(ctx, "other", metav1.GetOptions{})
			return err
		}(),
		"list EndpointSlices of another namespace": func() error {
			_, err := client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{})
			return err
		}(),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as %s: %v; want 403 Forbidden", what, user, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestGatewayZoneLabelFromItsNode, against a real API server: a gateway
// pod bound to a node of zone us-east-1b carries that zone in the label
// the StatefulSet's CORPUT_ZONE reads (the API server's PodTopologyLabels
// admission, on by default since Kubernetes 1.35, copies it at binding).
func TestGatewayZoneLabelFromItsNode(t *testing.T) {
	s := kubetest.Shared(t)
	m, err := loadManifests(filesIn(t, "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := s.Namespace(t, "zone")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-", Labels: map[string]string{"topology.kubernetes.io/zone": "us-east-1b"}}}
	node, err = s.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{})
	tpl := m.statefulSets[0].Spec.Template
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "corput-0", Namespace: ns, Labels: tpl.Labels}, Spec: *tpl.Spec.DeepCopy()}
	pod.Spec.Volumes = nil // their ConfigMap and Secret are not created here
	pod.Spec.Containers[0].VolumeMounts = nil
	// No controller creates service accounts here: the manifests' one.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: pod.Spec.ServiceAccountName, Namespace: ns}}
	if _, err := s.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns}, Target: corev1.ObjectReference{Kind: "Node", Name: node.Name}}
	if err := s.Client.CoreV1().Pods(ns).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	field := ""
	for _, e := range got.Spec.Containers[0].Env {
		if e.Name == "CORPUT_ZONE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			field = e.ValueFrom.FieldRef.FieldPath
		}
	}
	label := strings.TrimSuffix(strings.TrimPrefix(field, "metadata.labels['"), "']")
	if z := got.Labels[label]; label == "" || z != "us-east-1b" {
		t.Fatalf("the bound pod's label %q (CORPUT_ZONE's field %q) is %q; want its node's zone us-east-1b (labels %v)", label, field, z, got.Labels)
	}
}
