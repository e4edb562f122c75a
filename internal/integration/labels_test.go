package integration

// Who owns a namespace's guarded labels, on the real API server: a label another writer co-owns
// (past the guard, which judges values, not owners) keeps the objects it requires, and the
// runner's label writes name the namespace they mean, so a namespace deleted or recreated under
// them is neither brought back nor labelled.

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// A guarded label co-owned past the guard keeps the objects it requires (review R3-1,
// docs/security/reviews.md; medium: the guard's namespace-labels promise was bypassed). The namespace-labels policy refuses a change of a guarded label's presence or
// value (guard/guard.go namespaceLabels), not a change of who owns it. A writer with patch on the
// namespace server-side applies the labels the controller set, with the same values, under a
// field manager of their own: admitted, and they now co-own the labels. The runner takes a label
// off by leaving it out of its apply, which only releases its own ownership: a co-owned label
// stays. So the writer pins istio.io/dataplane-mode=ambient; after the admin switches to sidecar
// mode the runner pruned the ztunnel policy while the label stood, against guarantee 1. Now a
// data-plane label another writer owns keeps the objects it requires (runner holdStanding), and
// the runner warns.
func TestCoOwnedLabelKeepsRequiredObjects(t *testing.T) {
	t.Parallel()
	root, p, res := pinnedThroughASidecarSwitch(t, "pinned")
	labels := namespaceLabels(t, root, p.Name)
	require.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "the pinner's label stays: nothing the runner may do removes it")
	assert.NotNil(t, ztunnelPolicy(t, root, p.Name),
		"istio.io/dataplane-mode=ambient stands (co-owned by the pinner) and the ztunnel policy was pruned")
	assert.True(t, slices.ContainsFunc(res.Warnings(), func(w string) bool {
		return strings.Contains(w, "istio.io/dataplane-mode=ambient is also set by pinner")
	}), "the runner says why the ztunnel policy stays: %v", res.Warnings())
}

// pinnedThroughASidecarSwitch installs the guard, routes a Profile's namespace through its
// waypoint, has a namespace-label writer co-own istio.io/dataplane-mode and istio.io/use-waypoint
// with the runner's own values (the guard admits it: no value changes), and then switches the
// runner to sidecar mode until it converges, on Profile name. It returns the admin client, the Profile and the
// last Result.
func pinnedThroughASidecarSwitch(t *testing.T, name string) (client.Client, *profilev1.Profile, *runner.Result) {
	t.Helper()
	// The same values under another field manager: the guard sees no change.
	return pinnedUnder(t, name, func(ctx context.Context, attacker client.Client, ns string) error {
		pin := corev1ac.Namespace(ns).WithLabels(map[string]string{
			"istio.io/dataplane-mode": "ambient",
			"istio.io/use-waypoint":   "waypoint",
		})
		return attacker.Apply(ctx, pin, client.FieldOwner("pinner"))
	})
}

// A label co-owned under a field manager named like the runner's keeps the objects it requires
// (review R4-1, docs/security/reviews.md; medium: R3-1 again, past its fix). holdStanding (runner/holds.go) counts as
// "another writer" only a field manager for which notTheRunners holds: neither
// plugin.LabelFieldManager nor any name that starts with plugin.FieldManagerPrefix
// ("profile-plugins/"). Field manager names are chosen by the client, and the guard does not look
// at them. A namespace-label writer who co-owns istio.io/dataplane-mode=ambient under
// "profile-plugins/pinner" (not a plugin's name, so releaseLegacy never releases it either) is
// taken for the runner: the label is not standing, the switch to sidecar mode prunes the ztunnel
// policy while the label stays (the runner cannot remove it), and no warning says so.
// Fixed: the runner's own are only its exact managers' applies (runner otherLabelOwners).
func TestPrefixedManagerLabelKeepsRequiredObjects(t *testing.T) {
	t.Parallel()
	root, p, res := pinnedUnder(t, "pinned-prefixed", applyUnder(plugin.FieldManagerPrefix+"pinner"))
	labels := namespaceLabels(t, root, p.Name)
	require.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "the pinner's label stays: nothing the runner may do removes it")
	assert.NotNil(t, ztunnelPolicy(t, root, p.Name),
		"istio.io/dataplane-mode=ambient stands (co-owned by field manager profile-plugins/pinner) and the ztunnel policy was pruned; result %s", res)
}

