package integration

// A fresh attack review of e3f7b7c (issue #21's last "Done when"). Each test here reproduces one
// finding on the real API server and FAILS while the finding stands; none changes library code.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
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

// Finding 3 (low, careless admin). validateMatch refuses selectors on labels that follow the
// Profile, but accepts a negative selector on the admin's own label: NotIn or DoesNotExist match
// every namespace the admin has not labelled, which is every namespace a user registers from now
// on. The same hand-out of privileged to anyone who registers that the refusal of profiles: ["*"]
// and of kubernetes.io/metadata.name is there to prevent. FAILS while such a selector validates.
func TestANegativeOverrideSelectorIsRefusedOnTheAPIServer(t *testing.T) {
	body := `  overrides:
  - namespaceSelector: {matchExpressions: [{key: example.com/tier, operator: DoesNotExist}]}
    minimumEnforce: privileged
`
	// Parsed as the controller loads it (config.Parse validates), not through fixture.Config,
	// which fails the test on a refused configuration.
	cfg, err := config.Parse([]byte("apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\nmesh: {mode: none}\npodSecurity:\n" + body))
	if err == nil {
		err = cfg.Validate()
	}
	if err == nil {
		// Show what it means: a Profile anyone registers gets privileged.
		env := envtest.Start(t)
		c := env.Client
		r, rerr := profileplugins.NewRunner(c, cfg)
		require.NoError(t, rerr)
		p := profileIn(t, c, "attack-new-user")
		askEnforce(t, c, p, "privileged")
		converged(t, r, p)
		t.Logf("a freshly registered Profile's enforce: %q", namespaceLabels(t, c, "attack-new-user")["pod-security.kubernetes.io/enforce"])
	}
	assert.Error(t, err, "an override whose selector matches every namespace the admin did not label validates")
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

// Finding 4 (medium, Pod Security loosened and the mesh left, reachable by a contributor). When a
// Profile whose namespace survives it (owned by the owner annotation: an admin made it) is
// deleted, Revoke waits for the last pod and then takes every Pod Security label and the ambient
// labels off, with the ztunnel policy. The contributors' RoleBindings stay: kfam makes them with
// no owner reference, so the Profile's deletion does not collect them. A contributor (kubeflow-edit
// may create pods) then creates a privileged pod, and the API server admits it (no enforce label:
// the cluster default, privileged unless the admin configured PodSecurity admission otherwise),
// out of the mesh (no istio.io/dataplane-mode, so ztunnel captures nothing and no ztunnel policy
// exists: any pod of any namespace reaches it in plaintext). The namespace ends less protected
// than it was while the Profile lived, in the hands of the same people. The owner may make such
// bindings for themselves too (kubeflow-admin creates RoleBindings). FAILS while the contributor's
// privileged pod is admitted.
func TestASurvivingNamespaceKeepsPodSecurityForTheBindingsThatSurviveOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "attack-survives")
	r := runnerFor(t, c, config.ModeAmbient)
	enrolledIn(t, c, r, p)
	bob := asContributor(t, env, p.Name, "bob@example.com", "user-bob-example-com-clusterrole-edit")
	err := bob.Create(ctx, boundPod(p.Name, "bob-privileged", true))
	require.True(t, apierrors.IsForbidden(err), "while the Profile lives, Pod Security refuses the contributor's privileged pod: %v", err)

	// The admin deletes the Profile; no pod runs, so Revoke finishes at once.
	res := r.Revoke(ctx, p)
	require.NoError(t, res.Err())
	require.Empty(t, res.Waiting())
	labels := namespaceLabels(t, c, p.Name)
	t.Logf("the surviving namespace's labels after Revoke: %v", labels)

	err = bob.Create(ctx, boundPod(p.Name, "bob-privileged", true))
	assert.Error(t, err, "the contributor's RoleBinding survived the Profile, and the namespace now admits their privileged pod")
	assert.NotEmpty(t, labels["pod-security.kubernetes.io/enforce"], "the surviving namespace was left without Pod Security")
}

// Finding 5 (low, denial of service of one Profile's reconciles, and load on the shared
// controller). The Result's waiting reasons and errors name every pod they count, without a bound
// (runner/holds.go, the data-plane and admission holds; pss/pss.go, preflight), and
// Result.Condition joins them all into the one message the controller patches into the Profile's
// status on every change (cmd/profile-plugins-controller, writeCondition). Pod names are the
// tenant's choice, up to 253 characters, and their number is bounded only by a ResourceQuota: a
// hundred pods with long names already take the message past the 32768 characters Kubernetes allows a
// metav1.Condition message, and some 3,000 past the API server's 1.5 MB object limit, when the
// status patch fails on every reconcile, each of which lists all the pods again past the cache.
// Pending pods count (neither finished nor being deleted), so they need no node. FAILS while the
// condition grows with the tenant's pods.
func TestTheConditionDoesNotGrowWithTheTenantsPodsOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "attack-condition")
	r := runnerFor(t, c, config.ModeAmbient)
	enrolledIn(t, c, r, p)
	const pods = 80
	for i := range pods {
		name := fmt.Sprintf("%s-%03d", strings.Repeat("p", 240), i)
		require.NoError(t, c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}}}))
	}
	res := r.Revoke(ctx, p)
	require.NoError(t, res.Err())
	msg := res.Condition().Message
	t.Logf("%d pods: the Profile's condition message has %d characters", pods, len(msg))
	assert.LessOrEqual(t, len(msg), 32768, "the condition message grows with the number and names of the tenant's pods")
}

// contributorPodRules are kubeflow-edit's rules on pods (kubeflow-kubernetes-edit, same file).
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
