package plugin_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

func TestLookupFindsTheObjectOfThatTypeAndName(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "waypoint"}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "waypoint"}}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other"}}
	obs := plugin.Observed{Objects: []client.Object{sa, other, cm}}

	got, ok := plugin.Lookup[*corev1.ConfigMap](obs, "waypoint")
	assert.True(t, ok)
	assert.Same(t, cm, got, "the ConfigMap, not the ServiceAccount of the same name")

	_, ok = plugin.Lookup[*corev1.ConfigMap](obs, "missing")
	assert.False(t, ok)
	none, ok := plugin.Lookup[*corev1.Secret](obs, "waypoint")
	assert.False(t, ok)
	assert.Nil(t, none, "the zero value when nothing matches")
}

func TestIsManagedByNeedsBothLabels(t *testing.T) {
	both := map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "authz"}
	assert.True(t, plugin.IsManagedBy(both, "authz"))
	assert.False(t, plugin.IsManagedBy(both, "waypoint"), "another plugin's object")
	assert.False(t, plugin.IsManagedBy(map[string]string{plugin.PluginLabel: "authz"}, "authz"), "no managed-by label")
	assert.False(t, plugin.IsManagedBy(map[string]string{plugin.ManagedByLabel: "helm", plugin.PluginLabel: "authz"}, "authz"),
		"managed by someone else")
	assert.False(t, plugin.IsManagedBy(map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue}, "authz"), "no plugin label")
}

func TestFieldManagerIsThePrefixAndThePluginName(t *testing.T) {
	assert.Equal(t, "profile-plugins/pss", plugin.FieldManager("pss"))
	assert.Equal(t, plugin.FieldManagerPrefix+"authz", plugin.FieldManager("authz"))
}

func TestRefStringNamesGroupKindAndName(t *testing.T) {
	policy := plugin.Ref{GroupKind: schema.GroupKind{Group: "security.istio.io", Kind: "AuthorizationPolicy"}, Name: "ns-owner-access-istio"}
	assert.Equal(t, "AuthorizationPolicy.security.istio.io/ns-owner-access-istio", policy.String())
	cm := plugin.Ref{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, Name: "x"}
	assert.Equal(t, "ConfigMap/x", cm.String(), "the core group has no suffix")
}
