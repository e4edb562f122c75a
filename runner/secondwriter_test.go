package runner_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestALabelWithASecondWriterIsReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The profiles controller's namespace-labels.yaml (kubeflow-pss overlay) wrote enforce first.
	require.NoError(t, e.Apply(context.Background(), corev1ac.Namespace(ns).WithLabels(map[string]string{
		"pod-security.kubernetes.io/enforce": "baseline", "pipelines.kubeflow.org/enabled": "true",
	}), client.FieldOwner("profiles-controller")))
	// The same value: both managers keep owning it, so revoking would leave it behind.
	pss := &testPlugin{name: "pss", labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}
	mesh := &testPlugin{name: "mesh", labels: map[string]string{"istio-injection": "enabled"}}
	r := newRunner(t, e, pss, mesh)

	res := r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	require.Len(t, res.Plugins[0].Warnings, 1)
	assert.Contains(t, res.Plugins[0].Warnings[0], `plugin pss: namespace label pod-security.kubernetes.io/enforce is also written by field manager "profiles-controller"`)
	assert.Empty(t, res.Plugins[1].Warnings, "a label only the plugin writes is not reported")

	// Still two writers on the next reconcile; the plugin's own earlier write is no second writer.
	res = r.Apply(context.Background(), testProfile())
	require.NoError(t, res.Err())
	assert.Len(t, res.Plugins[0].Warnings, 1)
	assert.Empty(t, res.Plugins[1].Warnings)

	// Revoke: the plugin lets go, the other writer's claim keeps the label, as the warning said.
	require.NoError(t, r.Revoke(context.Background(), testProfile()).Err())
	assert.Equal(t, "baseline", e.namespace(t).Labels["pod-security.kubernetes.io/enforce"])
	assert.NotContains(t, e.namespace(t).Labels, "istio-injection")
	for _, w := range res.Warnings() {
		assert.False(t, strings.Contains(w, "profile-plugins/"), "a plugin's own manager is never named: %s", w)
	}
}
