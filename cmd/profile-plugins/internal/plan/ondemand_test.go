package plan

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// With provision onDemand, plan says which namespaces are idle and which waypoints would start.
func TestPlanSaysWaypointIdleOrStarting(t *testing.T) {
	env := envtest.Start(t)
	body := "mesh: {waypoint: {provision: onDemand}}\n"
	fixture.Platform(t, env.Client, fixture.Config(t, body))
	path := writeConfig(t, body)
	createProfile(t, env.Client, "quiet")
	createProfile(t, env.Client, "busy")
	require.NoError(t, env.Client.Create(context.Background(), &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "notebook-x1", Namespace: "busy",
			Labels: map[string]string{discoveryv1.LabelServiceName: "notebook", discoveryv1.LabelManagedBy: plugin.EndpointSliceController}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.7"},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "busy", Name: "notebook-0"}}},
	}))
	out, code := planOutput(t, env.Base, options{configPath: path, profiles: []string{"busy", "quiet"}, output: "text"})
	require.NotEqual(t, exitError, code, out)
	quiet := out[strings.Index(out, "namespace quiet"):]
	busy := out[strings.Index(out, "namespace busy"):strings.Index(out, "namespace quiet")]
	assert.Contains(t, quiet, "notes:\n    - waypoint: "+waypoint.Idle)
	assert.NotContains(t, quiet, "Gateway/waypoint")
	assert.Contains(t, busy, waypoint.Starting)
	assert.Contains(t, busy, "Gateway")
}
