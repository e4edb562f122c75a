package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

// clusterAdmin binds subject to cluster-admin until the test ends: the next test on the same
// server may run as the same ServiceAccount with less.
func clusterAdmin(t *testing.T, c client.Client, name string, subject rbacv1.Subject) {
	t.Helper()
	fixture.ClusterAdmin(t, c, name, subject)
	t.Cleanup(func() {
		require.NoError(t, c.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	})
}

// The reference controller, running as the ServiceAccount the guard trusts, converges with the
// guard installed: the namespace is made, enrolled and labelled, and anyone else's change of those
// labels is refused.
func TestTheControllerConvergesWithTheGuardInstalled(t *testing.T) {
	env := oneAtATime(t, guardServer)
	root := env.Client
	ctx := context.Background()
	clusterAdmin(t, root, "profile-plugins", rbacv1.Subject{Kind: "ServiceAccount", Name: "profile-plugins", Namespace: "kubeflow"})
	cfg := config.Default()
	installGuard(t, root, cfg)
	sa := rest.CopyConfig(env.Base)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kubeflow:profile-plugins",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kubeflow", "system:authenticated"}}
	startManager(t, sa, ctrl.Options{}, cfg, only(nil, "hana"))

	createProfile(t, root, "hana", "hana@example.com")
	n := &corev1.Namespace{}
	require.Eventually(t, func() bool {
		return root.Get(ctx, client.ObjectKey{Name: "hana"}, n) == nil && n.Labels["istio.io/dataplane-mode"] == "ambient" &&
			n.Labels["pod-security.kubernetes.io/enforce"] == "baseline"
	}, 60*time.Second, 200*time.Millisecond, "the controller enrols the namespace with the guard installed")

	// Anyone else's change of the labels is refused, a cluster admin's by RBAC too.
	clusterAdmin(t, root, "rbac-admin", rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "User", Name: "ops@example.com"})
	opsCfg := rest.CopyConfig(env.Base)
	opsCfg.Impersonate = rest.ImpersonationConfig{UserName: "ops@example.com", Groups: []string{"system:authenticated"}}
	ops, err := client.New(opsCfg, client.Options{Scheme: envtest.NewScheme()})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		require.NoError(t, root.Get(ctx, client.ObjectKey{Name: "hana"}, n))
		n.Labels["istio.io/dataplane-mode"] = "none"
		err := ops.Update(ctx, n, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.NamespaceLabelsPolicy) && strings.Contains(err.Error(), "istio.io/dataplane-mode")
	}, 30*time.Second, 200*time.Millisecond, "the guard refuses the label change")
}

// installGuard installs the guard cfg renders on the guard server and waits until it is in force;
// when the test ends it is removed, for the next test there to install its own.
func installGuard(t *testing.T, c client.Client, cfg *config.Config) {
	t.Helper()
	fixture.InstallGuard(t, c, cfg)
	removeGuardAtEnd(t, c, cfg)
}

// removeGuardAtEnd removes the guard cfg renders when the test ends, for the next test on the
// same server.
func removeGuardAtEnd(t *testing.T, c client.Client, cfg *config.Config) {
	t.Helper()
	objs, err := guard.Objects(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, o := range objs {
			require.NoError(t, client.IgnoreNotFound(c.Delete(context.Background(), o)), "removing %s", o.GetName())
		}
	})
}
