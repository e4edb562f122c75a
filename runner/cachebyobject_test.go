package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// declaring is a plugin that declares the cache entries by.
type declaring struct {
	name string
	by   map[client.Object]cache.ByObject
}

func (d declaring) Name() string                                    { return d.name }
func (d declaring) Kinds() []client.ObjectList                      { return nil }
func (d declaring) Generate(plugin.Target) (plugin.Desired, error)  { return plugin.Desired{}, nil }
func (d declaring) CacheByObject() map[client.Object]cache.ByObject { return d.by }

// annotating is a transform that adds the annotation key to a ConfigMap, so the order in which
// transforms ran shows.
func annotating(key string) func(any) (any, error) {
	return func(obj any) (any, error) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return obj, nil
		}
		out := cm.DeepCopy()
		out.Annotations = map[string]string{"order": cm.Annotations["order"] + key}
		return out, nil
	}
}

// configMapEntry is the entry CacheByObject made for ConfigMaps, and how many entries it made.
func configMapEntry(t *testing.T, ps ...plugin.Plugin) (cache.ByObject, int) {
	t.Helper()
	var entry *cache.ByObject
	all := runner.CacheByObject(ps...)
	for obj, by := range all {
		if _, ok := obj.(*corev1.ConfigMap); ok {
			require.Nil(t, entry, "one ConfigMap entry")
			entry = &by
		}
	}
	require.NotNil(t, entry)
	return *entry, len(all)
}

// The runner assembles the cache from what its plugins declare: a kind declared by one plugin is
// cached as it says; one declared by several with the same selector keeps it, with different
// selectors none (every object then serves each), and their transforms run one after the other.
func TestCacheByObjectMergesWhatThePluginsDeclare(t *testing.T) {
	assert.Len(t, runner.CacheByObject(), 1, "given no plugin, only the EndpointSlice entry")
	for obj := range runner.CacheByObject() {
		assert.IsType(t, &discoveryv1.EndpointSlice{}, obj)
	}
	managed := plugin.ManagedSelector()
	one := declaring{"one", map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: managed, Transform: annotating("1")}}}
	by, n := configMapEntry(t, one)
	assert.Equal(t, 2, n)
	assert.Equal(t, managed.String(), by.Label.String())

	same := declaring{"same", map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: plugin.ManagedSelector(), Transform: annotating("2")}}}
	by, n = configMapEntry(t, one, same)
	assert.Equal(t, 2, n, "one entry per kind")
	assert.Equal(t, managed.String(), by.Label.String(), "a selector every plugin declares stays")
	out, err := by.Transform(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}})
	require.NoError(t, err)
	assert.Equal(t, "12", out.(*corev1.ConfigMap).Annotations["order"], "the transforms in the plugins' order")

	other := declaring{"other", map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {
		Label: labels.SelectorFromSet(labels.Set{"team": "a"}), Field: fields.OneTermEqualSelector("metadata.name", "cm")}}}
	by, _ = configMapEntry(t, one, other)
	assert.Nil(t, by.Label, "selectors that differ: the cache holds every object")
	assert.Nil(t, by.Field)
	out, err = by.Transform(&corev1.ConfigMap{})
	require.NoError(t, err)
	assert.Equal(t, "1", out.(*corev1.ConfigMap).Annotations["order"], "a plugin without a transform keeps the other's")

	by, _ = configMapEntry(t, other, one)
	assert.Nil(t, by.Label)
	out, err = by.Transform(&corev1.ConfigMap{})
	require.NoError(t, err)
	assert.Equal(t, "1", out.(*corev1.ConfigMap).Annotations["order"], "the transform of a later plugin too")

	spaced := declaring{"spaced", map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: plugin.ManagedSelector(),
		Namespaces: map[string]cache.Config{"kubeflow": {}}}}}
	by, _ = configMapEntry(t, one, spaced)
	assert.Nil(t, by.Namespaces, "namespace configs do not merge: every namespace is cached")
	assert.Equal(t, managed.String(), by.Label.String())

	failing := declaring{"failing", map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Transform: func(any) (any, error) {
		return nil, assert.AnError
	}}}}
	by, _ = configMapEntry(t, failing, one)
	_, err = by.Transform(&corev1.ConfigMap{})
	assert.ErrorIs(t, err, assert.AnError, "a transform's error stops the chain")
}
