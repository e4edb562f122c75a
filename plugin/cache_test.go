package plugin_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// TrimConfigMap keeps of a ConfigMap what the runner and an Owns watch decide on, and nothing a
// namespace editor could grow: no data, no other label or annotation, one controller reference
// with bounded strings.
func TestTrimConfigMapKeepsOnlyWhatDecidesWhoseItIs(t *testing.T) {
	now := metav1.Now()
	long := strings.Repeat("x", 100_000)
	in := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "waypoint-seccomp", Namespace: "alice", UID: "u-1", ResourceVersion: "42", DeletionTimestamp: &now,
			Labels:      map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "waypoint", "big": "y"},
			Annotations: map[string]string{plugin.DesiredHashAnnotation: "abc", "padding": long},
			Finalizers:  []string{"example.com/" + long},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "ConfigMap", Name: long, UID: "other"},
				{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: "alice", UID: "1111-2222", Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)},
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "editor", Operation: metav1.ManagedFieldsOperationApply}},
		},
		Data:       map[string]string{"deployment": long},
		BinaryData: map[string][]byte{"blob": []byte(long)},
		Immutable:  ptrTo(true),
	}
	out, err := plugin.TrimConfigMap(in.DeepCopy())
	require.NoError(t, err)
	got := out.(*corev1.ConfigMap)
	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "waypoint-seccomp", Namespace: "alice", UID: "u-1", ResourceVersion: "42", DeletionTimestamp: &now,
		Labels: map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "waypoint"},
		OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: "alice", UID: "1111-2222", Controller: ptrTo(true)},
		}}}
	assert.Equal(t, want, got)
	again, err := plugin.TrimConfigMap(got.DeepCopy())
	require.NoError(t, err)
	assert.Equal(t, got, again, "trimming a trimmed ConfigMap changes nothing")

	forged := in.DeepCopy()
	forged.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: long, Name: long, UID: types.UID(long), Controller: ptrTo(true)}}
	out, err = plugin.TrimConfigMap(forged)
	require.NoError(t, err)
	ref := out.(*corev1.ConfigMap).OwnerReferences[0]
	assert.Len(t, ref.Kind+ref.Name+string(ref.UID), 3*253, "a controller reference's strings are cut")

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"a": "b"}}}
	out, err = plugin.TrimConfigMap(pod)
	require.NoError(t, err)
	assert.Same(t, pod, out, "other kinds pass unchanged")
}

func ptrTo[T any](v T) *T { return &v }

// OwnedConfigMaps caches only the ConfigMaps the plugins made, trimmed by TrimConfigMap.
func TestOwnedConfigMapsSelectsThePluginsConfigMapsTrimmed(t *testing.T) {
	decl := plugin.OwnedConfigMaps()
	require.Len(t, decl, 1)
	for obj, by := range decl {
		assert.IsType(t, &corev1.ConfigMap{}, obj)
		assert.True(t, by.Label.Matches(labels.Set{plugin.ManagedByLabel: plugin.ManagedByValue, "other": "x"}))
		assert.False(t, by.Label.Matches(labels.Set{plugin.ManagedByLabel: "someone-else"}))
		assert.False(t, by.Label.Matches(labels.Set{}))
		out, err := by.Transform(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Generation: 4}, Data: map[string]string{"k": "v"}})
		require.NoError(t, err)
		assert.Equal(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Generation: 4}}, out, "TrimConfigMap keeps the generation, not the data")
	}
}
