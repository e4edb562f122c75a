package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

// The reference controller, running as the ServiceAccount the guard trusts, converges with the
// guard installed: the namespace is made, enrolled and labelled, and anyone else's change of those
// labels is refused.
func TestTheControllerConvergesWithTheGuardInstalled(t *testing.T) {
	env := envtest.StartFresh(t, 0)
	root := env.Client
	ctx := context.Background()
	fixture.ClusterAdmin(t, root, "profile-plugins", rbacv1.Subject{Kind: "ServiceAccount", Name: "profile-plugins", Namespace: "kubeflow"})
	cfg := config.Default()
	require.NoError(t, cfg.Validate())
	objs, err := guard.Objects(cfg)
	require.NoError(t, err)
	for _, o := range objs {
		require.NoError(t, root.Create(ctx, o))
	}
	sa := rest.CopyConfig(env.Base)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kubeflow:profile-plugins",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kubeflow", "system:authenticated"}}
	startManager(t, sa, ctrl.Options{}, cfg, nil)

	createProfile(t, root, "hana", "hana@example.com")
	n := &corev1.Namespace{}
	require.Eventually(t, func() bool {
		return root.Get(ctx, client.ObjectKey{Name: "hana"}, n) == nil && n.Labels["istio.io/dataplane-mode"] == "ambient" &&
			n.Labels["pod-security.kubernetes.io/enforce"] == "baseline"
	}, 60*time.Second, 200*time.Millisecond, "the controller enrols the namespace with the guard installed")

	// Anyone else's change of the labels is refused, a cluster admin's by RBAC too.
	fixture.ClusterAdmin(t, root, "rbac-admin", rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "User", Name: "ops@example.com"})
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
