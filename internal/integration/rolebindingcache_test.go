package integration

// Second attack review of Dec 1, finding 1, on the real API server: every RoleBinding of the
// cluster is cached, as metadata (the controller's watch with builder.OnlyMetadata, the authz
// plugin's authz.RoleBindingMetadataList), and a Profile owner (kubeflow-admin may create
// rolebindings) could store annotations of up to 256 KB and managedFields in as many bindings as
// they liked, all held in the shared controller's memory. Now the cache keeps of each only what
// runner.TrimRoleBindingMetadata keeps.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
)

// tenantAdminRules are the rules kubeflow/manifests common/kubeflow-roles/base/cluster-roles.yaml
// gives a Profile owner (kubeflow-admin aggregates kubeflow-kubernetes-admin) for RBAC objects in
// their namespace: every verb on rolebindings and roles.
var tenantAdminRules = []rbacv1.PolicyRule{{
	APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings", "roles"},
	Verbs: []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
}}

// asTenant binds user to a stand-in of kubeflow-admin's RBAC rules in ns.
func asTenant(t *testing.T, env *envtest.Env, ns, user string) client.Client {
	t.Helper()
	return bound(t, env, userBinding(ns, "namespaceAdmin", user, nil), "attack-kubeflow-admin-rbac", tenantAdminRules)
}

// A tenant creates 24 RoleBindings with 200 KB annotations (and kfam's annotations with a 200 KB
// user on one of them) in their namespace. The manager's metadata cache, built from the plugins'
// cache options and shared by the controller's watch and the access plugin, holds of each a few
// hundred bytes; a contributor's binding keeps kfam's annotations. Measured on the cached objects,
// as the ConfigMap test is.
func TestATenantsRoleBindingsCostTheCacheAlmostNothingOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	ctx := context.Background()
	const ns, user, count, size = "attack-rolebindings", "mallory@example.com", 24, 200 << 10
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	tenant := asTenant(t, env, ns, user)
	blob := strings.Repeat("x", size)
	binding := func(name string, annotations map[string]string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "attack-kubeflow-admin-rbac"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
	}
	stored := 0
	for i := range count {
		annotations := map[string]string{"padding": blob}
		if i == 0 {
			annotations = map[string]string{authz.UserAnnotation: blob, authz.RoleAnnotation: authz.RoleEdit}
		}
		rb := binding(fmt.Sprintf("padding-%03d", i), annotations)
		require.NoError(t, tenant.Create(ctx, rb, client.FieldOwner("tenant")), "kubeflow-admin may create RoleBindings in its namespace")
		data, err := json.Marshal(rb)
		require.NoError(t, err)
		stored += len(data)
	}
	carol := authz.ContributorPolicyName("carol@example.com", authz.RoleEdit)
	require.NoError(t, tenant.Create(ctx, binding(carol, map[string]string{
		authz.UserAnnotation: "carol@example.com", authz.RoleAnnotation: authz.RoleEdit, "padding": blob})))

	mgr := startManager(t, env.Base)
	cached := authz.RoleBindingMetadataList()
	require.Eventually(t, func() bool {
		return mgr.GetCache().List(ctx, cached, client.InNamespace(ns)) == nil && len(cached.Items) == count+2
	}, 60*time.Second, 200*time.Millisecond, "the metadata cache holds every RoleBinding")
	total, largest := 0, 0
	for _, rb := range cached.Items {
		assert.Empty(t, rb.ManagedFields, rb.Name)
		assert.NotContains(t, rb.Annotations, "padding", rb.Name)
		data, err := json.Marshal(&rb)
		require.NoError(t, err)
		total += len(data)
		largest = max(largest, len(data))
		switch rb.Name {
		case carol:
			assert.Equal(t, map[string]string{authz.UserAnnotation: "carol@example.com", authz.RoleAnnotation: authz.RoleEdit}, rb.Annotations,
				"a contributor's binding keeps kfam's annotations")
		case "padding-000":
			assert.Contains(t, rb.Annotations[authz.UserAnnotation], "cut by the cache", "a user past any valid length is cut")
		}
	}
	t.Logf("%d RoleBindings: %d bytes stored by the tenant, %d bytes in the controller's metadata cache", count+1, stored, total)
	assert.Less(t, largest, 2<<10, "the largest cached RoleBinding of the tenant's holds this many bytes")
}
