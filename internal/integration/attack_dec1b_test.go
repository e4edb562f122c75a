package integration

// A fresh attack review of e3f7b7c (issue #21's last "Done when"). Each test here reproduces one
// finding on the real API server and FAILS while the finding stands; none changes library code.

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
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
)

// tenantAdminRules are the rules kubeflow/manifests common/kubeflow-roles/base/cluster-roles.yaml
// gives a Profile owner (kubeflow-admin aggregates kubeflow-kubernetes-admin) for RBAC objects in
// their namespace: every verb on rolebindings and roles.
var tenantAdminRules = []rbacv1.PolicyRule{{
	APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings", "roles"},
	Verbs: []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
}}

// asTenant binds user to a stand-in of kubeflow-admin's RBAC rules in ns and returns a client that
// impersonates user, so what the test writes is what such a tenant may write.
func asTenant(t *testing.T, env *envtest.Env, ns, user string) client.Client {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "attack-kubeflow-admin-rbac"}, Rules: tenantAdminRules}
	if err := env.Client.Create(ctx, role); err != nil {
		require.True(t, strings.Contains(err.Error(), "already exists"), err)
	}
	require.NoError(t, env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "namespaceAdmin", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}))
	cfg := rest.CopyConfig(env.Base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	require.NoError(t, err)
	return c
}

// Finding 1 (medium, denial of service of the shared controller). Finding B of the Dec 1 review
// trimmed ConfigMaps in the cache, but RoleBindings are cached cluster-wide and whole
// (runner.CacheByObject selects and trims nothing else; the reference controller watches them
// with kubeflow.EnqueueProfileOfNamespace, and the authz plugin lists them from the cache). A
// Profile owner holds kubeflow-admin, which grants create on rolebindings in their namespace, so
// they can bind their own role as often as they like with annotations of up to 256 KB each (and
// thousands of subjects): every byte lands in the controller's memory and stays until deleted.
// The test measures the cached objects, as the ConfigMap test does: it FAILS while a tenant's
// RoleBinding costs the cache more than 2 KB.
func TestATenantsRoleBindingsCostTheCacheAlmostNothingOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	ctx := context.Background()
	const ns, user, count, size = "attack-rolebindings", "mallory@example.com", 24, 200 << 10
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	tenant := asTenant(t, env, ns, user)
	blob := strings.Repeat("x", size)
	stored := 0
	for i := range count {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("padding-%03d", i), Namespace: ns,
				Annotations: map[string]string{"padding": blob}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "attack-kubeflow-admin-rbac"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		require.NoError(t, tenant.Create(ctx, rb), "kubeflow-admin may create RoleBindings in its namespace")
		data, err := json.Marshal(rb)
		require.NoError(t, err)
		stored += len(data)
	}

	mgr := startManager(t, env.Base)
	cached := &rbacv1.RoleBindingList{}
	require.Eventually(t, func() bool {
		return mgr.GetCache().List(ctx, cached, client.InNamespace(ns)) == nil && len(cached.Items) == count+1
	}, 60*time.Second, 200*time.Millisecond, "the cache holds every RoleBinding")
	total, largest := 0, 0
	for _, rb := range cached.Items {
		data, err := json.Marshal(&rb)
		require.NoError(t, err)
		total += len(data)
		largest = max(largest, len(data))
	}
	t.Logf("%d RoleBindings: %d bytes stored by the tenant, %d bytes cached by the controller", count, stored, total)
	assert.Less(t, largest, 2<<10, "the largest cached RoleBinding of the tenant's holds this many bytes")
}
