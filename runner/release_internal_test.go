package runner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// releaseDeleting runs releaseProtection on one ConfigMap of plugin p that is being deleted and
// keeps plugin.ProtectionFinalizer, with no pods observed: the call did not list them. listErr,
// when set, fails every List of pods.
func releaseDeleting(t *testing.T, listErr error) (PluginResult, client.Client) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "cm", Finalizers: []string{plugin.ProtectionFinalizer},
		DeletionTimestamp: &metav1.Time{Time: time.Now()},
		Labels:            map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "p"}}}
	c := fake.NewClientBuilder().WithScheme(NewScheme()).WithObjects(cm).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, pods := list.(*corev1.PodList); pods && listErr != nil {
				return listErr
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	cur := &corev1.ConfigMap{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(cm), cur))
	cur.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	r := &Runner{Client: c}
	p := &planned{plugin: &testPluginInternal{name: "p"}, res: &PluginResult{Plugin: "p"}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	r.releaseProtection(context.Background(), ns, []*planned{p}, plugin.Observed{Objects: []client.Object{cur}}, "")
	return *p.res, c
}

// Without the call's pods, releaseProtection lists them before it lets a deleting object go; when
// that list fails, the object keeps its finalizer and the plugin reports why.
func TestReleaseProtectionListsThePodsTheCallDidNotList(t *testing.T) {
	t.Parallel()
	key := client.ObjectKey{Namespace: "team", Name: "cm"}

	res, c := releaseDeleting(t, nil)
	assert.Empty(t, res.Errors)
	err := c.Get(context.Background(), key, &corev1.ConfigMap{})
	assert.True(t, apierrors.IsNotFound(err), "no pod depends on it: the finalizer goes and the deletion completes (got %v)", err)

	res, c = releaseDeleting(t, errors.New("list refused"))
	require.Len(t, res.Errors, 1)
	assert.Contains(t, res.Errors[0].Error(), "keeps its finalizer")
	assert.Contains(t, res.Errors[0].Error(), "list refused")
	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(context.Background(), key, cm))
	assert.Equal(t, []string{plugin.ProtectionFinalizer}, cm.Finalizers)
}
