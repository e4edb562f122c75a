package runner_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

func TestApplyPrunesWhatThePluginNoLongerWants(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := []client.Object{configMap("keep", nil), policy("stale", ns)}
	p := &testPlugin{
		name:    "mesh",
		objects: func(plugin.Target) []client.Object { return want },
		labels:  map[string]string{"istio.io/dataplane-mode": "ambient", "istio.io/use-waypoint": "waypoint"},
	}
	r := newRunner(t, e, p)
	require.NoError(t, r.Apply(context.Background(), testProfile()).Err())

	// The configuration switches: one object and one label go away.
	want = want[:1]
	p.labels = map[string]string{"istio.io/dataplane-mode": "ambient"}
	res := r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())

	assert.Equal(t, []plugin.Ref{policyRef("stale")}, res.Plugins[0].Deleted)
	assert.Equal(t, []string{"istio.io/use-waypoint"}, res.Plugins[0].LabelsRemoved)
	err := e.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "stale"}, &istiosecurityv1.AuthorizationPolicy{})
	assert.True(t, apierrors.IsNotFound(err), "stale policy must be gone, got %v", err)
	labels := e.namespace(t).Labels
	assert.NotContains(t, labels, "istio.io/use-waypoint")
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"])
	assert.Equal(t, "ml", labels["team"])
}

// The authz plugin only reads RoleBindings: one labelled as the plugin's by someone else is not
// pruned, though every other object so labelled and unwanted would be.
func TestReadOnlyKindsAreNeverPruned(t *testing.T) {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "namespaceAdmin", Namespace: ns, Labels: map[string]string{
			plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "authz"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kubeflow-admin"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice@example.com"}},
	}
	m := newMesh(t, rb)
	require.NoError(t, m.apply().Err())
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKeyFromObject(rb), &rbacv1.RoleBinding{}))
	assert.NotContains(t, m.writes, "delete RoleBinding/namespaceAdmin")
}
