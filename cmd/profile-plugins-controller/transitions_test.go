package main

// Data-plane transitions (mode switches) on a real API server with the real Istio and Gateway API
// CRDs; runner/transitions_test.go plays the security review's (branch attack) on the fake client.

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
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// anyAllowForSidecars reports whether some ALLOW policy in ns applies to sidecar-injected pods:
// sidecars ignore policies with targetRefs, and with no ALLOW policy at all a pod allows everyone.
func anyAllowForSidecars(t *testing.T, c client.Client, ns string) (bool, []string) {
	t.Helper()
	list := &istiosecurityv1.AuthorizationPolicyList{}
	require.NoError(t, c.List(context.Background(), list, client.InNamespace(ns)))
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
		if len(p.Spec.TargetRefs) == 0 && p.Spec.Selector == nil && p.Spec.Action == securityv1beta1.AuthorizationPolicy_ALLOW {
			return true, names
		}
	}
	return false, names
}

// A switch to sidecar mode keeps a pod without a sidecar inside ambient (and its ztunnel policy)
// until the pod is gone, and says it waits; then ambient goes.
func TestSwitchToSidecarKeepsAmbientWhileAPodLacksASidecar(t *testing.T) {
	t.Parallel()
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

// FINDING (fail-open, careless admin): switching a sidecar namespace to ambient while another
// writer holds the ztunnel policy's name (here an AUDIT policy someone made by hand under that
// name earlier) leaves the namespace open for as long as the conflict lasts: the owner policy is
// attached to the waypoint, so the injected pods that still run have no ALLOW policy, and
// istio-injection=disabled is set without dataplane-mode=ambient, so new pods get no data plane.
func TestSidecarToAmbientWithAForeignZtunnelNameKeepsTheNamespaceClosed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeSidecar)
	c := h.env.Client
	const ns = "sid"
	createProfile(t, c, ns, "sid@example.com")
	h.reconcile(ns)
	require.Equal(t, "enabled", h.labels(ns)["istio-injection"])
	ok, names := anyAllowForSidecars(t, c, ns)
	require.True(t, ok, "in sidecar mode the owner policy protects the pods (%v)", names)

	require.NoError(t, c.Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns, Annotations: map[string]string{"sidecar.istio.io/status": `{"containers":["istio-proxy"]}`}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}, {Name: "istio-proxy", Image: "proxyv2"}}},
	}))
	audit := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ns-owner-access-istio-ztunnel", Namespace: ns}}
	audit.Spec.Action = securityv1beta1.AuthorizationPolicy_AUDIT
	require.NoError(t, c.Create(context.Background(), audit, client.FieldOwner("admin")))

	h.configure(config.ModeAmbient)
	_, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ns}})
	require.NoError(t, err, "a conflict is reported in the status")
	labels := h.labels(ns)
	if labels["istio.io/dataplane-mode"] != "ambient" {
		assert.NotEqual(t, "disabled", labels["istio-injection"], "new pods run in no data plane (labels %v)", labels)
	}
	ok, names = anyAllowForSidecars(t, c, ns)
	assert.True(t, ok, "the running injected pod has no ALLOW policy left: it allows every caller (policies %v)", names)
}