// R4-1, second way: the pin applied through the namespace's status subresource (update on
// namespaces/status). labelowners.Managers skips every managedFields entry of a subresource, so
// holdStanding sees no other owner; the label stays when the runner leaves it out, and the
// ztunnel policy is pruned. Fixed: entries of a subresource are another writer's.
func TestStatusPinnedLabelKeepsRequiredObjects(t *testing.T) {
	t.Parallel()
	root, p, res := pinnedUnder(t, "pinned-status", func(ctx context.Context, attacker client.Client, ns string) error {
		pin := corev1ac.Namespace(ns).WithLabels(map[string]string{"istio.io/dataplane-mode": "ambient"})
		return attacker.Status().Apply(ctx, pin, client.FieldOwner("pinner"))
	})
	if namespaceLabels(t, root, p.Name)["istio.io/dataplane-mode"] == "ambient" {
		assert.NotNil(t, ztunnelPolicy(t, root, p.Name), "the status pin stands and the ztunnel policy was pruned; %s", res)
	}
}

// pinFunc co-owns istio.io/dataplane-mode=ambient on namespace ns as the attacker.
type pinFunc func(ctx context.Context, attacker client.Client, ns string) error

// applyUnder pins with a server-side apply under field manager manager.
func applyUnder(manager string) pinFunc {
	return func(ctx context.Context, attacker client.Client, ns string) error {
		pin := corev1ac.Namespace(ns).WithLabels(map[string]string{"istio.io/dataplane-mode": "ambient"})
		return attacker.Apply(ctx, pin, client.FieldOwner(manager))
	}
}

