package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// The controller starts and reconciles through its watches on a cluster without the CRDs its mode
// does not write: sidecar mode without the Gateway API, none mode without it or Istio. A watch of
// a kind that is not served would keep the controller from ever starting.
func TestTheControllerStartsWithoutCRDsItsModeDoesNotNeed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		left    envtest.CRDs
		mode    config.MeshMode
		profile string
		labels  map[string]string
		policy  bool
	}{
		{"sidecar mode without the Gateway API", envtest.GatewayAPI, config.ModeSidecar, "erin",
			map[string]string{"istio-injection": "enabled", "pod-security.kubernetes.io/enforce": "baseline"}, true},
		{"none mode without the Gateway API or Istio", envtest.GatewayAPI | envtest.Istio, config.ModeNone, "fred",
			map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := envtest.StartWithout(t, tc.left)
			cfg := config.Default()
			cfg.Mesh.Mode = tc.mode
			require.NoError(t, cfg.Validate())
			ctx := startManager(t, env.Config, ctrl.Options{}, cfg, nil)

			createProfile(t, env.Client, tc.profile, tc.profile+"@example.com")
			require.Eventually(t, func() bool {
				p := &profilev1.Profile{}
				if env.Client.Get(ctx, client.ObjectKey{Name: tc.profile}, p) != nil {
					return false
				}
				for _, c := range p.Status.Conditions {
					if c.Type == kubeflow.ConditionType {
						return c.Status == "True"
					}
				}
				return false
			}, 30*time.Second, 100*time.Millisecond, "the Profile is reconciled through the watch and becomes ready")
			n := &corev1.Namespace{}
			require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: tc.profile}, n))
			for k, v := range tc.labels {
				require.Equal(t, v, n.Labels[k], "label %s", k)
			}
			if tc.policy {
				require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: tc.profile, Name: config.DefaultOwnerPolicyName},
					&istiosecurityv1.AuthorizationPolicy{}))
			}
		})
	}
}

// A CRD installed after the controller started is watched from then on, without a restart: with
// the Gateway API installed later, a waypoint deleted by someone is made again at once, through
// the watch (the wait requeue is set far beyond the test). An API server of its own, since it
// installs CRDs; and not in parallel, since it shortens laterWatchInterval, which every manager's
// setup reads.
func TestACRDInstalledLaterIsWatchedWithoutARestart(t *testing.T) {
	env := envtest.StartFresh(t, envtest.GatewayAPI)
	laterWatchInterval = 200 * time.Millisecond
	t.Cleanup(func() { laterWatchInterval = 30 * time.Second })
	cfg := config.Default()
	require.NoError(t, cfg.Validate())
	ctx := startManager(t, env.Config, ctrl.Options{}, cfg, func(r *Reconciler) reconcile.Reconciler {
		r.Runner.WaitRequeue = time.Hour
		return r
	})
	createProfile(t, env.Client, "gina", "gina@example.com")

	env.InstallCRDs(t, envtest.GatewayAPI)
	gw := &gatewayv1.Gateway{}
	key := client.ObjectKey{Namespace: "gina", Name: "waypoint"}
	require.Eventually(t, func() bool { return env.Client.Get(ctx, key, gw) == nil },
		60*time.Second, 200*time.Millisecond, "the waypoint is made once the Gateway API is served")

	require.NoError(t, env.Client.Delete(ctx, gw))
	require.Eventually(t, func() bool {
		again := &gatewayv1.Gateway{}
		return env.Client.Get(ctx, key, again) == nil && again.UID != gw.UID
	}, 10*time.Second, 100*time.Millisecond, "a deleted waypoint is made again through the watch")
}
