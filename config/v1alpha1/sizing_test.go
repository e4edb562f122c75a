package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

func parseWaypoint(t *testing.T, waypoint string) (*config.Config, error) {
	t.Helper()
	return config.Parse([]byte("apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\nmesh:\n  waypoint: " + waypoint + "\n"))
}

// Every sizing that cannot work is refused with the field that makes it so: a request above its
// limit (the API server would refuse the pod), min > max, a budget that blocks every eviction at
// the smallest replica count (a node drain would wait forever), and the rest.
func TestWaypointSizingThatCannotWorkIsRefusedByField(t *testing.T) {
	for name, c := range map[string]struct{ waypoint, field, why string }{
		"request above limit":         {`{resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}}`, "mesh.waypoint.resources.requests.memory", "above its limit"},
		"request above Istio's limit": {`{resources: {requests: {cpu: "3"}}}`, "mesh.waypoint.resources.requests.cpu", "above its limit 2"},
		"negative request":            {`{resources: {requests: {cpu: "-1"}}}`, "mesh.waypoint.resources.requests.cpu", "negative"},
		"min above max":               {`{autoscaling: {minReplicas: 3, maxReplicas: 2}}`, "mesh.waypoint.autoscaling.maxReplicas", "below minReplicas 3"},
		"autoscaling to zero":         {`{autoscaling: {minReplicas: 0, maxReplicas: 2}}`, "mesh.waypoint.autoscaling.minReplicas", "at least 1"},
		"replicas with autoscaling":   {`{replicas: 2, autoscaling: {minReplicas: 2, maxReplicas: 4}}`, "mesh.waypoint.replicas", "HorizontalPodAutoscaler sets the replica count"},
		"zero replicas":               {`{replicas: 0}`, "mesh.waypoint.replicas", "at least 1"},
		"utilization without request": {`{resources: {requests: {cpu: "0"}}, autoscaling: {minReplicas: 1, maxReplicas: 2}}`, "mesh.waypoint.autoscaling.targetCPUUtilizationPercentage", "share of the CPU request"},
		"minAvailable one of one":     {`{podDisruptionBudget: {minAvailable: 1}}`, "mesh.waypoint.podDisruptionBudget.minAvailable", "blocks every eviction"},
		"minAvailable all of two":     {`{replicas: 2, podDisruptionBudget: {minAvailable: 2}}`, "mesh.waypoint.podDisruptionBudget.minAvailable", "blocks every eviction"},
		"minAvailable 60% of two":     {`{replicas: 2, podDisruptionBudget: {minAvailable: "60%"}}`, "mesh.waypoint.podDisruptionBudget.minAvailable", "blocks every eviction"},
		"minAvailable of autoscaled":  {`{autoscaling: {minReplicas: 2, maxReplicas: 5}, podDisruptionBudget: {minAvailable: 2}}`, "mesh.waypoint.podDisruptionBudget.minAvailable", "all 2 pod(s)"},
		"maxUnavailable zero":         {`{replicas: 3, podDisruptionBudget: {maxUnavailable: 0}}`, "mesh.waypoint.podDisruptionBudget.maxUnavailable", "allows no eviction"},
		"maxUnavailable 0%":           {`{replicas: 3, podDisruptionBudget: {maxUnavailable: "0%"}}`, "mesh.waypoint.podDisruptionBudget.maxUnavailable", "allows no eviction"},
		"both bounds":                 {`{replicas: 3, podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}}`, "mesh.waypoint.podDisruptionBudget.maxUnavailable", "not both"},
		"empty budget":                {`{replicas: 3, podDisruptionBudget: {}}`, "mesh.waypoint.podDisruptionBudget", "set minAvailable or maxUnavailable"},
		"override without selector":   {`{sizingOverrides: [{maximum: {replicas: 3}}]}`, "mesh.waypoint.sizingOverrides[0].namespaceSelector", "Required"},
		"override by profile name":    {`{sizingOverrides: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-a}}, maximum: {replicas: 3}}]}`, "mesh.waypoint.sizingOverrides[0].namespaceSelector.matchLabels[kubernetes.io/metadata.name]", "Profile's name"},
		"override negative maximum":   {`{sizingOverrides: [{namespaceSelector: {matchLabels: {tier: gpu}}, maximum: {resources: {cpu: "-1"}}}]}`, "mesh.waypoint.sizingOverrides[0].maximum.resources.cpu", "negative"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseWaypoint(t, c.waypoint)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.field)
			assert.Contains(t, err.Error(), c.why)
		})
	}
}

