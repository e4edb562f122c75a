package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// Revoke while a pod runs in ambient: the routing labels and the owner policy go, but
// dataplane-mode and the ztunnel policy stay, and the finalizer with them, until the pod is gone.
func TestRevokeWithARunningPodKeepsAmbientUntilItIsGone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const ns = "safety-revoke"
	// The namespace exists before the Profile (handed over by its owner annotation), so the Profile
	// does not control it and garbage collection would not take it along.
	h.handedOver(ns, "rupert@example.com")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nb", Image: "jupyter"}}},
	}
	require.NoError(t, c.Create(context.Background(), pod))
	h.enrol(ns, "rupert@example.com")

	require.NoError(t, c.Delete(context.Background(), h.profile(ns)))
	res := h.reconcile(ns)
	assert.NotZero(t, res.RequeueAfter, "waits for the pod")
	labels := h.labels(ns)
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"])
	assert.NotContains(t, labels, "istio.io/use-waypoint")
	assert.NotContains(t, labels, "istio.io/ingress-use-waypoint")
	assert.True(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio-ztunnel"))
	assert.False(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio"))
	assert.True(t, h.exists(&profilev1.Profile{}, "", ns), "the finalizer stays while the pod runs")

	require.NoError(t, c.Delete(context.Background(), pod, client.GracePeriodSeconds(0)))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKeyFromObject(pod), &corev1.Pod{}))
	}, 10*time.Second, 50*time.Millisecond)
	res = h.reconcile(ns)
	assert.Zero(t, res.RequeueAfter)
	assert.NotContains(t, h.labels(ns), "istio.io/dataplane-mode")
	assert.False(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio-ztunnel"))
	assert.False(t, h.exists(&profilev1.Profile{}, "", ns), "revoke finished")
}
