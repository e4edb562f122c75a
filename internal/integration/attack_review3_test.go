package integration

// The third review of Dec 1 (review3): each test here reproduced one finding on the real API server
// and failed while it stood; both are fixed (SECURITY.md, "Third review"). What is left of R3-1 is
// in attack_open_test.go.

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Finding R3-1 (medium: the guard's namespace-labels promise was bypassed; no traffic was let in
// by it alone). The namespace-labels policy refuses a change of a guarded label's presence or
// value (guard/guard.go namespaceLabels), not a change of who owns it. A writer with patch on the
// namespace server-side applies the labels the controller set, with the same values, under a
// field manager of their own: admitted, and they now co-own the labels. The runner takes a label
// off by leaving it out of its apply, which only releases its own ownership: a co-owned label
// stays. So the writer pins istio.io/dataplane-mode=ambient; after the admin switches to sidecar
// mode the runner pruned the ztunnel policy while the label stood, against guarantee 1. Now a
// data-plane label another writer owns keeps the objects it requires (runner holdStanding), and
// the runner warns.
func TestALabelCoOwnedPastTheGuardDoesNotOutliveTheObjectsItRequiresOnTheAPIServer(t *testing.T) {
	root, p, res := pinnedThroughASidecarSwitch(t)
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
// runner to sidecar mode until it converges. It returns the admin client, the Profile and the
// last Result.
func pinnedThroughASidecarSwitch(t *testing.T) (client.Client, *profilev1.Profile, *runner.Result) {
	t.Helper()
	// The same values under another field manager: the guard sees no change.
	return pinnedUnder(t, func(ctx context.Context, attacker client.Client, ns string) error {
		pin := corev1ac.Namespace(ns).WithLabels(map[string]string{
			"istio.io/dataplane-mode": "ambient",
			"istio.io/use-waypoint":   "waypoint",
		})
		return attacker.Apply(ctx, pin, client.FieldOwner("pinner"))
	})
}

// Finding R3-2 (low: an orphan namespace, no access granted; fixed: the label applies name the
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
func TestALabelWriteRacingTheNamespacesDeletionDoesNotRecreateItOnTheAPIServer(t *testing.T) {
	env := envtest.StartFresh(t, 0)
	root := env.Client
	ctx := context.Background()
	for _, u := range readObjects(t, filepath.Join(golden.ModuleRoot(t), "deploy", "rbac", "role.yaml")) {
		if u.GetKind() != "ClusterRole" {
			continue
		}
		require.NoError(t, root.Create(ctx, u))
		require.NoError(t, root.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: u.GetName()},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: u.GetName()},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "profile-plugins", Namespace: "kubeflow"}}}))
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
				require.NoError(t, cs.CoreV1().Namespaces().Delete(ctx, p.Name, metav1.DeleteOptions{}))
				n, err := cs.CoreV1().Namespaces().Get(ctx, p.Name, metav1.GetOptions{})
				require.NoError(t, err)
				n.Spec.Finalizers = nil
				_, err = cs.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{})
				require.NoError(t, err)
				require.Eventually(t, func() bool {
					_, err := cs.CoreV1().Namespaces().Get(ctx, p.Name, metav1.GetOptions{})
					return apierrors.IsNotFound(err)
				}, 10*time.Second, 50*time.Millisecond)
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
