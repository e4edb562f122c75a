package runner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// A type the scheme does not know has no kind: it is an error every time it is asked for, never
// a cached empty kind.
func TestGVKOfAnUnknownTypeIsAnErrorEveryTime(t *testing.T) {
	t.Parallel()
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

// Metadata-only lists share one Go type across kinds; the kind must come from the object.
func TestGVKOfMetadataListsIsNotCachedByType(t *testing.T) {
	t.Parallel()
	s := runner.NewScheme()
	rb := &metav1.PartialObjectMetadataList{}
	rb.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBindingList"))
	cm := &metav1.PartialObjectMetadataList{}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	for _, l := range []*metav1.PartialObjectMetadataList{rb, cm, rb} {
		got, err := runner.GVKFor(s, l)
		require.NoError(t, err)
		assert.Equal(t, l.GroupVersionKind(), got)
	}
}
