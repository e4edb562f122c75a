package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// A type the scheme does not know has no kind: it is an error every time it is asked for, never
// a cached empty kind.
func TestGVKOfAnUnknownTypeIsAnErrorEveryTime(t *testing.T) {
	s := runtime.NewScheme() // knows nothing
	for range 2 {
		_, err := runner.GVKFor(s, &corev1.ConfigMap{})
		require.Error(t, err)
	}
	require.NoError(t, corev1.AddToScheme(s))
	got, err := runner.GVKFor(s, &corev1.ConfigMap{})
	require.NoError(t, err)
	assert.Equal(t, "ConfigMap", got.Kind)
}

// EncodeYAML leaves out an empty creationTimestamp, also from an unstructured object that states
// one, and status; a set timestamp is kept.
func TestEncodeYAMLDropsTheEmptyCreationTimestamp(t *testing.T) {
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
