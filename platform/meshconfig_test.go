package platform_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/platform"
)

// Mesh configuration that predates the guard in a user namespace is reported, unless
// guard.meshConfigAllowed names it; the same in a namespace no Profile owns, and the waypoint
// Gateway, are not.
func TestCheckReportsMeshConfigurationInUserNamespaces(t *testing.T) {
	t.Parallel()
	env := envtest.StartNamed(t, ownNamespaces)
	c, ctx := env.Client, context.Background()
	for ns, owner := range map[string]string{"mc-user": "ann@example.com", "mc-platform": ""} {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if owner != "" {
			n.Annotations = map[string]string{ownership.OwnerAnnotation: owner}
		}
		require.NoError(t, c.Create(ctx, n))
	}
	object := func(apiVersion, kind, ns, name string, spec map[string]any) {
		require.NoError(t, c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}))
	}
	for _, ns := range []string{"mc-user", "mc-platform"} {
		object("networking.istio.io/v1alpha3", "EnvoyFilter", ns, "drop-rbac", map[string]any{})
		object("networking.istio.io/v1alpha3", "EnvoyFilter", ns, "platform-tracing", map[string]any{})
		object("gateway.networking.k8s.io/v1", "Gateway", ns, "side-door", map[string]any{"gatewayClassName": "istio",
			"listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}})
	}
	object("gateway.networking.k8s.io/v1", "Gateway", "mc-user", "waypoint", map[string]any{"gatewayClassName": "istio-waypoint",
		"listeners": []any{map[string]any{"name": "mesh", "port": int64(15008), "protocol": "HBONE"}}})
	cfg := config.Default()
	cfg.Guard.MeshConfigAllowed = []config.MeshObject{{Kind: "EnvoyFilter", Name: "platform-tracing"}}
	require.NoError(t, cfg.Validate())
	report, err := platform.Check(ctx, c, cfg)
	require.NoError(t, err)
	var got []string
	for _, f := range ofNamespaces(report.Findings, "mc-user", "mc-platform") {
		if f.Kind == platform.FindingMeshConfigInUserNamespace {
			got = append(got, f.Namespace+" "+f.What)
			assert.Contains(t, f.Fix, "guard.meshConfigAllowed")
		}
	}
	assert.ElementsMatch(t, []string{"mc-user EnvoyFilter/drop-rbac", "mc-user Gateway/side-door"}, got)
}
