package platform_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/platform"
)

// programmedAfter is the plugins' waypoint in ns, made at t0 and Programmed took later.
func programmedAfter(cfg *config.Config, ns string, took time.Duration) *gatewayv1.Gateway {
	gw := fixture.ProgrammedGateway(cfg, ns)
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	gw.CreationTimestamp = metav1.NewTime(t0)
	for i := range gw.Status.Conditions {
		gw.Status.Conditions[i].LastTransitionTime = metav1.NewTime(t0.Add(took))
	}
	return gw
}

func TestCheckReportsAnIdleAfterShorterThanAWaypointsStart(t *testing.T) {
	t.Parallel()
	cfg := fixture.Config(t, "mesh: {waypoint: {provision: onDemand, idleAfter: 2m}}\n")
	c := healthyPlatform(t, cfg, ingressPod(t, cfg, "10.42.0.9"), programmedAfter(cfg, "fast", 20*time.Second), programmedAfter(cfg, "slow", 3*time.Minute))
	report, err := platform.Check(context.Background(), c, cfg)
	require.NoError(t, err)
	require.Len(t, report.Findings, 1)
	f := report.Findings[0]
	assert.Equal(t, platform.FindingIdleAfterShorterThanStart, f.Kind)
	assert.Equal(t, "slow", f.Namespace)
	assert.Contains(t, f.Problem, "mesh.waypoint.idleAfter is 2m0s, but the waypoint of namespace slow took 3m0s")

	cfg.Mesh.Waypoint.IdleAfter = &metav1.Duration{Duration: 30 * time.Minute}
	report, err = platform.Check(context.Background(), c, cfg)
	require.NoError(t, err)
	assert.Empty(t, report.Findings, "30m outlasts a 3m start")

	always := fixture.Config(t, "mesh: {waypoint: {idleAfter: 1m}}\n")
	report, err = platform.Check(context.Background(), c, always)
	require.NoError(t, err)
	assert.Empty(t, report.Findings, "with provision always nothing is idle")
}
