package platform_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// healthyPlatform is a fake API server holding objs and, where objs do not have them already,
// what a healthy install of cfg has (as fixture.Platform makes it on a real one): every caller's
// namespace ambient with one ambient pod, istiod's pod for each of guard.meshServiceAccounts, the ingress gateway's namespace, and the waypoint class
// defaults. The ingress gateway's pods are the test's to add (ingressPod), with the IP it needs.
func healthyPlatform(t *testing.T, cfg *config.Config, objs ...client.Object) client.Client {
	t.Helper()
	all := append([]client.Object(nil), objs...)
	seen := map[string]bool{}
	for _, o := range objs {
		seen[fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName())] = true
	}
	add := func(o client.Object) {
		if key := fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName()); !seen[key] {
			seen[key] = true
			all = append(all, o)
		}
	}
	for _, caller := range cfg.Authorization.PlatformCallers {
		ns, sa := split(t, caller.Principal)
		add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"istio.io/dataplane-mode": "ambient"}}})
		add(fixture.MeshPod(ns, sa+"-0", sa, fixture.AmbientPod))
	}
	for _, entry := range cfg.Guard.MeshServiceAccounts {
		ns, sa, _ := strings.Cut(entry, "/")
		add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		add(fixture.MeshPod(ns, sa+"-0", sa, nil))
	}
	ingressNS, _ := split(t, cfg.Authorization.Principals.IngressGateway)
	add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ingressNS}})
	defaults, err := waypoint.ClassDefaults(cfg)
	require.NoError(t, err)
	add(defaults)
	deny, err := waypoint.ClusterDefaultDeny(cfg)
	require.NoError(t, err)
	add(deny)
	guarded, err := guard.Objects(cfg)
	require.NoError(t, err)
	for _, o := range guarded {
		add(o)
	}
	return fake.NewClientBuilder().WithScheme(runner.NewScheme()).
		WithIndex(&corev1.Pod{}, "spec.serviceAccountName", func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Spec.ServiceAccountName}
		}).WithObjects(all...).Build()
}

// split is the namespace and service account of a principal of the test's configuration.
func split(t *testing.T, principal string) (namespace, sa string) {
	t.Helper()
	_, namespace, sa, err := config.ParsePrincipal(principal)
	require.NoError(t, err)
	return namespace, sa
}

// ingressPod is a running ingress gateway pod with the address ip.
func ingressPod(t *testing.T, cfg *config.Config, ip string) *corev1.Pod {
	t.Helper()
	ns, sa := split(t, cfg.Authorization.Principals.IngressGateway)
	pod := fixture.MeshPod(ns, "istio-ingressgateway-7f9", sa, nil)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	return pod
}

// The healthy platform gives no finding, so what the other tests of this package find is what
// they change.
func TestCheckFindsNothingOnAHealthyPlatform(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	report, err := platform.Check(context.Background(), healthyPlatform(t, cfg, ingressPod(t, cfg, "10.42.7.15")), cfg)
	require.NoError(t, err)
	assert.Empty(t, report.Findings)
}
