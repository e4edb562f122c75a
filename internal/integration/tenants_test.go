package integration

// Tenants of the test API servers: users bound in a namespace to exactly the rules a test names,
// as Kubeflow's roles, kfam or a Profile's owner bind them.

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/pss"
)

// userBinding is a RoleBinding of user alone, named name in ns, with annotations.
func userBinding(ns, name, user string, annotations map[string]string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
}

// askEnforce makes the Profile ask for an enforce level, as its owner may edit it.
func askEnforce(t *testing.T, c client.Client, p *profilev1.Profile, level string) {
	t.Helper()
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(p), p))
	p.Spec.Plugins = []profilev1.Plugin{{TypeMeta: metav1.TypeMeta{Kind: pss.ProfileKind},
		Spec: &runtime.RawExtension{Raw: []byte(`{"enforce":"` + level + `"}`)}}}
	require.NoError(t, c.Update(context.Background(), p))
}

// asContributor binds user to a stand-in of kubeflow-edit's pod rules in ns under kfam's name for
// the binding, with kfam's annotations and, as kfam makes it (kubeflow/dashboard
// components/access-management/kfam/bindings.go, BindingClient.Create), no owner reference: the
// binding outlives the Profile.
func asContributor(t *testing.T, env *envtest.Env, ns, user, bindingName string) client.Client {
	t.Helper()
	return bound(t, env, userBinding(ns, bindingName, user, map[string]string{"user": user, "role": "edit"}),
		"attack-kubeflow-edit-pods", contributorPodRules)
}

// contributorPodRules are kubeflow-edit's rules on pods (kubeflow-kubernetes-edit).
var contributorPodRules = []rbacv1.PolicyRule{{
	APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"},
}}

// bound binds user in ns, through binding (its name and annotations set, the rest filled in), to a
// ClusterRole role holding rules, and returns a client that impersonates user: what the test
// writes through it is what such a tenant may write.
func bound(t *testing.T, env *envtest.Env, binding *rbacv1.RoleBinding, role string, rules []rbacv1.PolicyRule) client.Client {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}); err != nil {
		require.True(t, strings.Contains(err.Error(), "already exists"), err)
	}
	binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
	require.NoError(t, env.Client.Create(ctx, binding))
	cfg := rest.CopyConfig(env.Base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: binding.Subjects[0].Name}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	require.NoError(t, err)
	return c
}

// as is a client of the test API server acting as user in groups.
func as(t *testing.T, env *envtest.Env, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, err := client.New(cfg, client.Options{Scheme: envtest.NewScheme()})
	require.NoError(t, err)
	return c
}

// bind binds user in ns to the ClusterRole role.
func bind(t *testing.T, c client.Client, ns, user, role string) {
	t.Helper()
	require.NoError(t, c.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: strings.NewReplacer("@", "-", ".", "-").Replace(user) + "-" + role, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}))
}

// createIfAbsent creates obj unless an object of its name exists.
func createIfAbsent(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}
