package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// handedOver creates ns as an admin would before the Profile exists, handed over by its owner
// annotation, with the ServiceAccount pods need (no controller-manager runs here).
func (h *harness) handedOver(ns, owner string) {
	h.t.Helper()
	c := h.env.Client
	require.NoError(h.t, c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Annotations: map[string]string{ownership.OwnerAnnotation: owner}}}))
	require.NoError(h.t, c.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}))
}

// The profiles controller's own owner policy (no targetRefs, adoptOwnerPolicy false) is a
// conflict: the plugins leave it alone, make no waypoint for it, and never route the namespace or
// the ingress to a waypoint that would have no owner policy. The ztunnel policy still enrols it.
func TestLegacyOwnerPolicyKeepsTheNamespaceOffTheWaypoint(t *testing.T) {
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const ns = "safety-legacy"
	h.handedOver(ns, "lena@example.com")
	legacy := &istiosecurityv1.AuthorizationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "ns-owner-access-istio", Namespace: ns, Annotations: map[string]string{"user": "lena@example.com", "role": "admin"}},
		Spec: securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{
			When: []*securityv1beta1.Condition{{Key: "request.headers[kubeflow-userid]", Values: []string{"lena@example.com"}}},
		}}},
	}
	require.NoError(t, c.Create(context.Background(), legacy, client.FieldOwner("kubeflow-profile-controller")))
	createProfile(t, c, ns, "lena@example.com")

	for range 3 {
		h.reconcile(ns)
	}
	labels := h.labels(ns)
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "the ztunnel policy stands")
	assert.NotContains(t, labels, "istio.io/use-waypoint")
	assert.NotContains(t, labels, "istio.io/ingress-use-waypoint")
	assert.False(t, h.exists(&gatewayv1.Gateway{}, ns, "waypoint"), "no waypoint without its owner policy")
	stored := &istiosecurityv1.AuthorizationPolicy{}
	require.True(t, h.exists(stored, ns, "ns-owner-access-istio"))
	assert.Empty(t, stored.Spec.TargetRefs, "the other writer's policy is left alone")
	assert.NotContains(t, stored.Labels, plugin.ManagedByLabel)
	assert.Contains(t, h.profile(ns).Status.Conditions[0].Message, "ns-owner-access-istio exists and was made by another writer")
}

// A switch to sidecar mode keeps a pod without a sidecar inside ambient (and its ztunnel policy)
// until the pod is gone, and says it waits; then ambient goes.
func TestSwitchToSidecarKeepsAmbientWhileAPodLacksASidecar(t *testing.T) {
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const ns = "safety-switch"
	h.handedOver(ns, "sven@example.com")
	h.enrol(ns, "sven@example.com")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nb", Image: "jupyter"}}}}
	require.NoError(t, c.Create(context.Background(), pod))

	h.configure(config.ModeSidecar)
	res := h.reconcile(ns)
	assert.NotZero(t, res.RequeueAfter, "waits for the pod")
	labels := h.labels(ns)
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "the pod would otherwise be in no data plane")
	assert.NotContains(t, labels, "istio.io/use-waypoint")
	assert.True(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio-ztunnel"))
	assert.Equal(t, "enabled", labels["istio-injection"], "new pods get a sidecar")

	require.NoError(t, c.Delete(context.Background(), pod, client.GracePeriodSeconds(0)))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKeyFromObject(pod), &corev1.Pod{}))
	}, 10*time.Second, 50*time.Millisecond)
	for range 3 {
		h.reconcile(ns)
	}
	labels = h.labels(ns)
	assert.NotContains(t, labels, "istio.io/dataplane-mode")
	assert.False(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio-ztunnel"))
}
