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
	"slices"
	"strings"
	"testing"
	"time"

	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/runner"
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

// A relist before a contested create reads none of the tenant's padding (review R4-3,
// docs/security/reviews.md; medium: finding 1 of the second review, the tenant's RoleBindings in
// the controller's memory, come back per call). The metadata cache trims RoleBindings
// (TrimRoleBindingMetadata), but before it creates a contested object (one in Desired.Adopt that
// it does not observe: a contributor's policy once kfamGracePeriod is over, the owner policy with
// adoptOwnerPolicy) the runner relists every kind a plugin only reads through the APIReader
// (runner/reads.go complete, relistReadOnly), in one unpaginated List and untrimmed: every
// annotation and managedFields of every RoleBinding of the namespace, all in memory at once, and
// handed to the plugins. A Profile owner (kubeflow-admin creates rolebindings) pads their
// bindings and then adds a contributor binding whenever they like: each makes the controller read
// all of it again. Measured on what the APIReader returns. Fixed: the runner reads, under the
// contested object's name only, the read-only objects (runner confirmReadOnly). It failed while it read the
// tenant's padding.
func TestContestedCreateSkipsTenantPadding(t *testing.T) {
	env := envtest.Start(t)
	ctx := context.Background()
	const user, count, size = "mallory@example.com", 24, 200 << 10
	p := profileIn(t, env.Client, "attack-relist")
	tenant := asTenant(t, env, p.Name, user)
	blob := strings.Repeat("x", size)
	binding := func(name string, annotations map[string]string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Name, Annotations: annotations},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "attack-kubeflow-admin-rbac"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
	}
	for i := range count {
		require.NoError(t, tenant.Create(ctx, binding(fmt.Sprintf("padding-%03d", i), map[string]string{"padding": blob})))
	}
	mgr := startManager(t, env.Base)
	cfg := fixture.Config(t, "authorization: {contributors: plugin, kfamGracePeriod: 0s}\n")
	r, err := profileplugins.NewRunner(mgr.GetClient(), cfg, runner.WithManager(mgr, profileplugins.CacheOptions()))
	require.NoError(t, err)
	counting := &countingReader{Reader: mgr.GetAPIReader()}
	r.APIReader = counting
	for range 3 {
		require.NoError(t, r.Apply(ctx, p).Err())
	}

	carol := authz.ContributorPolicyName("carol@example.com", authz.RoleEdit)
	require.NoError(t, tenant.Create(ctx, binding(carol, map[string]string{authz.UserAnnotation: "carol@example.com", authz.RoleAnnotation: authz.RoleEdit})))
	cached := authz.RoleBindingMetadataList()
	require.Eventually(t, func() bool {
		return mgr.GetCache().List(ctx, cached, client.InNamespace(p.Name)) == nil && slices.ContainsFunc(cached.Items, func(m metav1.PartialObjectMetadata) bool {
			return m.Name == carol
		})
	}, 30*time.Second, 100*time.Millisecond)
	counting.bytes = 0
	res := r.Apply(ctx, p)
	require.NoError(t, res.Err())
	require.True(t, exists(t, env.Client, &istiosecurityv1.AuthorizationPolicy{}, p.Name, carol), "the plugin created carol's policy: %s", res)
	t.Logf("the call read %d bytes of RoleBindings through the APIReader; the tenant stored about %d", counting.bytes, count*size)
	assert.Less(t, counting.bytes, 64<<10, "the relist read the tenant's padding whole")
}

// countingReader counts the bytes of the RoleBindings its lists return.
type countingReader struct {
	client.Reader
	bytes int
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := c.Reader.List(ctx, list, opts...)
	if l, ok := list.(*metav1.PartialObjectMetadataList); ok && err == nil && strings.HasPrefix(l.GetObjectKind().GroupVersionKind().Kind, "RoleBinding") {
		data, _ := json.Marshal(l)
		c.bytes += len(data)
	}
	return err
}
