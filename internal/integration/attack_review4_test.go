//go:build openfindings

package integration

// The fourth review of Dec 1 (review4), of the changes since review3. Each test here reproduces one
// finding on the real API server and FAILS while it stands.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
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
// FAILS while the ztunnel policy is pruned under the pinned label.
func TestALabelCoOwnedUnderAPrefixedManagerDoesNotOutliveTheObjectsItRequiresOnTheAPIServer(t *testing.T) {
	root, p, res := pinnedUnder(t, plugin.FieldManagerPrefix+"pinner")
	labels := namespaceLabels(t, root, p.Name)
	require.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "the pinner's label stays: nothing the runner may do removes it")
	assert.NotNil(t, ztunnelPolicy(t, root, p.Name),
		"istio.io/dataplane-mode=ambient stands (co-owned by field manager profile-plugins/pinner) and the ztunnel policy was pruned; result %s", res)
}

// pinnedUnder is pinnedThroughASidecarSwitch with the pinner's field manager named manager.
func pinnedUnder(t *testing.T, manager string) (client.Client, *profilev1.Profile, *runner.Result) {
	t.Helper()
	env := envtest.StartFresh(t, 0)
	root := env.Client
	ctx := context.Background()
	require.NoError(t, root.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "namespace-patcher"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch"}},
	}}))
	fixture.ClusterAdmin(t, root, "profile-plugins", rbacv1.Subject{Kind: "ServiceAccount", Name: "profile-plugins", Namespace: "kubeflow"})
	cfg := config.Default()
	require.NoError(t, cfg.Validate())
	objs, err := guard.Objects(cfg)
	require.NoError(t, err)
	for _, o := range objs {
		require.NoError(t, root.Create(ctx, o))
	}
	controller := as(t, env, controllerUser, "system:serviceaccounts", "system:serviceaccounts:kubeflow")
	p := profileIn(t, root, "pinned")
	require.NoError(t, root.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wil-namespaces"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "namespace-patcher"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: widened}}}))
	r, err := profileplugins.NewRunner(controller, cfg)
	require.NoError(t, err)
	routeThroughWaypoint(t, r, root, p)

	attacker := as(t, env, widened)
	n := &corev1.Namespace{}
	require.NoError(t, root.Get(ctx, client.ObjectKey{Name: p.Name}, n))
	n.Labels["istio.io/dataplane-mode"] = "none"
	require.Eventually(t, func() bool {
		err := attacker.Update(ctx, n, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.NamespaceLabelsPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the guard takes effect and refuses a change of value")
	pin := corev1ac.Namespace(p.Name).WithLabels(map[string]string{"istio.io/dataplane-mode": "ambient"})
	require.NoError(t, attacker.Apply(ctx, pin, client.FieldOwner(manager)), "the guard admits co-owning the guarded label")

	sidecar := config.Default()
	sidecar.Mesh.Mode = config.ModeSidecar
	require.NoError(t, sidecar.Validate())
	rs, err := profileplugins.NewRunner(controller, sidecar)
	require.NoError(t, err)
	var res *runner.Result
	for range 5 {
		res = rs.Apply(ctx, p)
		require.NoError(t, res.Err())
		if !res.Changed() && len(res.Waiting()) == 0 {
			break
		}
	}
	return root, p, res
}

// Not a finding (held): with the pin under a manager of its own the runner converges: once the
// switch is done a further call changes nothing, and the standing label is warned about.
func TestAStandingLabelConvergesOnTheAPIServer(t *testing.T) {
	root, p, res := pinnedUnder(t, "pinner")
	require.NotNil(t, ztunnelPolicy(t, root, p.Name))
	assert.False(t, res.Changed(), "the runner writes at every call under a standing label: %s", res)
	assert.True(t, slices.ContainsFunc(res.Warnings(), func(w string) bool {
		return strings.Contains(w, "istio.io/dataplane-mode=ambient is also set by pinner")
	}), "%v", res.Warnings())
}
