package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// A Profile whose Waypoint entry is refused (replicas, where the admin's waypoints autoscale) is
// reconciled as any other, with the admin's sizing: routed through its waypoint while active, the
// condition naming the refused field, and once idle requeued for mesh.waypoint.idleAfter with no
// error, so the waypoint and its routing go at the deadline; a terminal error would keep them
// until some unrelated event.
func TestRefusedWaypointEntryStillGoesIdleOnTime(t *testing.T) {
	t.Parallel()
	const ns, owner, idleAfter = "refused-entry", "rita@example.com", 2 * time.Second
	h := newHarness(t, "ambient")
	h.useConfig(fixture.Config(t, `mesh: {waypoint: {provision: onDemand, idleAfter: 2s, autoscaling: {minReplicas: 1, maxReplicas: 2},
  sizingOverrides: [{namespaceSelector: {matchLabels: {tier: large}}, maximum: {replicas: 3}}]}}
`))
	c, ctx := h.env.Client, context.Background()
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"tier": "large"}, Annotations: ownedNamespace(ns, owner).Annotations}}))
	require.NoError(t, c.Create(ctx, &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: profilev1.ProfileSpec{Owner: fixture.User(owner), Plugins: []profilev1.Plugin{{
			TypeMeta: metav1.TypeMeta{Kind: waypoint.ProfileKind}, Spec: &runtime.RawExtension{Raw: []byte(`{"replicas":3}`)}}}}}))
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "notebook-x1", Namespace: ns,
		// As the EndpointSlice controller writes it: only such a slice counts as activity.
		Labels: map[string]string{discoveryv1.LabelServiceName: "notebook", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "notebook-0"}}}}
	require.NoError(t, c.Create(ctx, slice))
	reconcile := func() (ctrl.Result, error) {
		return h.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: ns}})
	}
	condition := func() string { return profileCondition(h.profile(ns)).Message }

	// Active: the Gateway is made (a wait until istiod programs it), then routed. With nothing
	// left to wait for and no deadline, the refusal is terminal: only an edit of the Profile mends it.
	res, err := reconcile()
	require.NoError(t, err, "a wait comes back whatever the refusal")
	require.Positive(t, res.RequeueAfter)
	h.programWaypoint(ns)
	_, err = reconcile()
	require.ErrorIs(t, err, ctrlreconcile.TerminalError(nil))
	require.Equal(t, "waypoint", h.labels(ns)["istio.io/use-waypoint"], "routed as without the entry")
	assert.Contains(t, condition(), "spec.plugins[0].spec.replicas: 3 refused")
	assert.Contains(t, condition(), "the admin's waypoint sizing applies")

	// The last endpoint goes: inside the window the waypoint stays, and the reconcile comes back
	// at its end by itself.
	require.NoError(t, c.Delete(ctx, slice))
	res, err = reconcile()
	require.NoError(t, err, "the refused entry does not end the idle clock")
	require.Positive(t, res.RequeueAfter, "requeued for the idle deadline")
	assert.LessOrEqual(t, res.RequeueAfter, idleAfter)
	assert.Equal(t, "waypoint", h.labels(ns)["istio.io/use-waypoint"], "inside the window, still routed")
	assert.Contains(t, condition(), waypoint.Idle)
	assert.Contains(t, condition(), "spec.plugins[0].spec.replicas: 3 refused", "still said")

	// The requeue, once due: routing withdrawn (a wait), then the Gateway deleted.
	time.Sleep(res.RequeueAfter)
	res, err = reconcile()
	require.NoError(t, err)
	assert.Positive(t, res.RequeueAfter, "waits to observe the namespace unrouted")
	assert.NotContains(t, h.labels(ns), "istio.io/use-waypoint")
	_, err = reconcile()
	assert.ErrorIs(t, err, ctrlreconcile.TerminalError(nil), "idle without a waypoint: no deadline left")
	assert.False(t, h.exists(&gatewayv1.Gateway{}, ns, "waypoint"), "idle past idleAfter: the waypoint is gone")
	assert.Equal(t, "ambient", h.labels(ns)["istio.io/dataplane-mode"], "idle, still enrolled")
}
