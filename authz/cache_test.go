package authz_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// TrimRoleBindingMetadata keeps of a metadata-only RoleBinding what the access plugin, the
// controller's watch and the runner read, byte for byte, and nothing a Profile owner (who may
// create RoleBindings) could grow: no other annotation or label, no managedFields or finalizers.
func TestTrimRoleBindingMetadataKeepsOnlyWhatTheAccessPluginReads(t *testing.T) {
	created, deleted := metav1.Unix(1764590400, 0), metav1.Unix(1764594000, 0)
	long := strings.Repeat("x", 200<<10)
	in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "user-carol-example-com-clusterrole-edit", Namespace: "alice", UID: "u-1", ResourceVersion: "42", Generation: 3,
		CreationTimestamp: created, DeletionTimestamp: &deleted, GenerateName: long, Finalizers: []string{"example.com/" + long},
		Labels:      map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "authz", "padding": long[:63]},
		Annotations: map[string]string{"user": "carol@example.com", "role": "edit", "padding": long},
		OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: long, UID: "other"},
			{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: "alice", UID: "1111-2222", Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)},
		},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kfam", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:padding":"` + long + `"}}}`)}},
	}}
	in.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
	out, err := authz.TrimRoleBindingMetadata(in.DeepCopy())
	require.NoError(t, err)
	data, err := json.Marshal(out)
	require.NoError(t, err)
	assert.JSONEq(t, `{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{
		"name":"user-carol-example-com-clusterrole-edit","namespace":"alice","uid":"u-1","resourceVersion":"42",
		"creationTimestamp":"2025-12-01T12:00:00Z","deletionTimestamp":"2025-12-01T13:00:00Z",
		"labels":{"app.kubernetes.io/managed-by":"profile-plugins","profile-plugins.kubeflow-ambient.io/plugin":"authz"},
		"annotations":{"role":"edit","user":"carol@example.com"},
		"ownerReferences":[{"apiVersion":"kubeflow.org/v1","kind":"Profile","name":"alice","uid":"1111-2222","controller":true}]}}`, string(data))
	again, err := authz.TrimRoleBindingMetadata(out)
	require.NoError(t, err)
	assert.Equal(t, out, again, "trimming a trimmed RoleBinding changes nothing")

	bare := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "viewers", Namespace: "alice", UID: "u-2", ResourceVersion: "7",
		Annotations: map[string]string{"padding": long}}}
	bare.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
	out, err = authz.TrimRoleBindingMetadata(bare)
	require.NoError(t, err)
	data, err = json.Marshal(out)
	require.NoError(t, err)
	assert.JSONEq(t, `{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{
		"name":"viewers","namespace":"alice","uid":"u-2","resourceVersion":"7"}}`, string(data),
		"a binding without kfam's annotations keeps none")

	// A fork's controller may read and update its own bindings through the cache: typed ones, and
	// metadata of another kind, pass unchanged.
	typed := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "namespaceAdmin", Annotations: map[string]string{"padding": long}}}
	out, err = authz.TrimRoleBindingMetadata(typed)
	require.NoError(t, err)
	assert.Same(t, typed, out)
	other := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "cm", Annotations: map[string]string{"padding": long}}}
	other.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	out, err = authz.TrimRoleBindingMetadata(other)
	require.NoError(t, err)
	assert.Same(t, other, out)
}

func ptrTo[T any](v T) *T { return &v }

// The plugin declares the metadata-only RoleBinding informer, trimmed, and selects nothing: it
// reads other writers' bindings.
func TestPluginCachesRoleBindingsAsTrimmedMetadata(t *testing.T) {
	decl := authz.New(config.Default()).CacheByObject()
	require.Len(t, decl, 1)
	for obj, by := range decl {
		assert.Equal(t, rbacv1.SchemeGroupVersion.WithKind("RoleBinding"), obj.GetObjectKind().GroupVersionKind())
		assert.IsType(t, &metav1.PartialObjectMetadata{}, obj)
		assert.Nil(t, by.Label)
		assert.Nil(t, by.Field)
		in := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: map[string]string{"padding": "x"}}}
		in.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
		out, err := by.Transform(in)
		require.NoError(t, err)
		assert.Empty(t, out.(*metav1.PartialObjectMetadata).Annotations)
	}
}
