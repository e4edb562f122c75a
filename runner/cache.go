package runner

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// CacheByObject is what a manager's cache should hold of the kinds the given plugins read, for
// cache.Options.ByObject: what each plugin declares (plugin.CacheDeclarer; this module's access
// plugin caches RoleBindings as trimmed metadata, its waypoint plugin only its own ConfigMaps,
// trimmed), and EndpointSlices as [EndpointSliceTransform] keeps them, with the label keys the
// plugins read (plugin.EndpointObserver's EndpointSliceLabels). Pass the plugins the Runner runs
// (profileplugins.New's). Entries of several plugins for one kind are merged: a label or field
// selector only when every one agrees (otherwise the cache holds every object, which serves
// each), transforms one after the other. Given no plugin, it holds only the EndpointSlice entry,
// which keeps the labels [TrimEndpointSlice] keeps, and [New] refuses a Runner whose plugins read
// a label that the options' transform drops.
//
// A kind the cache selects or trims is read past it: the Runner must then have an APIReader (a
// manager's GetAPIReader()), which reads a wanted name the cache does not show from the API server,
// so another writer's object is still a conflict, and a wanted object the cache trims in full on
// every Apply. It lists pods there too, in one namespace and only when a decision needs them, so
// no Pod informer starts. [WithManager] sets it, and tells the Runner which kinds the cache shows
// in full and which trimmed.
//
// A ByObject entry applies to every cached read of that type in the manager: a controller that
// reads other objects of a selected kind, or their trimmed content, through its cached client
// must read them with its APIReader instead. controller-runtime keys ByObject by group, version
// and kind, so a typed and a metadata-only prototype of one kind are the same key: declare a kind
// in one form only.
func CacheByObject(plugins ...plugin.Plugin) map[client.Object]cache.ByObject {
	out := map[client.Object]cache.ByObject{}
	keys := map[string]client.Object{}
	add := func(obj client.Object, by cache.ByObject) {
		k := fmt.Sprintf("%T/%s", obj, obj.GetObjectKind().GroupVersionKind())
		first, seen := keys[k]
		if !seen {
			keys[k], out[obj] = obj, by
			return
		}
		out[first] = mergeByObject(out[first], by)
	}
	add(&discoveryv1.EndpointSlice{}, cache.ByObject{Transform: EndpointSliceTransform(cachedEndpointSliceLabelKeys(plugins)...)})
	for _, p := range plugins {
		cd, ok := p.(plugin.CacheDeclarer)
		if !ok {
			continue
		}
		decl := cd.CacheByObject()
		// In a stable order, so that the merged transforms run in one order whatever the map's.
		objs := slices.SortedFunc(maps.Keys(decl), func(a, b client.Object) int {
			return strings.Compare(fmt.Sprintf("%T/%s", a, a.GetObjectKind().GroupVersionKind()), fmt.Sprintf("%T/%s", b, b.GetObjectKind().GroupVersionKind()))
		})
		for _, obj := range objs {
			add(obj, decl[obj])
		}
	}
	return out
}

// mergeByObject is one ByObject that serves what a and b, two plugins' entries for one kind, do:
// a selector when both have the same one, none otherwise; a's transform, then b's.
func mergeByObject(a, b cache.ByObject) cache.ByObject {
	out := a
	if !sameSelector(a.Label, b.Label) {
		out.Label = nil
	}
	if !sameSelector(a.Field, b.Field) {
		out.Field = nil
	}
	if len(a.Namespaces) > 0 || len(b.Namespaces) > 0 {
		out.Namespaces = nil // per-namespace configs do not merge: cache every namespace
	}
	switch {
	case a.Transform == nil:
		out.Transform = b.Transform
	case b.Transform != nil:
		first, second := a.Transform, b.Transform
		out.Transform = func(obj any) (any, error) {
			mid, err := first(obj)
			if err != nil {
				return nil, err
			}
			return second(mid)
		}
	}
	return out
}

