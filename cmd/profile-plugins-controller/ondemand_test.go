package main

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// With provision onDemand the controller watches EndpointSlices: an idle Profile's condition says
// so and its namespace has no Gateway; an endpoint appearing (not ready yet) brings the Gateway
// through the watch, well before any requeue would.
func TestOnDemandEndpointSliceWatchActivatesTheWaypoint(t *testing.T) {
	env := envtest.Start(t)
	cfg := fixture.Config(t, "mesh: {waypoint: {provision: onDemand, idleAfter: 1h}}\n")
	ctx := startManager(t, env.Config, ctrl.Options{}, cfg, nil)
	c := env.Client
	const ns = "erin"
	createProfile(t, c, ns, "erin@example.com")
	condition := func() string {
		p := &profilev1.Profile{}
		if c.Get(ctx, client.ObjectKey{Name: ns}, p) != nil {
			return ""
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == runner.ConditionType {
				return cond.Message
			}
		}
		return ""
	}
	require.Eventually(t, func() bool { return strings.Contains(condition(), waypoint.Idle) }, 20*time.Second, 100*time.Millisecond,
		"an idle Profile's condition says waypoint idle since")
	n := &corev1.Namespace{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: ns}, n))
	assert.Equal(t, "ambient", n.Labels["istio.io/dataplane-mode"], "an idle namespace stays enrolled")
	assert.Contains(t, n.Labels, waypoint.IdleSinceLabel)
	assert.Error(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "waypoint"}, &gatewayv1.Gateway{}), "no Gateway while idle")

	require.NoError(t, c.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "notebook-x1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "notebook"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}},
	}))
	require.Eventually(t, func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "waypoint"}, &gatewayv1.Gateway{}) == nil
	}, repairWithin, 50*time.Millisecond, "the EndpointSlice watch makes the Gateway")
	require.Eventually(t, func() bool { return strings.Contains(condition(), waypoint.Starting) }, 10*time.Second, 100*time.Millisecond,
		"the condition says waypoint starting")
}

func TestWaypointMetricsCountActiveAndIdle(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	gatewayRef := plugin.Ref{GroupKind: schema.GroupKind{Group: gatewayv1.GroupName, Kind: "Gateway"}, Name: "waypoint"}
	gw := runner.PluginResult{Plugin: waypoint.PluginName, Unchanged: []plugin.Ref{gatewayRef}}
	idle := runner.PluginResult{Plugin: waypoint.PluginName, Notes: []string{waypoint.Idle + " 2026-12-01T09:00:00Z: ..."}}
	m.observe("a", &runner.Result{Plugins: []runner.PluginResult{gw}})
	m.observe("b", &runner.Result{Plugins: []runner.PluginResult{idle}})
	m.observe("c", &runner.Result{Plugins: []runner.PluginResult{idle}})
	assert.Equal(t, 1.0, testutil.ToFloat64(m.waypoints.WithLabelValues("active")))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.waypoints.WithLabelValues("idle")))
	m.observe("b", &runner.Result{Plugins: []runner.PluginResult{gw}})
	m.forget("c")
	assert.Equal(t, 2.0, testutil.ToFloat64(m.waypoints.WithLabelValues("active")))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.waypoints.WithLabelValues("idle")))
}
