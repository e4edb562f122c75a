package main

// Scenarios from the security review (branch attack) on a real API server with the real Istio and
// Gateway API CRDs; see plugin/hardening_test.go for the same scenarios on the fake client.

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// FINDING (fail-open, namespace editor with ConfigMap rights): a ConfigMap named
// <waypoint>-seccomp made before the plugin's was reported as a conflict, yet the Gateway points
// istiod at it (parametersRef) and the namespace was routed through that waypoint once Programmed.
// Then the routing labels required the plugin's own seccomp ConfigMap. Now the per-namespace patch
// is an opt-in, and with it on the Gateway never names a ConfigMap another writer made: istiod
// does not build the waypoint from it, and the namespace is not routed while it is there.
func TestForeignSeccompConfigMapKeepsTheNamespaceOffTheWaypoint(t *testing.T) {
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

// withPatch switches on the opt-in per-namespace seccomp patch (mesh.waypoint.seccompPatch).
func (h *harness) withPatch() {
	cfg := config.Default()
	cfg.Mesh.Waypoint.SeccompPatch = ptr.To(true)
	require.NoError(h.t, cfg.Validate())
	r, err := newReconciler(h.env.Client, cfg)
	require.NoError(h.t, err)
	r.Metrics = h.r.Metrics
	h.r = r
}

// On a real API server: another writer's istio.io/dry-run "true" on the policies and another
// key in the waypoint's patch ConfigMap are drift, restored in one call with the writer named;
// routing waits for the next call (istiod may still run the changed version), and it is quiet
// after (see plugin/hardening_test.go for the findings).
func TestDryRunAnnotationAndPatchConfigMapKeysAreRestored(t *testing.T) {
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
