package plan

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/pss"
)

// writeRawConfig writes a configuration without checking it, for tests of bad input.
func writeRawConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("apiVersion: "+config.APIVersion+"\nkind: "+config.Kind+"\n"+body), 0o600))
	return path
}

// prepareReadiness makes "routed" (one object for every readiness rule, and one that passes
// each), "taken" (a namespace someone else owns) and "greedy" (a Profile asking for privileged).
func prepareReadiness(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	createProfile(t, c, "routed")
	for _, obj := range readinessObjects("routed") {
		require.NoError(t, c.Create(ctx, obj), "%T %s", obj, obj.GetName())
	}

	require.NoError(t, c.Create(ctx, &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "taken"},
		Spec: profilev1.ProfileSpec{Owner: fixture.User("taken@example.com")}}))
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "taken",
		Annotations: map[string]string{ownership.OwnerAnnotation: "someone-else@example.com"}}}))

	createProfile(t, c, "badowner", func(p *profilev1.Profile) { p.Spec.Owner.Name = "*@example.com" })
	createProfile(t, c, "greedy", func(p *profilev1.Profile) {
		p.Spec.Plugins = []profilev1.Plugin{{TypeMeta: metav1.TypeMeta{Kind: pss.ProfileKind},
			Spec: &runtime.RawExtension{Raw: []byte(`{"enforce":"privileged"}`)}}}
	})
}

func readinessObjects(ns string) []client.Object {
	l7 := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pipelines-ui", Namespace: ns},
		Spec: securityv1beta1.AuthorizationPolicy{
			Selector: &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "ui"}},
			Rules:    []*securityv1beta1.Rule{{To: []*securityv1beta1.Rule_To{{Operation: &securityv1beta1.Operation{Methods: []string{"GET"}}}}}},
		}}
	l4 := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "same-namespace", Namespace: ns},
		Spec: securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{From: []*securityv1beta1.Rule_From{{
			Source: &securityv1beta1.Source{Namespaces: []string{ns}}}}}}}}
	audit := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "audit-all", Namespace: ns},
		Spec: securityv1beta1.AuthorizationPolicy{Action: securityv1beta1.AuthorizationPolicy_AUDIT,
			Rules: []*securityv1beta1.Rule{{}}}}
	return []client.Object{l7, l4, audit,
		service(ns, "legacy-api", map[string]string{"istio.io/use-waypoint": "none"}),
		service(ns, "ui", map[string]string{"istio.io/ingress-use-waypoint": "false"}),
		service(ns, "plain", nil),
		networking("DestinationRule", ns, "db-mtls", map[string]any{"host": "db", "trafficPolicy": map[string]any{"tls": map[string]any{"mode": "ISTIO_MUTUAL"}}}),
		networking("DestinationRule", ns, "db-pool", map[string]any{"host": "db", "trafficPolicy": map[string]any{"connectionPool": map[string]any{"tcp": map[string]any{"maxConnections": int64(10)}}}}),
		networking("VirtualService", ns, "canary", map[string]any{"hosts": []any{"db"}, "http": []any{map[string]any{"route": []any{map[string]any{"destination": map[string]any{"host": "db"}}}}}}),
		networking("VirtualService", ns, "notebook", map[string]any{"hosts": []any{"*"}, "gateways": []any{"kubeflow/kubeflow-gateway"},
			"http": []any{map[string]any{"route": []any{map[string]any{"destination": map[string]any{"host": "nb"}}}}}}),
	}
}

func service(ns, name string, labels map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
}

func networking(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("networking.istio.io/v1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}