// pinnedUnder is pinnedThroughASidecarSwitch with the pin made by pinIt, on Profile name.
// On guardedEnv's server, where widened may update namespaces and their status (as the
// namespace-label writer the guard is for) and the controller's ServiceAccount is cluster-admin.
func pinnedUnder(t *testing.T, name string, pinIt pinFunc) (client.Client, *profilev1.Profile, *runner.Result) {
	t.Helper()
	env, cfg := guardedEnv(t)
	root := env.Client
	ctx := context.Background()
	controller := as(t, env, controllerUser, "system:serviceaccounts", "system:serviceaccounts:kubeflow")
	p := profileIn(t, root, name)
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
	require.NoError(t, pinIt(ctx, attacker, p.Name), "the guard admits co-owning the guarded label")
	require.NoError(t, root.Get(ctx, client.ObjectKey{Name: p.Name}, n))
	for _, e := range n.ManagedFields {
		t.Logf("managedFields: manager %q operation %s subresource %q", e.Manager, e.Operation, e.Subresource)
	}

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

// With the pin under a manager of its own the runner converges: once the switch is done a further
// call changes nothing, and the standing label is warned about (tried by review R4,
// docs/security/reviews.md, and held).
func TestStandingLabelConverges(t *testing.T) {
	t.Parallel()
	root, p, res := pinnedUnder(t, "pinned-standing", applyUnder("pinner"))
	require.NotNil(t, ztunnelPolicy(t, root, p.Name))
	assert.False(t, res.Changed(), "the runner writes at every call under a standing label: %s", res)
	assert.True(t, slices.ContainsFunc(res.Warnings(), func(w string) bool {
		return strings.Contains(w, "istio.io/dataplane-mode=ambient is also set by pinner")
	}), "%v", res.Warnings())
}

// A namespace deleted and created again under the same name while the runner's cache still shows
// the old one: the label write names the old UID, the API server refuses it, and the new namespace
// gets no enrolment label (fail closed) although the call goes on to create the objects (tried
// by review R4, docs/security/reviews.md, and held).
func TestLabelWriteToRecreatedNamespaceFailsClosed(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	root := env.Client
	ctx := context.Background()
	p := profileIn(t, root, "recreated-uid")
	old := &corev1.Namespace{}
	require.NoError(t, root.Get(ctx, client.ObjectKey{Name: p.Name}, old))

	cs, err := kubernetes.NewForConfig(env.Base)
	require.NoError(t, err)
	removeNamespaceNow(ctx, t, cs, p.Name)
	require.NoError(t, root.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Name,
		Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}}))

	// The cache lags: it still shows the namespace as it was, old UID and all.
	ww, err := client.NewWithWatch(env.Base, client.Options{Scheme: envtest.NewScheme()})
	require.NoError(t, err)
	stale := interceptor.NewClient(ww, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if nsObj, isNamespace := obj.(*corev1.Namespace); isNamespace && key.Name == p.Name {
				old.DeepCopyInto(nsObj)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	r := runnerFor(t, root, config.ModeAmbient)
	r.Reader = stale
	var errs []string
	for range 3 {
		res := r.Apply(ctx, p)
		if res.Err() != nil {
			errs = append(errs, res.Err().Error())
		}
	}
	require.NotEmpty(t, errs, "every label write names the old UID")
	assert.Contains(t, errs[0], "uid", "the API server refuses the write for its UID: %v", errs)
	labels := namespaceLabels(t, root, p.Name)
	for _, k := range []string{"istio.io/dataplane-mode", "istio.io/use-waypoint", "istio.io/ingress-use-waypoint", "pod-security.kubernetes.io/enforce"} {
		assert.NotContains(t, labels, k, "the new namespace got a label from a write meant for the old one")
	}
	t.Logf("errors: %v", errs)
}

// A label write racing the namespace's deletion does not recreate it (review R3-2,
// docs/security/reviews.md; low: an orphan namespace; fixed: the label applies name the
// namespace's UID, runner/labelwrite.go). deploy/rbac/role.yaml said the
// profile-plugins role has no namespaces create so that "an apply racing its deletion must not
// recreate it", but the reference controller's own role in the same file grants namespaces create
// to the same ServiceAccount (for the namespaces it makes), and the label phase's server-side apply
// names no UID (runner/labelwrite.go writeLabels: corev1ac.Namespace(ns.Name)). A namespace
// deleted between the runner's read and its label write is created anew by that apply, with the
// enrolment and Pod Security labels and without the profiles controller's owner annotation (so
// outside the guard). The test deletes (and finalizes) the namespace just before the label write,
// as the overlay's ServiceAccount with only deploy/rbac's roles, and FAILS while the namespace
// comes back.
//
// On Start's server, where nothing else binds the controller's ServiceAccount (guardedEnv's
// cluster-admin binding is on a server of its own).
func TestLabelWriteDoesNotRecreateNamespace(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	root := env.Client
	ctx := context.Background()
	for _, u := range readObjects(t, filepath.Join(golden.ModuleRoot(t), "deploy", "rbac", "role.yaml")) {
		if u.GetKind() != "ClusterRole" {
			continue
		}
		createIfAbsent(t, root, u)
		createIfAbsent(t, root, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: u.GetName()},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: u.GetName()},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "profile-plugins", Namespace: "kubeflow"}}})
	}
	cs, err := kubernetes.NewForConfig(env.Base)
	require.NoError(t, err)
	p := profileIn(t, root, "racing")
	raced := false
	saCfg := rest.CopyConfig(env.Base)
	saCfg.Impersonate = rest.ImpersonationConfig{UserName: controllerUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kubeflow", "system:authenticated"}}
	sa, err := client.NewWithWatch(saCfg, client.Options{Scheme: envtest.NewScheme()})
	require.NoError(t, err)
	c := interceptor.NewClient(sa, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if _, isNamespace := obj.(*corev1ac.NamespaceApplyConfiguration); isNamespace && !raced {
				raced = true
				removeNamespaceNow(ctx, t, cs, p.Name)
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
	r := runnerFor(t, c, config.ModeSidecar)
	res := r.Apply(ctx, p)
	require.True(t, raced, "the call wrote the namespace's labels: %s", res)
	n, err := cs.CoreV1().Namespaces().Get(ctx, p.Name, metav1.GetOptions{})
	if err == nil {
		t.Errorf("the label write recreated namespace %s (labels %v, annotations %v)", p.Name, n.Labels, n.Annotations)
	} else {
		assert.True(t, apierrors.IsNotFound(err), "%v", err)
	}
}
