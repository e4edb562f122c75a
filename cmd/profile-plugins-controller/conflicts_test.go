package main

// Another writer's object under a name the plugins want, on a real API server with the real Istio
// and Gateway API CRDs: it is left alone and reported, and nothing is routed that would depend on
// it. The FINDINGs are from the security review (branch attack); runner/hardening_test.go plays
// them on the fake client.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

func TestForeignObjectWithAManagedNameIsLeftAlone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	c := h.env.Client
	const ns = "bob"
	require.NoError(t, c.Create(context.Background(), ownedNamespace(ns, "bob@example.com")))
	mine := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ns-owner-access-istio", Namespace: ns}}
	mine.Spec.Rules = nil // allow nothing: the user's own choice
	require.NoError(t, c.Create(context.Background(), mine, client.FieldOwner("bob")))
	createProfile(t, c, ns, "bob@example.com")

	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ns}})
	require.NoError(t, err, "a conflict is reported in the status, not retried")
	assert.NotZero(t, res.RequeueAfter)
	got := &istiosecurityv1.AuthorizationPolicy{}
	require.True(t, h.exists(got, ns, "ns-owner-access-istio"))
	assert.Empty(t, got.Labels, "not marked as ours")
	assert.Empty(t, got.Spec.TargetRefs, "not overwritten")
	assert.Empty(t, got.OwnerReferences)
	cond := h.profile(ns).Status.Conditions[0]
	assert.Equal(t, "False", cond.Status)
	assert.Contains(t, cond.Message, "AuthorizationPolicy.security.istio.io/ns-owner-access-istio exists and was made by another writer; it is left alone")
}

// FINDING (fail-open, namespace editor with ConfigMap rights): a ConfigMap named
// <waypoint>-seccomp made before the plugin's was reported as a conflict, yet the Gateway points
// istiod at it (parametersRef) and the namespace was routed through that waypoint once Programmed.
// Then the routing labels required the plugin's own seccomp ConfigMap. Now the per-namespace patch
// is an opt-in, and with it on the Gateway never names a ConfigMap another writer made: istiod
// does not build the waypoint from it, and the namespace is not routed while it is there.
func TestForeignSeccompConfigMapKeepsTheNamespaceOffTheWaypoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	h.withPatch()
	c := h.env.Client
	const ns = "hardening-seccomp"
	require.NoError(t, c.Create(context.Background(), ownedNamespace(ns, "mallory@example.com")))
	require.NoError(t, c.Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "waypoint-seccomp", Namespace: ns},
		Data:       map[string]string{"deployment": "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        image: evil/proxy\n"},
	}, client.FieldOwner("kubectl-create")))
	createProfile(t, c, ns, "mallory@example.com")
	_, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ns}})
	require.NoError(t, err)
	h.programWaypoint(ns)
	_, err = h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ns}})
	require.NoError(t, err)

	gw := &gatewayv1.Gateway{}
	require.True(t, h.exists(gw, ns, "waypoint"))
	assert.Nil(t, gw.Spec.Infrastructure, "the Gateway names the editor's ConfigMap, so istiod builds the waypoint from it")
	labels := h.labels(ns)
	assert.Empty(t, labels["istio.io/use-waypoint"], "the namespace is routed although the ConfigMap the opt-in needs is not the plugin's")
	assert.Empty(t, labels["istio.io/ingress-use-waypoint"])
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"])
}

// The profiles controller's own owner policy (no targetRefs, adoptOwnerPolicy false) is a
// conflict: the plugins leave it alone, make no waypoint for it, and never route the namespace or
// the ingress to a waypoint that would have no owner policy. The ztunnel policy still enrols it.
func TestLegacyOwnerPolicyKeepsTheNamespaceOffTheWaypoint(t *testing.T) {
	t.Parallel()
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
