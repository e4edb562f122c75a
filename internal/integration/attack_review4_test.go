package integration

// The fourth review of Dec 1 (review4), of the changes since review3. Each test here reproduced one
// finding on the real API server and failed while it stood; all are fixed (SECURITY.md, "Fourth
// review"), so they run in make test.

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
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Finding R4-1 (medium: R3-1 again, past its fix). holdStanding (runner/holds.go) counts as
// "another writer" only a field manager for which notTheRunners holds: neither
// plugin.LabelFieldManager nor any name that starts with plugin.FieldManagerPrefix
// ("profile-plugins/"). Field manager names are chosen by the client, and the guard does not look
// at them. A namespace-label writer who co-owns istio.io/dataplane-mode=ambient under
// "profile-plugins/pinner" (not a plugin's name, so releaseLegacy never releases it either) is
// taken for the runner: the label is not standing, the switch to sidecar mode prunes the ztunnel
// policy while the label stays (the runner cannot remove it), and no warning says so.
// Fixed: the runner's own are only its exact managers' applies (runner otherLabelOwners).
func TestALabelCoOwnedUnderAPrefixedManagerDoesNotOutliveTheObjectsItRequiresOnTheAPIServer(t *testing.T) {
	root, p, res := pinnedUnder(t, applyUnder(plugin.FieldManagerPrefix+"pinner"))
	labels := namespaceLabels(t, root, p.Name)
	require.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "the pinner's label stays: nothing the runner may do removes it")
	assert.NotNil(t, ztunnelPolicy(t, root, p.Name),
		"istio.io/dataplane-mode=ambient stands (co-owned by field manager profile-plugins/pinner) and the ztunnel policy was pruned; result %s", res)
}

// Finding R4-1, second way: the pin applied through the namespace's status subresource (update on
// namespaces/status). labelowners.Managers skips every managedFields entry of a subresource, so
// holdStanding sees no other owner; the label stays when the runner leaves it out, and the
// ztunnel policy is pruned. Fixed: entries of a subresource are another writer's.
func TestALabelCoOwnedThroughTheStatusSubresourceDoesNotOutliveTheObjectsItRequiresOnTheAPIServer(t *testing.T) {
	root, p, res := pinnedUnder(t, func(ctx context.Context, attacker client.Client, ns string) error {
		pin := corev1ac.Namespace(ns).WithLabels(map[string]string{"istio.io/dataplane-mode": "ambient"})
		return attacker.Status().Apply(ctx, pin, client.FieldOwner("pinner"))
	})
	if namespaceLabels(t, root, p.Name)["istio.io/dataplane-mode"] == "ambient" {
		assert.NotNil(t, ztunnelPolicy(t, root, p.Name), "the status pin stands and the ztunnel policy was pruned; %s", res)
	}
}

// Finding R4-2 (high where anyone but the controller may write namespaces/status; the guard's
// namespace-labels promise is bypassed, and Pod Security with it). The guard's namespace-labels
// policy matches resources "namespaces" only (guard/guard.go, the Rule of namespaceLabels), not the
// subresource "namespaces/status", and the API server takes metadata, labels included, from a
// namespace's status update. A writer with update on namespaces/status (not granted by Kubeflow's
// roles; granted by any role with resources "*" or "namespaces/*") changes
// pod-security.kubernetes.io/enforce to privileged and istio.io/dataplane-mode to none: admitted,
// and a privileged pod is admitted until the runner's next reconcile repairs the labels (the pod
// stays). Fixed: the guard matches namespaces/status (and pods/status, services/status) too.
func TestTheGuardRefusesAGuardedLabelChangedThroughTheStatusSubresourceOnTheAPIServer(t *testing.T) {
	env := envtest.StartFresh(t, 0)
	root := env.Client
	ctx := context.Background()
	require.NoError(t, root.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "namespace-status-patcher"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces/status"}, Verbs: []string{"get", "update", "patch"}},
	}}))
	fixture.ClusterAdmin(t, root, "profile-plugins", rbacv1.Subject{Kind: "ServiceAccount", Name: "profile-plugins", Namespace: "kubeflow"})
	cfg := installGuard(t, root, config.ModeAmbient)
	controller := as(t, env, controllerUser, "system:serviceaccounts", "system:serviceaccounts:kubeflow")
	p := profileIn(t, root, "status")
	require.NoError(t, root.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wil-namespaces"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "namespace-status-patcher"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: widened}}}))
	r, err := profileplugins.NewRunner(controller, cfg)
	require.NoError(t, err)
	routeThroughWaypoint(t, r, root, p)
	before := namespaceLabels(t, root, p.Name)
	t.Logf("labels before: %v", before)

	attacker := as(t, env, widened)
	n := &corev1.Namespace{}
	require.NoError(t, root.Get(ctx, client.ObjectKey{Name: p.Name}, n))
	n.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
	require.Eventually(t, func() bool {
		err := attacker.Update(ctx, n, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.NamespaceLabelsPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the guard takes effect and refuses a change of value")

	require.NoError(t, root.Get(ctx, client.ObjectKey{Name: p.Name}, n))
	n.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
	n.Labels["istio.io/dataplane-mode"] = "none"
	require.Error(t, root.Create(ctx, boundPod(p.Name, "privileged-before", true)), "baseline refuses a privileged pod")
	err = attacker.Status().Update(ctx, n)
	t.Logf("status update: %v", err)
	after := namespaceLabels(t, root, p.Name)
	t.Logf("labels after: %v", after)
	assert.Equal(t, before["pod-security.kubernetes.io/enforce"], after["pod-security.kubernetes.io/enforce"], "changed through namespaces/status")
	assert.Equal(t, before["istio.io/dataplane-mode"], after["istio.io/dataplane-mode"], "changed through namespaces/status")
	assert.Error(t, root.Create(ctx, boundPod(p.Name, "privileged-after", true)), "a privileged pod is admitted after the status update")
}

// Finding R4-3 (medium: finding 1 of the second review, the tenant's RoleBindings in the
// controller's memory, comes back per call). The metadata cache trims RoleBindings
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
func TestARelistBeforeAContestedCreateDoesNotReadTheTenantsPaddingOnTheAPIServer(t *testing.T) {
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