// What each sizing is allowed to be, at its limits: the budgets that still allow one eviction.
func TestWaypointSizingAtItsLimitsIsAccepted(t *testing.T) {
	for _, w := range []string{
		`{replicas: 2, podDisruptionBudget: {minAvailable: 1}}`,
		`{replicas: 2, podDisruptionBudget: {minAvailable: "50%"}}`,
		`{podDisruptionBudget: {maxUnavailable: 1}}`,
		`{replicas: 3, podDisruptionBudget: {maxUnavailable: "10%"}}`,
		`{autoscaling: {minReplicas: 2, maxReplicas: 2}}`,
		`{resources: {requests: {cpu: "2", memory: 1Gi}}}`,
		`{sizingOverrides: [{namespaceSelector: {matchLabels: {tier: gpu}}, maximum: {replicas: 3, resources: {cpu: "1", memory: 2Gi}}}]}`,
		// Zero is no negative quantity, and the smallest target and budget are allowed.
		`{resources: {requests: {memory: "0"}}}`,
		`{resources: {requests: {cpu: 100m}}, autoscaling: {minReplicas: 1, maxReplicas: 2, targetCPUUtilizationPercentage: 1}}`,
		`{replicas: 2, podDisruptionBudget: {minAvailable: 0}}`,
		`{sizingOverrides: [{namespaceSelector: {matchLabels: {tier: gpu}}, maximum: {replicas: 0, resources: {cpu: "0"}}}]}`,
	} {
		_, err := parseWaypoint(t, w)
		assert.NoError(t, err, w)
	}
}

// The defaults: Istio's own resources for every value left out, one replica without a budget (a
// budget on one pod either blocks every drain or does nothing), and from two pods on a budget
// that lets one go at a time.
func TestWaypointSizingDefaults(t *testing.T) {
	def := config.Default().Mesh.Waypoint
	assert.Equal(t, config.IstioWaypointResources(), *def.Resources)
	assert.Equal(t, int32(1), *def.Replicas)
	assert.Nil(t, def.PodDisruptionBudget)
	assert.Nil(t, def.Autoscaling)

	cfg, err := parseWaypoint(t, `{resources: {requests: {memory: 64Mi}}, replicas: 2}`)
	require.NoError(t, err)
	w := cfg.Mesh.Waypoint
	assert.Equal(t, resource.MustParse("64Mi"), w.Resources.Requests[corev1.ResourceMemory], "the admin's value stays")
	assert.Equal(t, resource.MustParse("100m"), w.Resources.Requests[corev1.ResourceCPU], "what the admin left out is Istio's default")
	assert.Equal(t, resource.MustParse("1Gi"), w.Resources.Limits[corev1.ResourceMemory])
	one := intstr.FromInt32(1)
	assert.Equal(t, &config.WaypointDisruptionBudget{MaxUnavailable: &one}, w.PodDisruptionBudget)

	cfg, err = parseWaypoint(t, `{autoscaling: {minReplicas: 1, maxReplicas: 3}}`)
	require.NoError(t, err)
	w = cfg.Mesh.Waypoint
	assert.Nil(t, w.Replicas, "the autoscaler owns the count")
	assert.Equal(t, int32(config.DefaultTargetCPUUtilization), w.Autoscaling.TargetCPUUtilizationPercentage)
	assert.Nil(t, w.PodDisruptionBudget, "autoscaling down to one pod gets no default budget")
	assert.Equal(t, int32(3), w.MaxReplicas())
}
