package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// enrol creates a Profile and reconciles it to its steady state: in ambient, routed through a
// Programmed waypoint.
func (h *harness) enrol(ns, owner string) {
	h.t.Helper()
	createProfile(h.t, h.env.Client, ns, owner)
	h.reconcile(ns)
	h.programWaypoint(ns)
	h.reconcile(ns)
	labels := h.labels(ns)
	require.Equal(h.t, "ambient", labels["istio.io/dataplane-mode"])
	require.Equal(h.t, "waypoint", labels["istio.io/use-waypoint"])
}

// storedAction is the policy's spec.action as the API server stores it.
func (h *harness) storedAction(ns, name string) string {
	h.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("security.istio.io/v1")
	u.SetKind("AuthorizationPolicy")
	require.NoError(h.t, h.env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u))
	action, _, _ := unstructured.NestedString(u.Object, "spec", "action")
	return action
}

// An owner edit that authz refuses (a trailing space) must not unenrol the namespace: its
// policies still stand, so pods stay in ambient and behind the waypoint's owner policy.
func TestInvalidOwnerEditKeepsTheNamespaceEnrolled(t *testing.T) {
	h := newHarness(t, config.ModeAmbient)
	const ns = "safety-owner-edit"
	h.enrol(ns, "olivia@example.com")

	p := h.profile(ns)
	p.Spec.Owner.Name = "olivia@example.com "
	require.NoError(t, h.env.Client.Update(context.Background(), p))
	_, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ns}})
	require.ErrorIs(t, err, reconcile.TerminalError(nil), "an invalid owner is reported, never retried")

	labels := h.labels(ns)
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"])
	assert.Equal(t, "waypoint", labels["istio.io/use-waypoint"])
	assert.Equal(t, "true", labels["istio.io/ingress-use-waypoint"])
	assert.True(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio"))
	assert.True(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, "ns-owner-access-istio-ztunnel"))
	cond := h.profile(ns).Status.Conditions[0]
	assert.Equal(t, "False", cond.Status)
	assert.Contains(t, cond.Message, "spec.owner.name")
}

// Another writer switches the ztunnel policy to AUDIT (istiod would then stop enforcing it at
// ztunnel) or narrows it with a selector through server-side apply. The next reconcile stores
// exactly the desired spec again, action ALLOW included, names the writer, and keeps enrolment
// (routing waits for the call after the restore).
func TestForeignDriftOfTheZtunnelPolicyIsRestored(t *testing.T) {
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const ns = "safety-drift"
	h.enrol(ns, "peggy@example.com")
	const name = "ns-owner-access-istio-ztunnel"
	require.Equal(t, "ALLOW", h.storedAction(ns, name), "the apply body states the action")

	pol := &istiosecurityv1.AuthorizationPolicy{}
	require.True(t, h.exists(pol, ns, name))
	want := pol.Spec.DeepCopy()
	pol.Spec.Action = securityv1beta1.AuthorizationPolicy_AUDIT
	require.NoError(t, c.Update(context.Background(), pol, client.FieldOwner("gitops")))
	require.Equal(t, "AUDIT", h.storedAction(ns, name))

	res := h.r.Runner.Apply(context.Background(), h.profile(ns))
	require.NoError(t, res.Err())
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "was changed by another writer (gitops set spec.action)")
	assert.Equal(t, "ALLOW", h.storedAction(ns, name))
	require.True(t, h.exists(pol, ns, name))
	assert.Equal(t, want.String(), pol.Spec.String())
	assert.Equal(t, "ambient", h.labels(ns)["istio.io/dataplane-mode"])

	// A selector added by server-side apply: apply alone could never remove it.
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "nothing"}}},
	}}
	require.NoError(t, c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("argocd")))
	res = h.r.Runner.Apply(context.Background(), h.profile(ns))
	require.NoError(t, res.Err())
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "argocd set spec.selector")
	require.True(t, h.exists(pol, ns, name))
	assert.Nil(t, pol.Spec.Selector)
	assert.Equal(t, want.String(), pol.Spec.String())

	assert.NotContains(t, h.labels(ns), "istio.io/use-waypoint", "restored in this call: routing waits for the next")

	// Restored once: the next call routes again, quiet after.
	res = h.r.Runner.Apply(context.Background(), h.profile(ns))
	require.NoError(t, res.Err())
	assert.Equal(t, "waypoint", h.labels(ns)["istio.io/use-waypoint"])
	res = h.r.Runner.Apply(context.Background(), h.profile(ns))
	require.NoError(t, res.Err())
	assert.False(t, res.Changed(), res.String())
	assert.Empty(t, res.Warnings())
}

// Revoke while a pod runs in ambient: the routing labels and the owner policy go, but
// dataplane-mode and the ztunnel policy stay, and the finalizer with them, until the pod is gone.
func TestRevokeWithARunningPodKeepsAmbientUntilItIsGone(t *testing.T) {
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
