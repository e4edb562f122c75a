package main

// Another writer changes an object the plugins made, on a real API server: the next call restores
// it and names the writer, and routes through the waypoint again only in the call after (istiod
// may still run the changed version). runner/hardening_test.go has the findings behind them.

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

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

// Another writer switches the ztunnel policy to AUDIT (istiod would then stop enforcing it at
// ztunnel) or narrows it with a selector through server-side apply. The next reconcile stores
// exactly the desired spec again, action ALLOW included, names the writer, and keeps enrolment
// (routing waits for the call after the restore).
func TestForeignDriftOfTheZtunnelPolicyIsRestored(t *testing.T) {
	t.Parallel()
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

// On a real API server: another writer's istio.io/dry-run "true" on the policies and another
// key in the waypoint's patch ConfigMap are drift, restored in one call with the writer named;
// routing waits for the next call (istiod may still run the changed version), and it is quiet
// after (see runner/hardening_test.go for the findings).
func TestDryRunAnnotationAndPatchConfigMapKeysAreRestored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	h.withPatch()
	c := h.env.Client
	const ns = "hardening-drift"
	h.enrol(ns, "oscar@example.com")
	for _, name := range []string{"ns-owner-access-istio-ztunnel", "ns-owner-access-istio"} {
		pol := &istiosecurityv1.AuthorizationPolicy{}
		require.True(t, h.exists(pol, ns, name))
		require.Equal(t, "false", pol.Annotations["istio.io/dry-run"])
		pol.Annotations["istio.io/dry-run"] = "true"
		require.NoError(t, c.Update(context.Background(), pol, client.FieldOwner("gitops")))
	}
	cm := &corev1.ConfigMap{}
	require.True(t, h.exists(cm, ns, "waypoint-seccomp"))
	want := cm.Data
	cm.Data = map[string]string{"deployment": want["deployment"], "serviceAccount": "metadata:\n  annotations: {x: y}\n"}
	require.NoError(t, c.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")))

	res := h.r.Runner.Apply(context.Background(), h.profile(ns))
	require.NoError(t, res.Err())
	warnings := strings.Join(res.Warnings(), "\n")
	for _, name := range []string{"ns-owner-access-istio-ztunnel", "ns-owner-access-istio"} {
		assert.Contains(t, warnings, "AuthorizationPolicy.security.istio.io/"+name+" was changed by another writer (gitops set metadata.annotations.istio.io/dry-run)")
		pol := &istiosecurityv1.AuthorizationPolicy{}
		require.True(t, h.exists(pol, ns, name))
		assert.Equal(t, "false", pol.Annotations["istio.io/dry-run"])
	}
	assert.Contains(t, warnings, "ConfigMap/waypoint-seccomp was changed by another writer (kubectl-edit set data.serviceAccount)")
	require.True(t, h.exists(cm, ns, "waypoint-seccomp"))
	assert.Equal(t, want, cm.Data)
	labels := h.labels(ns)
	assert.NotContains(t, labels, "istio.io/use-waypoint", "restored in this call: not routed until the next")
	assert.NotContains(t, labels, "istio.io/ingress-use-waypoint")
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "the pods stay in ambient")

	res = h.r.Runner.Apply(context.Background(), h.profile(ns))
	require.NoError(t, res.Err())
	assert.Equal(t, "waypoint", h.labels(ns)["istio.io/use-waypoint"], "routed again")
	res = h.r.Runner.Apply(context.Background(), h.profile(ns))
	require.NoError(t, res.Err())
	assert.False(t, res.Changed(), res.String())
	require.Len(t, res.Warnings(), 1, "only the opt-in's own warning is left")
	assert.Contains(t, res.Warnings()[0], "mesh.waypoint.seccompPatch is on")
}
