package clutter_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/internal/bench/clutter"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// TestObjectsAreForeignAndRealistic checks the counts the issue asks for, that nothing carries the
// plugins' managed-by label (so no plugin may touch them), and that Pods are full-sized.
func TestObjectsAreForeignAndRealistic(t *testing.T) {
	objs := clutter.Objects("team-a", "alice@example.com")
	require.Len(t, objs, clutter.PerNamespace)
	kinds := map[string]int{}
	contributors := 0
	for _, o := range objs {
		assert.Equal(t, "team-a", o.GetNamespace())
		assert.Empty(t, o.GetLabels()[plugin.ManagedByLabel], o.GetName())
		assert.Empty(t, validation.IsDNS1123Subdomain(strings.ToLower(o.GetName())), o.GetName())
		switch o := o.(type) {
		case *corev1.Pod:
			kinds["Pod"]++
			c := o.Spec.Containers[len(o.Spec.Containers)-1]
			assert.GreaterOrEqual(t, len(c.Env), 8, o.Name)
			assert.NotEmpty(t, c.Resources.Limits, o.Name)
			assert.GreaterOrEqual(t, len(o.Spec.Volumes), 3, o.Name)
		case *corev1.ConfigMap:
			kinds["ConfigMap"]++
			size := 0
			for _, v := range o.Data {
				size += len(v)
			}
			assert.Greater(t, size, 2048, o.Name)
		case *rbacv1.RoleBinding:
			kinds["RoleBinding"]++
			if r := o.Annotations[authz.RoleAnnotation]; r == authz.RoleEdit || r == authz.RoleView {
				contributors++
				assert.Equal(t, authz.ContributorPolicyName(o.Annotations[authz.UserAnnotation], r), o.Name)
			}
		case *corev1.Secret:
			kinds["Secret"]++
		case *corev1.ServiceAccount:
			kinds["ServiceAccount"]++
		case *discoveryv1.EndpointSlice:
			kinds["EndpointSlice"]++
			// Written as the EndpointSlice controller writes it, so onDemand counts it as activity.
			assert.True(t, plugin.Serving(o), o.Name)
		}
	}
	assert.Equal(t, map[string]int{"Pod": clutter.Pods, "ConfigMap": clutter.ConfigMaps, "RoleBinding": clutter.RoleBindings, "Secret": clutter.Secrets, "ServiceAccount": clutter.ServiceAccounts, "EndpointSlice": clutter.EndpointSlices}, kinds)
	assert.Equal(t, 2, contributors)
}
