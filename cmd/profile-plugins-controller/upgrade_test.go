package main

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// previousDir is an install before the upgrade: the overlay with an older image tag and the
// per-namespace seccomp patch on.
const previousDir = "cmd/profile-plugins-controller/testdata/deploy/previous"

// applyDeployment applies the build's controller Deployment for real (applyBuild leaves it out).
// No kubelet runs here, so no pod starts: what is checked is the object a rollout would start from.
func applyDeployment(t *testing.T, c client.Client, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	u := find(t, objs, "Deployment", "profile-plugins-controller")
	require.NoError(t, c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner("kubectl"), client.ForceOwnership))
	d := &appsv1.Deployment{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(u), d))
	return d
}

// playIstiod marks the waypoint of ns Programmed, with an address, whenever its generation is not
// yet, until the test ends, as istiod does once the waypoint's pods run.
func playIstiod(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			gw := &gatewayv1.Gateway{}
			if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw) == nil && !programmed(gw) {
				now := metav1.Now()
				gw.Status.Conditions = []metav1.Condition{
					{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: gw.Generation, LastTransitionTime: now},
					{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", ObservedGeneration: gw.Generation, LastTransitionTime: now},
				}
				gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: ptr.To(gatewayv1.IPAddressType), Value: "10.96.10.10"}}
				_ = c.Status().Update(ctx, gw, client.FieldOwner("istiod")) // a conflict is retried next round
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// leaseHolder is who holds the controller's leader-election lease now ("" when released).
func leaseHolder(t *testing.T, c client.Client, ns string) string {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: defaultLeaderElectionID}, l); apierrors.IsNotFound(err) {
		return ""
	} else {
		require.NoError(t, err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// pluginObjects are the names, by kind, of the objects in ns labelled as the plugins'.
func pluginObjects(t *testing.T, c client.Client, ns string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	sel := client.MatchingLabels{plugin.ManagedByLabel: plugin.ManagedByValue}
	ctx := context.Background()
	for kind, l := range map[string]client.ObjectList{"AuthorizationPolicy": &istiosecurityv1.AuthorizationPolicyList{},
		"Gateway": &gatewayv1.GatewayList{}, "ConfigMap": &corev1.ConfigMapList{}} {
		require.NoError(t, c.List(ctx, l, client.InNamespace(ns), sel))
		items, err := metaItems(l)
		require.NoError(t, err)
		for _, o := range items {
			out[kind] = append(out[kind], o.GetName())
		}
	}
	return out
}

// The upgrade of docs/install.md on a real API server, with the controller as the overlay's
// ServiceAccount: an install of an older tag with another PluginConfig (the per-namespace seccomp
// patch) protects a Profile's namespace; then the new overlay is applied server-side over it (a
// new PluginConfig ConfigMap, which the Deployment now mounts, and the new image), the old
// controller stops and releases its lease, the new one takes it at once and converges the
// namespace to the new config (the patch ConfigMap and the Gateway's reference to it gone);
// then the same back (the downgrade of step 4). The namespace never fails open on the way, and
// the plugins leave no object of the other config behind.
func TestUpgradeByApplyingTheNewOverlayNeverFailsOpen(t *testing.T) {
	env := oneAtATime(t, installServer)
	admin := env.Client
	h := &harness{t: t, env: env}
	const ns, owner = "upgrade-hana", "hana@example.com"

	previous, next := kustomize(t, previousDir), kustomize(t, besideDir)
	oldCfg, newCfg := pluginConfig(t, previous), pluginConfig(t, next)
	require.True(t, *oldCfg.Mesh.Waypoint.SeccompPatch, "the previous install has the per-namespace patch")
	require.False(t, *newCfg.Mesh.Waypoint.SeccompPatch)
	sa, saNamespace := overlayServiceAccount(t, next)
	prevSA, _ := overlayServiceAccount(t, previous)
	require.Equal(t, sa, prevSA, "both installs run as the same ServiceAccount")
	as := asServiceAccount(env, sa, &writeCounter{})
	opts := ctrl.Options{HealthProbeBindAddress: "0", LeaderElection: true, LeaderElectionReleaseOnCancel: true,
		LeaderElectionID: defaultLeaderElectionID, LeaderElectionNamespace: saNamespace}

	// Before: the previous install protects the namespace, with the patch.
	applyBuild(t, admin, previous, true)
	before := applyDeployment(t, admin, previous)
	playIstiod(t, admin, ns)
	_, stopOld := runManager(t, as, opts, oldCfg, only(nil, ns))
	createProfile(t, admin, ns, owner)
	withPatch := func(want bool) func() bool {
		return func() bool {
			gw := &gatewayv1.Gateway{}
			if !h.exists(gw, ns, "waypoint") || !programmed(gw) || h.labels(ns)["istio.io/use-waypoint"] != "waypoint" {
				return false
			}
			refs := gw.Spec.Infrastructure != nil && gw.Spec.Infrastructure.ParametersRef != nil
			c := h.profile(ns).Status.Conditions
			return refs == want && h.exists(&corev1.ConfigMap{}, ns, "waypoint-seccomp") == want &&
				len(c) == 1 && c[0].Type == kubeflow.ConditionType && c[0].Status == "True"
		}
	}
	require.Eventually(t, withPatch(true), 30*time.Second, 100*time.Millisecond, "the previous install protects %s, with the patch", ns)
	oldHolder := leaseHolder(t, admin, saNamespace)
	require.NotEmpty(t, oldHolder, "the old controller leads")

	sampled := openness(t, admin, ns, newCfg)

	// 2. The new overlay applied over the old one: the Deployment's pod template changes (so a
	// rollout starts), to the new image and the new PluginConfig ConfigMap.
	applyBuild(t, admin, next, true)
	after := applyDeployment(t, admin, next)
	newCM := find(t, next, "ConfigMap", "profile-plugins-config").GetName()
	oldCM := find(t, previous, "ConfigMap", "profile-plugins-config").GetName()
	require.NotEqual(t, oldCM, newCM, "a changed PluginConfig is a ConfigMap of another name")
	assert.Greater(t, after.Generation, before.Generation, "the pod template changed: a rollout starts")
	assert.Equal(t, newCM, after.Spec.Template.Spec.Volumes[0].ConfigMap.Name, "the new pods read the new PluginConfig")
	assert.Equal(t, "ghcr.io/kubeflow-ambient/profile-plugins-controller:v0.1.0", after.Spec.Template.Spec.Containers[0].Image)
	assert.True(t, h.exists(&corev1.ConfigMap{}, saNamespace, oldCM), "apply does not prune: the old PluginConfig ConfigMap stays (docs/install.md says so)")

	// 3. The old pod stops and releases its lease; the new one leads at once, not after the lease
	// duration, and converges the namespace to the new config.
	stopOld()
	assert.Empty(t, leaseHolder(t, admin, saNamespace), "the old controller released its lease")
	started := time.Now()
	_, stopNew := runManager(t, as, opts, newCfg, only(nil, ns))
	require.Eventually(t, func() bool { h := leaseHolder(t, admin, saNamespace); return h != "" && h != oldHolder },
		10*time.Second, 50*time.Millisecond, "the new controller takes the lease")
	assert.Less(t, time.Since(started), 10*time.Second)
	require.Eventually(t, withPatch(false), 30*time.Second, 100*time.Millisecond, "the new config: no patch ConfigMap, no parametersRef")
	assert.Equal(t, sortedValues(map[string][]string{"AuthorizationPolicy": {newCfg.Authorization.OwnerPolicyName, newCfg.Authorization.ZtunnelPolicyName},
		"Gateway": {"waypoint"}}), sortedValues(pluginObjects(t, admin, ns)), "nothing of the previous config is left")

	// 4. Going back: the previous overlay and controller again.
	applyBuild(t, admin, previous, true)
	back := applyDeployment(t, admin, previous)
	assert.Equal(t, oldCM, back.Spec.Template.Spec.Volumes[0].ConfigMap.Name)
	stopNew()
	_, stopOld = runManager(t, as, opts, oldCfg, only(nil, ns))
	defer stopOld()
	require.Eventually(t, withPatch(true), 30*time.Second, 100*time.Millisecond, "back on the previous config, with the patch")
	assert.Empty(t, sampled(), "the namespace never failed open")
}

// sortedValues sorts each list of m, for comparison; empty lists are dropped.
func sortedValues(m map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range m {
		if len(v) > 0 {
			out[k] = append([]string(nil), v...)
			slices.Sort(out[k])
		}
	}
	return out
}
