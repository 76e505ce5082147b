package kubetest

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) { os.Exit(M(m).Run()) }

// TestServerServesAndEnforcesRBAC: the administrator writes and reads an
// EndpointSlice in a namespace of its own; a user with no binding is
// refused by RBAC (403), not let through.
func TestServerServesAndEnforcesRBAC(t *testing.T) {
	s := Shared(t)
	ctx := context.Background()
	ns := s.Namespace(t, "kubetest")
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "app-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "app"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}}},
	}
	if _, err := s.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=app"})
	if err != nil || len(got.Items) != 1 {
		t.Fatalf("list: %v, %d items; want 1", err, len(got.Items))
	}
	nobody, err := kubernetes.NewForConfig(s.As("nobody"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = nobody.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a user without a binding created a ConfigMap: err %v, want 403 Forbidden", err)
	}
}
