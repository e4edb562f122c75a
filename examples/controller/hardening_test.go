package main

// Scenarios from the security review (branch attack) on a real API server with the real Istio and
// Gateway API CRDs; see plugin/hardening_test.go for the same scenarios on the fake client.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
)

// FINDING (fail-open, namespace editor with ConfigMap rights): a ConfigMap named
// <waypoint>-seccomp made before the plugin's was reported as a conflict, yet the Gateway points
// istiod at it (parametersRef) and the namespace was routed through that waypoint once Programmed.
// Now the routing labels require the plugin's own seccomp ConfigMap: the namespace stays in
// ambient behind its ztunnel policy and is not routed through the editor's waypoint.
func TestForeignSeccompConfigMapKeepsTheNamespaceOffTheWaypoint(t *testing.T) {
	h := newHarness(t, config.ModeAmbient)
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
	usesForeign := gw.Spec.Infrastructure != nil && gw.Spec.Infrastructure.ParametersRef != nil && gw.Spec.Infrastructure.ParametersRef.Name == "waypoint-seccomp"
	require.True(t, usesForeign, "the scenario: the Gateway names the editor's ConfigMap")
	labels := h.labels(ns)
	assert.Empty(t, labels["istio.io/use-waypoint"], "the namespace is routed through a waypoint patched by a ConfigMap the plugin did not make")
	assert.Empty(t, labels["istio.io/ingress-use-waypoint"])
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"])
}
