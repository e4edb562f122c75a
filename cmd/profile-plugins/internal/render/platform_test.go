package render

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
)

func TestMain(m *testing.M) { envtest.Main(m) }

// Issue 15: given a cluster, render prints the platform check's findings on stderr, and the same
// YAML on stdout as without one.
func TestRenderChecksTheGivenCluster(t *testing.T) {
	env := envtest.Start(t)
	kubeconfig := env.Kubeconfig(t)

	var stdout, stderr bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-kubeconfig", kubeconfig}, &stdout, &stderr), stderr.String())
	golden.Assert(t, "render/default.yaml", stdout.Bytes())
	var platform []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(l, "platform: ") {
			platform = append(platform, strings.SplitN(strings.TrimPrefix(l, "platform: "), " (", 2)[0])
		}
	}
	// The platform's findings, then one GuardMissing for each policy of the admission guard.
	assert.Equal(t, append([]string{
		"CallerNamespaceMissing: pipelines-ui", "CallerNamespaceMissing: notebook-controller",
		"CallerNamespaceMissing: katib-controller", "IngressGatewayMissing: ingress-gateway",
		"WaypointCannotStartIfRestricted: waypoint",          // no class defaults yet: a Profile choosing restricted would wait
		"WaypointDefaultDenyMissing: waypoint",               // nor the waypoints' default deny
		"MeshServiceAccountNotRunning: mesh-service-account", // nor istiod
	}, slices.Repeat([]string{"GuardMissing: guard"}, len(guard.Names()))...), platform, "an empty cluster: %s", stderr.String())

	fixture.Platform(t, env.Client, config.Default())
	stdout.Reset()
	stderr.Reset()
	require.NoError(t, run(t.Context(), []string{"-kubeconfig", kubeconfig, "-context", "envtest", "-cluster"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "note: platform check: no findings\n")
	assert.NotContains(t, stderr.String(), "platform: ")
	golden.Assert(t, "render/cluster.yaml", stdout.Bytes())

	err := run(t.Context(), []string{"-kubeconfig", kubeconfig, "-context", "nowhere"}, &stdout, &stderr)
	assert.ErrorContains(t, err, "-kubeconfig "+kubeconfig)
	assert.ErrorContains(t, run(t.Context(), []string{"-context", "envtest"}, &stdout, &stderr), `-context "envtest": needs -kubeconfig`)
}