// sameSelector says whether two label or field selectors select the same objects, as far as
// their string forms tell; nil and an empty one both select everything.
func sameSelector(a, b interface{ String() string }) bool {
	str := func(s interface{ String() string }) string {
		if s == nil || reflect.ValueOf(s).IsNil() {
			return ""
		}
		return s.String()
	}
	return str(a) == str(b)
}

// TrimEndpointSlice is the cache transform of [CacheByObject] for EndpointSlices when given no
// plugin: [EndpointSliceTransform] with no keys of its own.
func TrimEndpointSlice(obj any) (any, error) {
	return trimEndpointSlice(obj, nil)
}

// keptEndpointSliceLabels are the labels of an EndpointSlice that EndpointSliceTransform keeps
// whatever the plugins: the two the EndpointSlice controller writes itself, whose Service the slice
// is and who wrote it (plugin.Serving reads that). Any other label is kept only when a plugin
// reads it (EndpointObserver's EndpointSliceLabels).
var keptEndpointSliceLabels = []string{discoveryv1.LabelServiceName, discoveryv1.LabelManagedBy}

// EndpointSliceTransform is the cache transform of [CacheByObject] for EndpointSlices, which the
// runner lists for the plugins that decide on them (plugin.EndpointObserver): it keeps
// of each its name, namespace, UID, resourceVersion, creation and deletion times, addressType; of
// its labels only discoveryv1.LabelServiceName, discoveryv1.LabelManagedBy and those of keys
// (what the plugins read); and of its
// endpoints one, emptied but for a targetRef of kind Pod in the slice's namespace, when
// plugin.Serving says the slice serves. That is all the decision needs. Every other label goes:
// the EndpointSlice controller copies a Service's labels onto its slices, a namespace member writes
// those, and the controller caches every slice of the cluster, so hundreds of KB of them per
// Service would grow it. So do addresses, ports, topology, annotations and managedFields, so that a
// slice of a thousand pods costs the controller what one of a single pod does. Anything else
// passes unchanged; applied again to its result, it changes nothing. An informer for EndpointSlices
// starts only when a runner lists them, so an install without onDemand caches none.
func EndpointSliceTransform(keys ...string) func(any) (any, error) {
	keep := slices.Clone(keys)
	return func(obj any) (any, error) { return trimEndpointSlice(obj, keep) }
}

// trimEndpointSlice is EndpointSliceTransform(keys...) applied to obj.
func trimEndpointSlice(obj any, keys []string) (any, error) {
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	md := &es.ObjectMeta
	kept := &discoveryv1.EndpointSlice{TypeMeta: es.TypeMeta, AddressType: es.AddressType, ObjectMeta: metav1.ObjectMeta{
		Name: md.Name, Namespace: md.Namespace, UID: md.UID, ResourceVersion: md.ResourceVersion,
		CreationTimestamp: md.CreationTimestamp, DeletionTimestamp: md.DeletionTimestamp,
		Labels: endpointSliceLabels(md.Labels, keys),
	}}
	if plugin.Serving(es) {
		kept.Endpoints = []discoveryv1.Endpoint{{TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: md.Namespace}}}
	}
	return kept, nil
}

// endpointSliceLabels is labels' values of the keys keptEndpointSliceLabels and keys, or nil when
// it has none of them.
func endpointSliceLabels(labels map[string]string, keys []string) map[string]string {
	var kept map[string]string
	for _, k := range slices.Concat(keptEndpointSliceLabels, keys) {
		if v, ok := labels[k]; ok {
			if kept == nil {
				kept = make(map[string]string, 2)
			}
			kept[k] = v
		}
	}
	return kept
}

// endpointSliceLabelKeys is every label key of an EndpointSlice that the plugins which read
// EndpointSlices read (plugin.EndpointObserver), sorted and without duplicates.
func endpointSliceLabelKeys(plugins []plugin.Plugin) []string {
	return labelKeys(plugins, true)
}

// cachedEndpointSliceLabelKeys is every label key of an EndpointSlice that an EndpointObserver
// among plugins may read, whether it reads slices in its configuration or not: the cache keeps
// them all, so that the options of a plugin set fit every configuration of it.
func cachedEndpointSliceLabelKeys(plugins []plugin.Plugin) []string {
	return labelKeys(plugins, false)
}

