package profileplugins

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// CacheByObject is what a manager's cache should hold of the kinds the plugins read, for
// cache.Options.ByObject: ConfigMaps only when the plugins made them ([plugin.ManagedSelector]),
// so the controller does not cache every ConfigMap of every user namespace. The Runner must then
// have an APIReader (a manager's GetAPIReader()): it reads a wanted name the cache does not show
// from the API server, so another writer's ConfigMap is still a conflict, and it lists pods there,
// in one namespace and only when a decision needs them, so no Pod informer starts.
//
// AuthorizationPolicies and RoleBindings are not selected: the access plugin reads other writers'
// (allow-all policies it warns about, kfam's contributor policies and bindings, which kfam marks
// with annotations only). Gateways could be selected as well, but a ByObject entry makes the
// manager fail to start where the Gateway API CRDs are not installed, and a namespace holds few.
//
// A ByObject entry applies to every cached read of that type in the manager: a controller that
// reads other ConfigMaps through its cached client must read them with its APIReader instead.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Label: plugin.ManagedSelector()},
	}
}
