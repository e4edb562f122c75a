package runner_test

// Attack tests of the second security review (internal/safety/FINDINGS-2.md): a tenant or namespace editor
// against the runner's drift detection and the waypoint hardening.

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// impersonatedApply re-applies obj as it stands, plus change, under the plugin's own field
// manager name: what `kubectl apply --server-side --field-manager=profile-plugins/<plugin>
// --force-conflicts` sends. Any user who may patch the object may choose that name; the API server
// does not tie a field manager to an identity.
func impersonatedApply(t *testing.T, c client.Client, obj client.Object, pluginName string, change func(map[string]any)) {
	t.Helper()
	gvk, err := c.GroupVersionKindFor(obj)
	require.NoError(t, err)
	m, err := runtimeToMap(obj)
	require.NoError(t, err)
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	md := m["metadata"].(map[string]any)
	for _, k := range []string{"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"} {
		delete(md, k)
	}
	delete(m, "status")
	change(m)
	u := &unstructured.Unstructured{Object: m}
	require.NoError(t, c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(plugin.FieldManager(pluginName)), client.ForceOwnership))
}

func runtimeToMap(obj client.Object) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

// FINDING (fail-open, namespace editor who may patch Gateways). With the default cluster-scope
// hardening the waypoint Gateway has no spec.infrastructure. An editor adds a parametersRef to a
// ConfigMap of their own (istiod applies its keys to the waypoint Deployment: image, containers)
// by a server-side apply under the field manager profile-plugins/waypoint. Drift detection counts
// only fields of *other* managers (or Updates), and "no write when nothing changed" compares the
// observed object as a superset of the apply body, so the runner sees its own Gateway, unchanged:
// no write, no warning, and istio.io/use-waypoint stays, routing every request through a waypoint
// built from the editor's ConfigMap. The README promises the library "repairs its own fields on
// the next reconcile" (TestApplyRepairsDrift); here it never does.
func TestAttackImpersonatedFieldManagerAddsParametersRefToTheWaypoint(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	require.NoError(t, m.c.Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "editor-patch", Namespace: ns},
		Data:       map[string]string{"deployment": "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        image: evil/proxy:1\n"},
	}))
	gw := &gatewayv1.Gateway{}
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw))
	require.Nil(t, gw.Spec.Infrastructure, "the default waypoint references no ConfigMap")
	impersonatedApply(t, m.c, gw, waypoint.PluginName, func(u map[string]any) {
		u["spec"].(map[string]any)["infrastructure"] = map[string]any{
			"parametersRef": map[string]any{"group": "", "kind": "ConfigMap", "name": "editor-patch"},
		}
	})
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw))
	require.NotNil(t, gw.Spec.Infrastructure, "the attack took effect on the server")

	m.writes = nil
	res := m.apply()
	require.NoError(t, res.Err())
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw))
	routed := m.labels()[useWaypoint] != ""
	refs := gw.Spec.Infrastructure != nil && gw.Spec.Infrastructure.ParametersRef != nil
	assert.False(t, routed && refs,
		"istio.io/use-waypoint routes through a waypoint whose Gateway references the editor's ConfigMap %v; writes %v; warnings %q",
		gw.Spec.Infrastructure, m.writes, strings.Join(res.Warnings(), "\n"))
}

// FINDING (fail-open, anyone who may patch AuthorizationPolicies in the namespace). The same
// impersonation on the ztunnel policy: a spec.selector added under the field manager
// profile-plugins/authz narrows the namespace-wide ALLOW policy to the pods it selects, so every
// other pod has no ALLOW policy and ztunnel admits every caller to it, past the waypoint. The
// runner sees its own policy as a superset of what it wants and writes nothing, reports nothing,
// and keeps istio.io/dataplane-mode and istio.io/use-waypoint. (The README puts other writers of
// AuthorizationPolicies out of scope, but promises that the library repairs its own fields on the
// next reconcile; SECURITY.md guarantee 10 promises that what switches a protective object off is
// restored and reported.)
func TestAttackImpersonatedFieldManagerNarrowsTheZtunnelPolicy(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	impersonatedApply(t, m.c, m.policy(ztunnelName), "authz", func(u map[string]any) {
		u["spec"].(map[string]any)["selector"] = map[string]any{"matchLabels": map[string]any{"app": "nothing"}}
	})
	require.NotNil(t, m.policy(ztunnelName).Spec.Selector, "the attack took effect on the server")

	m.writes = nil
	res := m.apply()
	require.NoError(t, res.Err())
	narrowed := m.policy(ztunnelName).Spec.Selector != nil
	enrolledStill := m.labels()[dataplaneMode] == "ambient"
	assert.False(t, narrowed && enrolledStill,
		"the ztunnel policy selects only app=nothing while the namespace stays in ambient: every other pod is open; writes %v; warnings %q",
		m.writes, strings.Join(res.Warnings(), "\n"))
}
