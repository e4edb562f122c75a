package plugin

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheDeclarer is implemented by plugins that say how a controller's cache should hold a kind
// they emit or read, so that other people's objects of that kind cannot fill the controller's
// memory. runner.CacheByObject assembles the entries of the plugins it is given into
// cache.Options.ByObject; a kind no plugin declares is cached whole. With a Runner.APIReader the
// runner reads a wanted object the cache does not show, or shows trimmed, from the API server, so a
// declaration narrows what the cache holds, never what the plugin decides on. A kind the plugin
// reads from other writers must not be selected (every object of it must be in the cache), and its
// transform must keep what Generate reads.
type CacheDeclarer interface {
	// CacheByObject maps a prototype of each kind (such as &corev1.ConfigMap{}, or a
	// metav1.PartialObjectMetadata with its kind set for a kind listed as metadata) to what the
	// cache holds of it: a label or field selector and a transform (cache.ByObject). Entries of
	// several plugins for one kind are merged: a selector only when all agree, transforms one
	// after the other, so each must pass what it does not trim unchanged.
	CacheByObject() map[client.Object]cache.ByObject
}

// ManagedSelector selects the objects the plugins made ([ManagedByLabel]=[ManagedByValue]), for
// the cache.ByObject label selector of a kind a plugin emits and reads from no other writer: the
// runner reads a wanted object the cache does not show from the API server.
func ManagedSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{ManagedByLabel: ManagedByValue})
}

// OwnedConfigMaps is the cache.ByObject entry of ConfigMaps for a plugin that emits them and
// reads no other writer's: only the plugins' own ([ManagedSelector]), as [TrimConfigMap] keeps them.
func OwnedConfigMaps() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: ManagedSelector(), Transform: TrimConfigMap}}
}

// maxKept bounds each string the trims keep of a controller reference. The API server sets no
// bound on them, and a real Profile's are far shorter: a name of at most 253 characters and a
// 36-character UID, so cutting longer ones never changes whose object is whose.
const maxKept = 253

// TrimConfigMap is the cache transform (a toolscache.TransformFunc) of [OwnedConfigMaps]: it
// keeps of each ConfigMap only its name, namespace, UID, resourceVersion, generation, creation and
// deletion times, the labels [ManagedByLabel] and [PluginLabel], and its controller owner
// reference (each string cut to 253 bytes); data, binaryData, every other label and annotation,
// finalizers and managedFields go. That is what the runner needs of a ConfigMap it does not want
// (to prune it when it is the plugins' own) and what a controller's Owns needs to map it to its
// Profile; a wanted one it reads in full past the cache. Anything else passes unchanged. Applied
// again to its result, it changes nothing.
func TrimConfigMap(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	kept := &corev1.ConfigMap{TypeMeta: cm.TypeMeta, ObjectMeta: OwnershipMeta(cm)}
	kept.Generation = cm.Generation
	return kept, nil
}

// OwnershipMeta is what a cache transform keeps of obj's metadata for the runner to tell whose
// it is: its name, namespace, UID, resourceVersion, creation and deletion times, the labels
// [ManagedByLabel] and [PluginLabel] and its controller owner reference, each string of that cut
// to 253 bytes.
func OwnershipMeta(obj metav1.Object) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		CreationTimestamp: obj.GetCreationTimestamp(), DeletionTimestamp: obj.GetDeletionTimestamp(),
		Labels: managedLabels(obj.GetLabels()), OwnerReferences: controllerRef(obj),
	}
}

// managedLabels is the plugins' two labels of labels, or nil when it has neither.
func managedLabels(labels map[string]string) map[string]string {
	var kept map[string]string
	for _, k := range []string{ManagedByLabel, PluginLabel} {
		if v, ok := labels[k]; ok {
			if kept == nil {
				kept = make(map[string]string, 2)
			}
			kept[k] = v
		}
	}
	return kept
}

// controllerRef is obj's controller owner reference with each string cut to maxKept bytes, or nil.
func controllerRef(obj metav1.Object) []metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return nil
	}
	controller := true
	return []metav1.OwnerReference{{APIVersion: cut(ref.APIVersion), Kind: cut(ref.Kind), Name: cut(ref.Name),
		UID: types.UID(cut(string(ref.UID))), Controller: &controller}}
}

// cut is s, cut to maxKept bytes.
func cut(s string) string { return s[:min(len(s), maxKept)] }