// labelKeys is the EndpointSliceLabels of the EndpointObservers among plugins (only of those
// that read slices when reading), sorted and without duplicates.
func labelKeys(plugins []plugin.Plugin, reading bool) []string {
	var keys []string
	for _, p := range plugins {
		if eo, ok := p.(plugin.EndpointObserver); ok && (!reading || eo.NeedsEndpointSlices()) {
			keys = append(keys, eo.EndpointSliceLabels()...)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// CacheOptions are the manager cache options the given plugins need, for ctrl.Options.Cache:
// ByObject is [CacheByObject] of the same plugins. Pass the same value to [WithManager].
func CacheOptions(plugins ...plugin.Plugin) cache.Options {
	return cache.Options{ByObject: CacheByObject(plugins...)}
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
		r.Trimmed = trimmed(r, opts)
		if err := keepsEndpointSliceLabels(r, opts); err != nil {
			r.optionErr = errors.Join(r.optionErr, err)
		}
	}
}

// keepsEndpointSliceLabels says, as an error, which EndpointSlice label a plugin of r reads that
// the transform of a cache built from opts drops: the plugin would decide on a slice without it
// (a Service of mesh.waypoint.ignoredServices counted as activity, or one that a NotIn selector
// should count not counted). It tries the transform on a slice carrying every such label.
func keepsEndpointSliceLabels(r *Runner, opts cache.Options) error {
	keys := endpointSliceLabelKeys(r.Plugins)
	transform := opts.DefaultTransform
	for obj, by := range opts.ByObject {
		if _, ok := obj.(*discoveryv1.EndpointSlice); ok && by.Transform != nil {
			transform = by.Transform
		}
	}
	if transform == nil || len(keys) == 0 {
		return nil
	}
	probe := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{}}}
	for _, k := range keys {
		probe.Labels[k] = "probe"
	}
	out, err := transform(probe)
	if err != nil {
		return fmt.Errorf("cache options: the EndpointSlice transform: %w", err)
	}
	kept, _ := out.(*discoveryv1.EndpointSlice)
	for _, k := range keys {
		if kept == nil || kept.Labels[k] != "probe" {
			return fmt.Errorf("cache options: the EndpointSlice transform drops label %q, which the plugins read "+
				"(mesh.waypoint.ignoredServices selects on it, or the waypoint tells its own Service by it): "+
				"build the options with CacheOptions or CacheByObject given the plugins", k)
		}
	}
	return nil
}

// trimmed is the kinds of r's plugins whose objects a cache built from opts transforms: those with
// a Transform in ByObject (also for some namespaces only), or all of them with a DefaultTransform
// (such as cache.TransformStripManagedFields, whose objects the drift checks could not judge). A
// transform may drop anything, so the runner reads what it wants of those kinds in full.
func trimmed(r *Runner, opts cache.Options) []schema.GroupKind {
	all := opts.DefaultTransform != nil
	for _, c := range opts.DefaultNamespaces {
		all = all || c.Transform != nil
	}
	s := r.Client.Scheme()
	transformed := map[schema.GroupKind]bool{}
	for obj, by := range opts.ByObject {
		t := by.Transform != nil
		for _, c := range by.Namespaces {
			t = t || c.Transform != nil
		}
		if !t {
			continue
		}
		gvk, err := apiutil.GVKForObject(obj, s)
		if err != nil {
			all = true // a kind opts may transform is unknown: read every wanted object in full
			continue
		}
		transformed[gvk.GroupKind()] = true
	}
	var out []schema.GroupKind
	for _, p := range r.Plugins {
		for _, list := range p.Kinds() {
			gvk, err := apiutil.GVKForObject(list, s)
			if err != nil {
				continue // observe reports it
			}
			gk := schema.GroupKind{Group: gvk.Group, Kind: strings.TrimSuffix(gvk.Kind, "List")}
			if (all || transformed[gk]) && !slices.Contains(out, gk) {
				out = append(out, gk)
			}
		}
	}
	return out
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
