//go:build openfindings

// The open findings of the attack reviews (docs/security/reviews.md, "Second review" and "Third
// review"): each test reproduces one finding on the real API server and fails while it stands.
// `make test-open-findings` runs them; they join `make test` when their finding is fixed.

package integration

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Review "Second review", finding 2 (docs/security/reviews.md; medium with preflight hold; a tenant
// keeps a privilege the admin took away). The admin grants a team namespace privileged through an
// override on their own label (the documented way), the owner asks for it and runs a privileged
// pod. The admin then removes the label: the override no longer matches, the wanted level is
// baseline again. With podSecurity.preflight: hold, pss keeps enforce at privileged while a running
// pod violates baseline (pss/pss.go, preflight): the level it holds is the plugin's own, so
// loosenedBy does not stop it. The pods that keep the hold are the tenant's own, and the level held
// admits new privileged pods, so the tenant keeps privileged for as long as it likes (a
// Deployment's pod is recreated, a new privileged pod is admitted). The hold was meant for pods
// that predate a tightening the admin chose, not for a grant the admin withdrew. FAILS while the
// revoked grant is held.
func TestWithdrawnOverrideNotHeldByTenantPods(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	const ns = "attack-hold"
	r := psRunner(t, c, `  enforce: {level: baseline}
  preflight: hold
  overrides:
  - namespaceSelector: {matchLabels: {example.com/tier: gpu}}
    minimumEnforce: privileged
`)
	p := profileIn(t, c, ns)
	n := &corev1.Namespace{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: ns}, n))
	n.Labels["example.com/tier"] = "gpu"
	require.NoError(t, c.Update(ctx, n), "the admin grants the override")
	askEnforce(t, c, p, "privileged")
	converged(t, r, p)
	require.Equal(t, "privileged", namespaceLabels(t, c, ns)["pod-security.kubernetes.io/enforce"])
	require.NoError(t, c.Create(ctx, boundPod(ns, "tenant-privileged", true)), "the tenant runs a privileged pod")

	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: ns}, n))
	delete(n.Labels, "example.com/tier")
	require.NoError(t, c.Update(ctx, n), "the admin withdraws the override")
	res := r.Apply(ctx, p)
	t.Logf("after the withdrawal: %s; waiting: %v; warnings: %v", res, res.Waiting(), res.Warnings())

	err := c.Create(ctx, boundPod(ns, "tenant-privileged-2", true))
	t.Logf("a new privileged pod after the withdrawal: err=%v", err)
	assert.Equal(t, "baseline", namespaceLabels(t, c, ns)["pod-security.kubernetes.io/enforce"],
		"the withdrawn override is still in force, held by the tenant's own privileged pod")
	assert.Error(t, err, "the API server still admits new privileged pods in the namespace")
}

// Review "Second review", finding 4b (docs/security/reviews.md; low, the tenant decides when its
// own offboarding ends). In the same surviving namespace, Revoke now waits for as long as a pod
// runs there (plugin.AdmissionGuard of pss, and the data-plane hold), and the pods are the
// tenant's: a Deployment recreates them, anyone with kubeflow-edit creates more. The Profile stays
// (its controller's finalizer waits for Revoke), and with it everything the Profile controls, such
// as the profiles controller's namespaceAdmin RoleBinding (SetControllerReference in
// profile_controller.go, updateRoleBinding), which garbage collection deletes only after the
// Profile is gone. So the owner who is being offboarded keeps their access by keeping one pod
// running. FAILS while Revoke waits on the tenant's pods.
func TestRevokeDoesNotWaitOnTenantPods(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "attack-offboard")
	r := runnerFor(t, c, config.ModeAmbient)
	enrolledIn(t, c, r, p)
	tenant := asContributor(t, env, p.Name, "alice@example.com", "namespaceAdmin")
	for i := range 3 {
		require.NoError(t, tenant.Create(ctx, boundPod(p.Name, fmt.Sprintf("keepalive-%d", i), false)))
		res := r.Revoke(ctx, p)
		require.NoError(t, res.Err())
		if i == 0 {
			t.Logf("Revoke waits: %v", res.Waiting())
		}
		// The admin (or the namespace controller) deletes the pod; the tenant has made the next.
		podEnds(t, c, p.Name, fmt.Sprintf("keepalive-%d", i))
		require.NoError(t, tenant.Create(ctx, boundPod(p.Name, fmt.Sprintf("keepalive-%d", i+1), false)))
		res = r.Revoke(ctx, p)
		require.NoError(t, res.Err())
		assert.Empty(t, res.Waiting(), "round %d: Revoke still waits on a pod the tenant made", i)
		podEnds(t, c, p.Name, fmt.Sprintf("keepalive-%d", i+1))
	}
}

