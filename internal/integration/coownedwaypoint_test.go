package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
)

// An admin's `istioctl waypoint apply` of the namespace's waypoint (server-side apply, field
// manager istioctl, the manifest istioctl waypoint generate writes) co-owns exactly the fields the
// plugin sets. That is no drift: the runner writes nothing, warns of nothing, and keeps routing.
// Co-owned listener items used to count as another writer's content whenever the apply body was
// known, and a restore cannot take co-ownership away, so every call restored the Gateway and
// withheld istio.io/use-waypoint.
func TestTheSameWaypointAppliedByIstioctlIsNoDriftOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "istioctl-waypoint")
	r := runnerFor(t, c, config.ModeAmbient)
	require.NoError(t, r.Apply(ctx, p).Err())
	programWaypoint(t, c, p.Name)
	converged(t, r, p)

	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": config.DefaultWaypointName, "namespace": p.Name,
			"labels": map[string]any{"istio.io/waypoint-for": "service"}},
		"spec": map[string]any{"gatewayClassName": "istio-waypoint",
			"listeners": []any{map[string]any{"name": "mesh", "port": int64(15008), "protocol": "HBONE"}}},
	}}
	require.NoError(t, c.Apply(ctx, client.ApplyConfigurationFromUnstructured(gw), client.FieldOwner("istioctl")))

	for call := range 2 {
		writes := env.Requests.Writes()
		res := r.Apply(ctx, p)
		require.NoError(t, res.Err())
		assert.Equal(t, writes, env.Requests.Writes(), "call %d: the co-owned Gateway is as wanted", call)
		assert.Empty(t, res.Warnings(), "call %d", call)
		assert.Equal(t, config.DefaultWaypointName, namespaceLabels(t, c, p.Name)["istio.io/use-waypoint"], "call %d", call)
	}
}
