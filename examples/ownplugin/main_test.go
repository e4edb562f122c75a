package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

func alice() *profilev1.Profile {
	return &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "alice", UID: "u-alice"},
		Spec: profilev1.ProfileSpec{Owner: fixture.User("alice@example.com")}}
}

// fakeServer holds alice's namespace, annotated with owner, and objs.
func fakeServer(owner string, objs ...client.Object) client.Client {
	objs = append(objs, fixture.Namespace("alice", owner))
	return fake.NewClientBuilder().WithScheme(runner.NewScheme()).WithReturnManagedFields().WithObjects(objs...).Build()
}

func TestContactWritesItsConfigMapAndThenTheLabel(t *testing.T) {
	ctx := context.Background()
	c := fakeServer("alice@example.com")
	var out bytes.Buffer
	require.NoError(t, run(ctx, c, alice(), &out))

	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "alice", Name: ConfigMapName}, cm))
	assert.Equal(t, map[string]string{"owner": "alice@example.com"}, cm.Data)
	assert.Equal(t, plugin.ManagedByValue, cm.Labels[plugin.ManagedByLabel])
	assert.Equal(t, PluginName, cm.Labels[plugin.PluginLabel])
	ref := metav1.GetControllerOf(cm)
	require.NotNil(t, ref, "the Profile controls what the runner writes, so deleting it deletes them")
	assert.Equal(t, "u-alice", string(ref.UID))

	ns := &corev1.Namespace{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "alice"}, ns))
	assert.Equal(t, "listed", ns.Labels[ListedLabel])
	assert.Equal(t, []string{ListedLabel}, fixture.LabelKeysByManager(t, ns)[plugin.LabelFieldManager], "the runner applies the label under its own field manager")
	assert.Contains(t, out.String(), "first apply: contact: created=1 updated=0 unchanged=0 deleted=0 labels+1-0")
	assert.Contains(t, out.String(), "second apply: contact: created=0 updated=0 unchanged=1 deleted=0 labels+0-0 waiting=0 errors=0 (changed: false)")
}

// Another writer's ConfigMap under the plugin's name is a conflict: the runner leaves it as it is
// and, since the label requires the plugin's own ConfigMap, does not set the label either.
func TestContactLeavesAnotherWritersConfigMap(t *testing.T) {
	ctx := context.Background()
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "alice", Name: ConfigMapName}, Data: map[string]string{"owner": "mallory"}}
	c := fakeServer("alice@example.com", theirs)
	err := run(ctx, c, alice(), &bytes.Buffer{})
	require.ErrorIs(t, err, runner.ErrConflict)
	assert.ErrorContains(t, err, ConfigMapName)

	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "alice", Name: ConfigMapName}, cm))
	assert.Equal(t, map[string]string{"owner": "mallory"}, cm.Data)
	ns := &corev1.Namespace{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "alice"}, ns))
	assert.NotContains(t, ns.Labels, ListedLabel)
}

// The runner writes nothing into a namespace that is not the Profile's.
func TestContactWritesNothingIntoAnotherOwnersNamespace(t *testing.T) {
	ctx := context.Background()
	c := fakeServer("bob@example.com")
	err := run(ctx, c, alice(), &bytes.Buffer{})
	require.ErrorIs(t, err, ownership.ErrNamespaceRefused)

	list := &corev1.ConfigMapList{}
	require.NoError(t, c.List(ctx, list, client.InNamespace("alice")))
	assert.Empty(t, list.Items)
	ns := &corev1.Namespace{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "alice"}, ns))
	assert.Empty(t, ns.Labels)
}

// The plugin's cache declaration keeps a controller's cache to the plugins' own ConfigMaps,
// trimmed: runner.CacheByObject assembles it.
func TestContactCachesOnlyThePluginsConfigMaps(t *testing.T) {
	var found bool
	for obj, by := range runner.CacheByObject(Contact{}) {
		if _, ok := obj.(*corev1.ConfigMap); !ok {
			continue
		}
		found = true
		assert.Equal(t, plugin.ManagedSelector().String(), by.Label.String())
		out, err := by.Transform(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName}, Data: map[string]string{"owner": "x"}})
		require.NoError(t, err)
		assert.Empty(t, out.(*corev1.ConfigMap).Data, "trimmed")
	}
	assert.True(t, found, "a ConfigMap entry")
}
