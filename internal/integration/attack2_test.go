package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// FINDING (fail-open; confirms runner
// TestImpersonatedFieldManagerCannotNarrowTheZtunnelPolicyOfAnEnrolledNamespace on the real API
// server). A writer who server-side applies the ztunnel policy as it stands plus a
// spec.selector, under the field manager profile-plugins/authz, narrows the namespace-wide ALLOW
// policy to the pods it selects (every other pod: no ALLOW policy, so ztunnel admits every
// caller). The runner's drift check counts only other managers' fields and Updates, and its
// "unchanged" check is a superset comparison, so it writes nothing and keeps
// istio.io/dataplane-mode=ambient. Suggested fix: compare the observed content with the desired
// one exactly (no extra fields under spec, data, binaryData), or compare the managedFields entry
// of the plugin's own manager with the fields of its apply body, and restore on any difference.
func TestAttackImpersonatedAuthzManagerNarrowsTheZtunnelPolicyOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "attack2-impersonation")
	r := runnerFor(t, c, config.ModeAmbient)
	for range 2 { // no istiod here: the waypoint stays un-Programmed, the namespace enrolled and closed
		require.NoError(t, r.Apply(ctx, p).Err())
	}
	require.Equal(t, "ambient", namespaceLabels(t, c, p.Name)["istio.io/dataplane-mode"])

	pol := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: p.Name, Name: config.DefaultZtunnelPolicyName}, pol))
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pol)
	require.NoError(t, err)
	md := m["metadata"].(map[string]any)
	for _, k := range []string{"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"} {
		delete(md, k)
	}
	delete(m, "status")
	m["apiVersion"], m["kind"] = "security.istio.io/v1", "AuthorizationPolicy"
	m["spec"].(map[string]any)["selector"] = map[string]any{"matchLabels": map[string]any{"app": "nothing"}}
	require.NoError(t, c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: m}),
		client.FieldOwner(plugin.FieldManager("authz")), client.ForceOwnership))

	writes := env.Requests.Writes()
	res := r.Apply(ctx, p)
	require.NoError(t, res.Err())
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: p.Name, Name: config.DefaultZtunnelPolicyName}, pol))
	narrowed := pol.Spec.Selector != nil
	enrolled := namespaceLabels(t, c, p.Name)["istio.io/dataplane-mode"] == "ambient"
	assert.False(t, narrowed && enrolled,
		"ztunnel policy narrowed to app=nothing while the namespace stays in ambient; writes by the runner: %d; warnings %q",
		env.Requests.Writes()-writes, strings.Join(res.Warnings(), "\n"))
}
