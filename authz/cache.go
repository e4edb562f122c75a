package authz

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

var _ plugin.CacheDeclarer = (*Plugin)(nil)

// roleBindingGVK is the kind of the RoleBindings the plugin reads as metadata.
var roleBindingGVK = rbacv1.SchemeGroupVersion.WithKind("RoleBinding")

// CacheByObject implements plugin.CacheDeclarer. AuthorizationPolicies are not selected: the
// plugin reads other writers' (allow-all policies it warns about, kfam's contributor policies).
// Neither are RoleBindings (kfam marks its bindings with annotations only, which no selector
// selects), so every RoleBinding of the cluster is cached, but as metadata only (the plugin lists
// them as [RoleBindingMetadataList], a controller watches them with builder.OnlyMetadata) and of
// that only what [TrimRoleBindingMetadata] keeps, so that a Profile owner, who may create
// RoleBindings, cannot fill the controller's memory with annotations and managedFields.
//
// controller-runtime keys ByObject by group, version and kind, so this entry (keyed by a
// metav1.PartialObjectMetadata of that kind) is also the one of typed and unstructured
// RoleBindings: its transform trims only the metadata-only objects and passes typed ones
// unchanged, so a fork that reads and updates its own bindings through the cache still sees them
// whole. Add no second RoleBinding entry (&rbacv1.RoleBinding{} is the same key): only one of
// them would count.
func (p *Plugin) CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{RoleBindingMetadata(): {Transform: TrimRoleBindingMetadata}}
}

// RoleBindingMetadata is the ByObject key of the metadata-only RoleBinding informer.
func RoleBindingMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(roleBindingGVK)
	return m
}

// TrimRoleBindingMetadata is the cache transform of [Plugin.CacheByObject] for the metadata-only
// RoleBindings (a metav1.PartialObjectMetadata of kind RoleBinding) the plugin and the
// controller's watch read: it keeps of each what [plugin.OwnershipMeta] keeps (its name,
// namespace, UID, resourceVersion, creation and deletion times, the labels plugin.ManagedByLabel
// and plugin.PluginLabel and its controller owner reference, each string cut to 253 bytes), which
// is what the runner tells another writer's claim by, and kfam's annotations as
// [KeptContributorAnnotations] keeps them (a user or role longer than any valid one is cut so that
// the plugin decides, and reports, as on the whole binding). managedFields, finalizers, every
// other label and annotation go, so that a Profile owner (kubeflow-admin may create RoleBindings)
// cannot fill the controller's memory with them. Anything else passes unchanged, typed
// RoleBindings too. Applied again to its result, it changes nothing.
func TrimRoleBindingMetadata(obj any) (any, error) {
	rb, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || rb.GroupVersionKind().GroupKind() != roleBindingGVK.GroupKind() {
		return obj, nil
	}
	kept := &metav1.PartialObjectMetadata{TypeMeta: rb.TypeMeta, ObjectMeta: plugin.OwnershipMeta(rb)}
	kept.Annotations = KeptContributorAnnotations(rb.Name, rb.Annotations)
	return kept, nil
}
