package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

// istiod's waypoint pod runs its proxy in a container named istio-proxy (files/waypoint.yaml);
// running the real istiod showed every routed namespace a PluginWarning event to restart the
// waypoint's Deployment for ambient. On the API server, with the waypoint's pod as istiod makes it
// and a notebook left from the namespace's sidecar days, only the notebook is named.
func TestWaypointPodIsNoSidecarPodInTheControllersEvents(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	c, ctx := h.env.Client, context.Background()
	const ns = "wanda"
	h.enrol(ns, "wanda@example.com")
	for _, sa := range []string{"default", "waypoint"} {
		require.NoError(t, c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}))
	}
	require.NoError(t, c.Create(ctx, fixture.WaypointPod(config.Default(), ns, "waypoint-6f8d9c7b5-x2k4q")))
	require.NoError(t, c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook-0", Namespace: ns, Annotations: fixture.SidecarPod},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "notebook", Image: "jupyter"}, {Name: "istio-proxy", Image: "proxyv2"}}}}))

	rec := events.NewFakeRecorder(100)
	h.r.Recorder = rec
	h.reconcile(ns)
	var said []string
	for len(rec.Events) > 0 {
		said = append(said, <-rec.Events)
	}
	events := strings.Join(said, "\n")
	assert.Contains(t, events, "1 pod(s) still run an istio-proxy sidecar and join ambient only when restarted")
	assert.Contains(t, events, "notebook-0")
	assert.NotContains(t, events, "waypoint-6f8d9c7b5-x2k4q", "the waypoint's own pod is no sidecar pod, nor outside every data plane")
}