// Review "Second review", finding 7 (docs/security/reviews.md; medium, fail-open window; anyone who
// may update Gateways in the namespace, not a Kubeflow tenant by default). istiod renders the
// waypoint Deployment from the Gateway's annotations too: the proxy image comes from
// sidecar.istio.io/proxyImage on the Gateway (istio/istio
// pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go, render: inject.ProxyImage(...,
// mi.Annotations)), and the Gateway's labels and annotations are copied to the waypoint pods. The
// runner restores such a key (every key of Istio's domain is content) and withholds routing for
// that call, "and the next call routes again once the observed state is the restored one (for the
// Gateway, Programmed for the restored generation)" (SECURITY.md, guarantee 10). A metadata change
// does not change a Gateway's generation, so the status istiod wrote before the edit already reads
// as Programmed for the restored generation: the next call, which the restore's own watch event
// starts at once, routes every request through the waypoint again while istiod is still rolling the
// Deployment back from the editor's image. The withdrawal lasts one reconcile, milliseconds. FAILS
// while routing returns with no sign that istiod has rendered the restored Gateway.
func TestMetadataRestoreRoutesAfterIstiod(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "attack-proxy-image")
	r := runnerFor(t, c, config.ModeAmbient)
	require.NoError(t, r.Apply(ctx, p).Err())
	programWaypoint(t, c, p.Name)
	converged(t, r, p)
	require.Equal(t, config.DefaultWaypointName, namespaceLabels(t, c, p.Name)["istio.io/use-waypoint"], "routed before the edit")

	gw := &gatewayv1.Gateway{}
	key := client.ObjectKey{Namespace: p.Name, Name: config.DefaultWaypointName}
	require.NoError(t, c.Get(ctx, key, gw))
	generation, status := gw.Generation, gw.Status.DeepCopy()
	if gw.Annotations == nil {
		gw.Annotations = map[string]string{}
	}
	gw.Annotations["sidecar.istio.io/proxyImage"] = "registry.example.com/evil-proxy:1"
	require.NoError(t, c.Update(ctx, gw, client.FieldOwner("kubectl-edit")))

	res := r.Apply(ctx, p)
	require.NoError(t, res.Err())
	require.NoError(t, c.Get(ctx, key, gw))
	require.NotContains(t, gw.Annotations, "sidecar.istio.io/proxyImage", "restored in the same call")
	require.NotContains(t, namespaceLabels(t, c, p.Name), "istio.io/use-waypoint", "routing withheld for the call that restored")
	require.Equal(t, generation, gw.Generation, "a metadata edit and its restore leave the generation as it was")
	require.Equal(t, status.Conditions, gw.Status.Conditions, "istiod has written nothing since the edit (no istiod here)")

	res = r.Apply(ctx, p)
	require.NoError(t, res.Err())
	assert.NotContains(t, namespaceLabels(t, c, p.Name), "istio.io/use-waypoint",
		"routed again at once, on the status istiod wrote before the edit, while the waypoint may still run the editor's image")
}

// psRunner is a runner in mode "none" (no mesh objects: the tests look at Pod Security alone) with
// the given Pod Security settings.
func psRunner(t *testing.T, c client.Client, body string) *runner.Runner {
	t.Helper()
	cfg := fixture.Config(t, "mesh: {mode: none}\npodSecurity:\n"+body)
	require.NoError(t, cfg.Validate())
	r, err := profileplugins.NewRunner(c, cfg)
	require.NoError(t, err)
	return r
}

// Review R3-1b (docs/security/reviews.md; low, what is left of R3-1). The same pin keeps
// istio.io/use-waypoint=waypoint on the namespace after the switch to sidecar mode, and the runner
// prunes the waypoint: guarantee 1's "use-waypoint names only a waypoint that exists" does not
// hold. Nothing is let in by it: a missing waypoint makes ztunnel send traffic straight to the
// pods, whose sidecars enforce the owner policy, and the pinned istio.io/dataplane-mode keeps the
// ztunnel policy (R3-1's fix). FAILS while the waypoint is pruned under a standing routing label.
func TestPinnedRoutingLabelKeepsWaypoint(t *testing.T) {
	root, p, _ := pinnedThroughASidecarSwitch(t, "pinned-routing")
	if waypoint := namespaceLabels(t, root, p.Name)["istio.io/use-waypoint"]; waypoint != "" {
		assert.True(t, exists(t, root, &gatewayv1.Gateway{}, p.Name, waypoint),
			"istio.io/use-waypoint=%s stands (co-owned by the pinner) and the waypoint was pruned", waypoint)
	}
}
