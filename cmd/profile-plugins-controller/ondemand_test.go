package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

func TestWaypointMetricsCountActiveAndIdle(t *testing.T) {
	t.Parallel()
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
