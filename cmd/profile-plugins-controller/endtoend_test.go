package main

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

func TestEndToEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const ns = "alice"
	createProfile(t, c, ns, "alice@example.com")

	// First reconcile: everything but the waypoint enrolment.
	writes := h.env.Requests.Writes()
	res := h.reconcile(ns)
	assert.Greater(t, h.env.Requests.Writes(), writes, "the counter sees writes")
	assert.Equal(t, runner.DefaultWaitRequeue, res.RequeueAfter, "waiting for the waypoint asks for a requeue")
	labels := h.labels(ns)
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "the ztunnel policy exists, so the namespace is enrolled")
	assert.Equal(t, "disabled", labels["istio-injection"])
	assert.NotContains(t, labels, "istio.io/use-waypoint", "no waypoint label before the waypoint is Programmed")
	assert.Equal(t, "baseline", labels["pod-security.kubernetes.io/enforce"])
	assert.True(t, h.exists(&gatewayv1.Gateway{}, ns, "waypoint"))
	assert.False(t, h.exists(&corev1.ConfigMap{}, ns, "waypoint-seccomp"), "no per-namespace patch by default: the class defaults harden the waypoint")
	assert.True(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio-ztunnel"))
	owner := &istiosecurityv1.AuthorizationPolicy{}
	require.True(t, h.exists(owner, ns, "ns-owner-access-istio"))
	require.Len(t, owner.Spec.TargetRefs, 1)
	require.Len(t, owner.OwnerReferences, 1)
	assert.Equal(t, "Profile", owner.OwnerReferences[0].Kind)
	cond := h.profile(ns).Status.Conditions
	require.Len(t, cond, 1)
	assert.Equal(t, "False", cond[0].Status)
	assert.Contains(t, cond[0].Message, "waiting for waypoint: Gateway alice/waypoint does not exist yet")
	assert.Contains(t, h.profile(ns).Finalizers, Finalizer)
	assert.Equal(t, 1.0, testutil.ToFloat64(h.r.Metrics.waiting))

	// Someone else labels the namespace; the label must survive everything below.
	require.NoError(t, c.Apply(context.Background(), corev1ac.Namespace(ns).WithLabels(map[string]string{"team": "ml"}), client.FieldOwner("kubectl")))

	// istiod programs the waypoint: the namespace now uses it.
	h.programWaypoint(ns)
	res = h.reconcile(ns)
	assert.Zero(t, res.RequeueAfter)
	labels = h.labels(ns)
	assert.Equal(t, "waypoint", labels["istio.io/use-waypoint"])
	assert.Equal(t, "true", labels["istio.io/ingress-use-waypoint"])
	assert.Equal(t, "True", h.profile(ns).Status.Conditions[0].Status)
	assert.Equal(t, 0.0, testutil.ToFloat64(h.r.Metrics.waiting))

	// Nothing changed: the next reconcile sends no write at all.
	before := h.env.Requests.Writes()
	h.reconcile(ns)
	assert.Equal(t, before, h.env.Requests.Writes(), "a reconcile with nothing to do must not write")

	// Switch to sidecar mode: ambient objects and labels go, injection comes.
	h.configure(config.ModeSidecar)
	h.reconcile(ns)
	labels = h.labels(ns)
	assert.Equal(t, "enabled", labels["istio-injection"])
	for _, k := range []string{"istio.io/dataplane-mode", "istio.io/use-waypoint", "istio.io/ingress-use-waypoint"} {
		assert.NotContains(t, labels, k)
	}
	assert.False(t, h.exists(&gatewayv1.Gateway{}, ns, "waypoint"), "waypoint pruned")
	assert.False(t, h.exists(&corev1.ConfigMap{}, ns, "waypoint-seccomp"), "seccomp patch pruned")
	assert.False(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio-ztunnel"), "ztunnel policy pruned")
	require.True(t, h.exists(owner, ns, "ns-owner-access-istio"))
	assert.Empty(t, owner.Spec.TargetRefs, "the sidecar owner policy applies to pods")
	before = h.env.Requests.Writes()
	h.reconcile(ns)
	assert.Equal(t, before, h.env.Requests.Writes(), "sidecar steady state writes nothing")

	// And back to ambient: it converges again, through the same waiting state. Injection and the
	// owner policy on the pods stay until the namespace is observed in ambient with its ztunnel policy.
	h.configure(config.ModeAmbient)
	h.reconcile(ns)
	labels = h.labels(ns)
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"])
	assert.Equal(t, "enabled", labels["istio-injection"])
	require.True(t, h.exists(owner, ns, "ns-owner-access-istio"))
	assert.Empty(t, owner.Spec.TargetRefs, "still on the pods, for those with a sidecar")
	assert.False(t, h.exists(&gatewayv1.Gateway{}, ns, "waypoint"), "no waypoint while the owner policy is not attached to it")
	h.reconcile(ns)
	assert.Equal(t, "disabled", h.labels(ns)["istio-injection"])
	require.True(t, h.exists(owner, ns, "ns-owner-access-istio"))
	assert.NotEmpty(t, owner.Spec.TargetRefs)
	h.reconcile(ns)
	assert.True(t, h.exists(&gatewayv1.Gateway{}, ns, "waypoint"))
	assert.NotContains(t, h.labels(ns), "istio.io/use-waypoint", "a new waypoint starts unprogrammed")
	h.programWaypoint(ns)
	h.reconcile(ns)
	assert.Equal(t, "waypoint", h.labels(ns)["istio.io/use-waypoint"])
	assert.Equal(t, "ml", h.labels(ns)["team"], "a label set by someone else survives")
	before = h.env.Requests.Writes()
	h.reconcile(ns)
	assert.Equal(t, before, h.env.Requests.Writes())

	// Delete the Profile: the finalizer revokes everything the plugins made. The Profile controls
	// the namespace (the controller created it), so garbage collection deletes the namespace next;
	// its Pod Security labels are left for that, so it never admits pods unconstrained meanwhile.
	require.NoError(t, c.Delete(context.Background(), h.profile(ns)))
	h.reconcile(ns)
	labels = h.labels(ns)
	for k := range labels {
		assert.False(t, strings.HasPrefix(k, "istio"), "label %s left after revoke", k)
	}
	assert.Equal(t, "baseline", labels["pod-security.kubernetes.io/enforce"], "left to the namespace's deletion")
	assert.Equal(t, "ml", labels["team"])
	assert.False(t, h.exists(&gatewayv1.Gateway{}, ns, "waypoint"))
	assert.False(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio"))
	assert.False(t, h.exists(&profilev1.Profile{}, "", ns), "finalizer removed, profile gone")
}
