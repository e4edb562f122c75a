package platform_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/platform"
)

// An entry of guard.meshServiceAccounts that no live pod runs as is reported: mesh.revision set
// to a revision tag makes the default istiod-<tag>, which no istiod runs as, and the guard would
// refuse the real istiod every write to a waypoint (review admin5, A5-4). The entry istiod runs as
// is not reported, nor anything in mode none, where the guard has no waypoint checks.
func TestCheckReportsMeshServiceAccountsNoPodRunsAs(t *testing.T) {
	t.Parallel()
	env := envtest.StartNamed(t, ownNamespaces)
	c, ctx := env.Client, context.Background()
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}))
	fixture.Ensure(t, c, fixture.MeshPod("istio-system", "istiod-1-30-3-7c9d", "istiod-1-30-3", nil))
	// A finished pod of the tag's name runs nothing.
	done := fixture.MeshPod("istio-system", "istiod-prod-stable-done", "istiod-prod-stable", nil)
	fixture.Ensure(t, c, done)
	done.Status.Phase = corev1.PodSucceeded
	require.NoError(t, c.Status().Update(ctx, done))
	notRunning := func(mode config.MeshMode, revision string, accounts ...string) []platform.Finding {
		t.Helper()
		cfg := config.Default()
		cfg.Mesh.Mode, cfg.Mesh.Revision, cfg.Guard.MeshServiceAccounts = mode, revision, accounts
		cfg.SetDefaults()
		require.NoError(t, cfg.Validate())
		report, err := platform.Check(ctx, c, cfg)
		require.NoError(t, err)
		var out []platform.Finding
		for _, f := range ofNamespaces(report.Findings, "istio-system", "cert-manager") {
			if f.Kind == platform.FindingMeshServiceAccountNotRunning {
				out = append(out, f)
			}
		}
		return out
	}

	got := notRunning(config.ModeAmbient, "prod-stable")
	require.Len(t, got, 1, "the default for a tag, istio-system/istiod-prod-stable")
	assert.Equal(t, "istio-system", got[0].Namespace)
	assert.Contains(t, got[0].Problem, "istio-system/istiod-prod-stable (guard.meshServiceAccounts[0])")
	assert.Contains(t, got[0].Problem, "writes to waypoints will be refused")
	assert.Contains(t, got[0].Fix, "A revision tag is not a revision")
	assert.Len(t, notRunning(config.ModeSidecar, "prod-stable"), 1, "sidecar mode too")

	assert.Empty(t, notRunning(config.ModeAmbient, "1-30-3"), "the revision istiod runs")
	got = notRunning(config.ModeAmbient, "prod-stable", "istio-system/istiod-1-30-3", "cert-manager/istio-csr")
	require.Len(t, got, 1, "each entry on its own")
	assert.Contains(t, got[0].Problem, "cert-manager/istio-csr (guard.meshServiceAccounts[1])")
	assert.Empty(t, notRunning(config.ModeNone, "prod-stable"))
}
