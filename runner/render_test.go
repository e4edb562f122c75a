package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// A preview in which no plugin sets a label shows the namespace with its name only, no empty
// labels stanza.
func TestRenderWithoutLabels(t *testing.T) {
	r, err := runner.Render(runner.NewScheme(), []plugin.Plugin{&testPlugin{name: "quiet"}}, plugin.Target{Namespace: ns})
	require.NoError(t, err)
	out, err := r.YAML()
	require.NoError(t, err)
	assert.Equal(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: alice\n", string(out))
}
