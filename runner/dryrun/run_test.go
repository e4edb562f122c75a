package dryrun_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/runner/dryrun"
)

// configMapPlugin wants one ConfigMap, "settings", in the namespace.
type configMapPlugin struct{}

func (configMapPlugin) Name() string { return "cm" }
func (configMapPlugin) Kinds() []client.ObjectList {
	return []client.ObjectList{&corev1.ConfigMapList{}}
}
func (configMapPlugin) Generate(t plugin.Target) (plugin.Desired, error) {
	return plugin.Desired{Objects: []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: "settings"}}}}, nil
}

// countingReader stands for the runner's cache and counts the reads that go through it.
type countingReader struct {
	client.Reader
	reads int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.reads++
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.reads++
	return r.Reader.List(ctx, list, opts...)
}

func profileRunner(t *testing.T) (*runner.Runner, *profilev1.Profile, client.Client) {
	t.Helper()
	profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "team", UID: "uid"}, Spec: profilev1.ProfileSpec{Owner: rbacv1.Subject{Kind: "User", Name: "alice@example.com"}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Annotations: map[string]string{"owner": "alice@example.com"}}}
	c := fakeWithScheme(runner.NewScheme(), ns)
	return &runner.Runner{Client: c, Plugins: []plugin.Plugin{configMapPlugin{}}}, profile, c
}

// Apply returns the runner's Result with the writes the run would make, and persists none.
func TestApplyListsTheRunsWritesAndPersistsNone(t *testing.T) {
	ctx := context.Background()
	r, profile, c := profileRunner(t)

	res, writes := dryrun.Apply(ctx, r, profile)
	require.NotNil(t, res)
	require.NoError(t, res.Err())
	var created []string
	for _, w := range writes {
		if w.GVK.Kind == "ConfigMap" {
			created = append(created, w.Verb+" "+w.Namespace+"/"+w.Name+" by "+w.Plugin)
		}
	}
	assert.Equal(t, []string{"apply team/settings by cm"}, created)
	err := c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "settings"}, &corev1.ConfigMap{})
	assert.True(t, apierrors.IsNotFound(err), "a dry run persisted the ConfigMap: %v", err)
}

// The dry run reads through the runner's Reader when it has one, and through its Client otherwise.
func TestApplyReadsThroughTheRunnersReader(t *testing.T) {
	r, profile, c := profileRunner(t)
	cache := &countingReader{Reader: c}
	r.Reader = cache

	_, writes := dryrun.Apply(context.Background(), r, profile)
	assert.NotEmpty(t, writes)
	assert.Positive(t, cache.reads, "the run read past the runner's Reader")
}

// Revoke takes back what an Apply made; on a namespace where nothing was made it writes no object
// and persists nothing.
func TestRevokeOfANamespaceWithNothingMadeWritesNoObject(t *testing.T) {
	r, profile, c := profileRunner(t)
	cache := &countingReader{Reader: c}
	r.Reader = cache

	res, writes := dryrun.Revoke(context.Background(), r, profile)
	require.NotNil(t, res)
	require.NoError(t, res.Err())
	for _, w := range writes {
		assert.NotEqual(t, "ConfigMap", w.GVK.Kind, "revoke wrote %s %s", w.Verb, w.Name)
	}
	assert.Positive(t, cache.reads, "the revoke read past the runner's Reader")
}
