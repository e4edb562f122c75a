package runner_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// A preview in which no plugin sets a label shows the namespace with its name only, no empty
// labels stanza.
func TestRenderWithoutLabels(t *testing.T) {
	t.Parallel()
	r, err := runner.Render(runner.NewScheme(), []plugin.Plugin{&testPlugin{name: "quiet"}}, plugin.Target{Namespace: ns})
	require.NoError(t, err)
	out, err := r.YAML()
	require.NoError(t, err)
	assert.Equal(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: alice\n", string(out))
}

// EncodeYAML leaves out an empty creationTimestamp, also from an unstructured object that states
// one, and status; a set timestamp is kept.
func TestEncodeYAMLDropsTheEmptyCreationTimestamp(t *testing.T) {
	t.Parallel()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "x", "namespace": "alice", "creationTimestamp": nil},
		"status":   map[string]any{"phase": "x"},
	}}
	out, err := runner.EncodeYAML(runner.NewScheme(), u)
	require.NoError(t, err)
	assert.Equal(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: alice\n", string(out))

	stamped := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", CreationTimestamp: metav1.Unix(0, 0).Rfc3339Copy()}}
	out, err = runner.EncodeYAML(runner.NewScheme(), stamped)
	require.NoError(t, err)
	assert.Contains(t, string(out), "creationTimestamp:")
}
