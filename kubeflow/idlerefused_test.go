package kubeflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/internal/preview"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// onDemandAutoscaled runs waypoints on demand, idle for an hour at most, autoscaled by the admin;
// namespaces labelled tier=large may raise the autoscaler's bounds.
const onDemandAutoscaled = `mesh: {waypoint: {provision: onDemand, idleAfter: 1h, autoscaling: {minReplicas: 1, maxReplicas: 2},
  sizingOverrides: [{namespaceSelector: {matchLabels: {tier: large}}, maximum: {replicas: 3}}]}}
`

// A Profile whose Waypoint entry is refused (replicas, where the admin's waypoints autoscale)
// keeps the admin's sizing and nothing else changes: everything is applied, the condition names
// the refused field, and the idle namespace still comes back at its idleAfter deadline, which no
// event marks, so that the waypoint and the routing go then rather than at some unrelated event.
func TestRefusedWaypointEntryKeepsTheIdleRequeue(t *testing.T) {
	cfg := fixture.Config(t, onDemandAutoscaled)
	slice := preview.ServingEndpointSlice("alice")
	in, c := newIntegrationFor(t, cfg, &slice)
	ctx := context.Background()
	ns := &corev1.Namespace{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "alice"}, ns))
	ns.Labels = map[string]string{"tier": "large"}
	require.NoError(t, c.Update(ctx, ns))
	profile := aliceProfile("alice@example.com")
	profile.Spec.Plugins = []profilev1.Plugin{{Spec: &runtime.RawExtension{Raw: []byte(`{"replicas": 3}`)}}}
	profile.Spec.Plugins[0].Kind = "Waypoint"
	var cond profilev1.ProfileCondition
	var waiting []string
	in.AfterApply = func(_ context.Context, _ client.Object, res *runner.Result) error {
		cond, waiting = kubeflow.Condition(res), res.Waiting()
		return nil
	}
	var err error
	var got time.Duration
	settle := func() {
		for i := 0; i < 5 && (i == 0 || len(waiting) > 0); i++ {
			res, applyErr := in.Apply(ctx, profile)
			got, err = res.RequeueAfter, applyErr
			if i == 1 {
				program(t, c, "alice")
			}
		}
	}
	// Active: the Gateway is made and istiod programs it; then the last endpoint goes.
	settle()
	require.NoError(t, c.Delete(ctx, &slice))
	settle()
	require.Empty(t, waiting, "the namespace settles")
	require.NoError(t, err, "a refused entry is no reason to drop the idle deadline")
	assert.Positive(t, got, "requeued for the idle deadline")
	assert.LessOrEqual(t, got, time.Hour, "no later than mesh.waypoint.idleAfter")
	assert.Equal(t, "False", cond.Status)
	assert.Contains(t, cond.Message, "spec.plugins[0].spec.replicas: 3 refused")
	assert.Contains(t, cond.Message, "the admin's waypoint sizing applies")
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "alice"}, ns))
	assert.Equal(t, "waypoint", ns.Labels["istio.io/use-waypoint"], "routed as usual inside the idle window")
}

// program writes the waypoint's status as istiod does once it runs (fixture.ProgrammedGateway).
func program(t *testing.T, c client.Client, namespace string) {
	t.Helper()
	gw := &gatewayv1.Gateway{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "waypoint"}, gw); err != nil {
		return
	}
	gw.Status = fixture.ProgrammedGateway(profileplugins.DefaultConfig(), namespace).Status
	for i := range gw.Status.Conditions {
		gw.Status.Conditions[i].ObservedGeneration = gw.Generation
	}
	// The fake client serves no status subresource for Gateways: an update writes the status.
	require.NoError(t, c.Update(context.Background(), gw))
}
