package runner

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// CacheByObject is what a manager's cache should hold of the kinds the plugins read, for
// cache.Options.ByObject: ConfigMaps only when the plugins made them ([ManagedSelector]),
// so the controller does not cache every ConfigMap of every user namespace. The Runner must then
// have an APIReader (a manager's GetAPIReader()): it reads a wanted name the cache does not show
// from the API server, so another writer's ConfigMap is still a conflict, and it lists pods there,
// in one namespace and only when a decision needs them, so no Pod informer starts. [WithManager]
// sets it, and tells the Runner which kinds the cache shows in full.
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
		&corev1.ConfigMap{}: {Label: ManagedSelector()},
	}
}

// CacheOptions are the manager cache options the plugins need, for ctrl.Options.Cache:
// ByObject is [CacheByObject]. Pass the same value to [WithManager].
func CacheOptions() cache.Options {
	return cache.Options{ByObject: CacheByObject()}
}

// Option configures a Runner when [New] builds it.
type Option func(*Runner)

// WithManager makes the runner, which reads through mgr's cached client (Runner.Reader nil or
// mgr.GetClient()), read past that cache as opts, the manager's ctrl.Options.Cache, requires: its
// APIReader is mgr.GetAPIReader(), and its FullyCached the kinds of its plugins that opts caches
// without a selector. Only a wanted object of a kind opts selects is then read from the API server
// when the cache does not show it; of the others the cache shows every object, so a missing one is
// missing. Options that select by default (DefaultLabelSelector, DefaultFieldSelector,
// DefaultNamespaces) leave no kind fully cached, and every missing wanted object is read.
func WithManager(mgr manager.Manager, opts cache.Options) Option {
	return func(r *Runner) {
		r.APIReader = mgr.GetAPIReader()
		r.FullyCached = fullyCached(r, opts)
	}
}

// fullyCached is the kinds of r's plugins that a cache built from opts shows in full, or nil when
// that cannot be told.
func fullyCached(r *Runner, opts cache.Options) []schema.GroupKind {
	if selects(opts.DefaultLabelSelector, opts.DefaultFieldSelector) || len(opts.DefaultNamespaces) > 0 {
		return nil
	}
	s := r.Client.Scheme()
	selected := map[schema.GroupKind]bool{}
	for obj, by := range opts.ByObject {
		gvk, err := apiutil.GVKForObject(obj, s)
		if err != nil {
			return nil // a kind opts may select is unknown: read every missing object
		}
		if selects(by.Label, by.Field) || len(by.Namespaces) > 0 {
			selected[gvk.GroupKind()] = true
		}
	}
	var out []schema.GroupKind
	for _, p := range r.Plugins {
		for _, list := range p.Kinds() {
			gvk, err := apiutil.GVKForObject(list, s)
			if err != nil {
				return nil
			}
			gk := schema.GroupKind{Group: gvk.Group, Kind: strings.TrimSuffix(gvk.Kind, "List")}
			if !selected[gk] && !slices.Contains(out, gk) {
				out = append(out, gk)
			}
		}
	}
	return out
}

// selects says whether a label or field selector leaves objects out.
func selects(l labels.Selector, f fields.Selector) bool {
	return (l != nil && !l.Empty()) || (f != nil && !f.Empty())
}
