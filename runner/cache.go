package runner

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"istio.io/api/label"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// CacheByObject is what a manager's cache should hold of the kinds the plugins read, for
// cache.Options.ByObject: ConfigMaps only when they carry the plugins' label ([ManagedSelector]),
// so the controller does not cache every ConfigMap of every user namespace, and of those only
// what [TrimConfigMap] keeps, so that the ConfigMaps a namespace editor labels so cost the
// controller a few hundred bytes each, whatever they hold. The Runner must then have an APIReader
// (a manager's GetAPIReader()): it reads a wanted name the cache does not show from the API
// server, so another writer's ConfigMap is still a conflict, it reads a wanted ConfigMap in full
// there on every Apply (only the waypoint's seccomp patch, with mesh.waypoint.seccompPatch on),
// and it lists pods there, in one namespace and only when a decision needs them, so no Pod
// informer starts. [WithManager] sets it, and tells the Runner which kinds the cache shows in
// full and which trimmed.
//
// AuthorizationPolicies and RoleBindings are not selected: the access plugin reads other writers'
// (allow-all policies it warns about, kfam's contributor policies and bindings, which kfam marks
// with annotations only). Every RoleBinding of the cluster is cached, but as metadata only (the
// plugin lists them as authz.RoleBindingMetadataList, a controller watches them with
// builder.OnlyMetadata) and of that only what [TrimRoleBindingMetadata] keeps, so that a Profile
// owner, who may create RoleBindings, cannot fill the controller's memory with annotations and
// managedFields. Gateways could be selected as well, but a ByObject entry makes the
// manager fail to start where the Gateway API CRDs are not installed, and a namespace holds few.
//
// EndpointSlices are cached as [EndpointSliceTransform] keeps them, with the label keys the given
// plugins read (plugin.EndpointObserver's EndpointSliceLabels; the waypoint plugin's include the
// keys of mesh.waypoint.ignoredServices): pass the plugins the Runner runs (profileplugins.New's).
// Given none, it keeps the labels [TrimEndpointSlice] keeps, and [New] refuses a Runner whose
// plugins read a label that the options' transform drops.
//
// A ByObject entry applies to every cached read of that type in the manager: a controller that
// reads other ConfigMaps, or their data, through its cached client must read them with its
// APIReader instead. controller-runtime keys ByObject by group, version and kind, so the
// RoleBinding entry (keyed by a metav1.PartialObjectMetadata of that kind) is also the one of
// typed and unstructured RoleBindings: its transform trims only the metadata-only objects and
// passes typed ones unchanged, so a fork that reads and updates its own bindings through the
// cache still sees them whole. Add no second RoleBinding entry (&rbacv1.RoleBinding{} is the
// same key): only one of them would count.
func CacheByObject(plugins ...plugin.Plugin) map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}:          {Label: ManagedSelector(), Transform: TrimConfigMap},
		&discoveryv1.EndpointSlice{}: {Transform: EndpointSliceTransform(endpointSliceLabelKeys(plugins)...)},
		roleBindingMetadata():        {Transform: TrimRoleBindingMetadata},
	}
}

// roleBindingGVK is the kind of the RoleBindings the access plugin reads as metadata.
var roleBindingGVK = rbacv1.SchemeGroupVersion.WithKind("RoleBinding")

// roleBindingMetadata is the ByObject key of the metadata-only RoleBinding informer.
func roleBindingMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(roleBindingGVK)
	return m
}

// TrimRoleBindingMetadata is the cache transform of [CacheByObject] for the metadata-only
// RoleBindings (a metav1.PartialObjectMetadata of kind RoleBinding) the access plugin and the
// controller's watch read: it keeps of each its name, namespace, UID, resourceVersion, creation
// and deletion times, kfam's annotations as [authz.KeptContributorAnnotations] keeps them (a user
// or role longer than any valid one is cut so that the plugin decides, and reports, as on the
// whole binding), the labels [plugin.ManagedByLabel] and [plugin.PluginLabel] and its controller
// owner reference (each string cut to 253 bytes), which is what the runner tells another writer's
// claim by. managedFields, finalizers, every other label and annotation go, so that a Profile owner
// (kubeflow-admin may create RoleBindings) cannot fill the controller's memory with them. Anything
// else passes unchanged, typed RoleBindings too. Applied again to its result, it changes nothing.
func TrimRoleBindingMetadata(obj any) (any, error) {
	rb, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || rb.GroupVersionKind().GroupKind() != roleBindingGVK.GroupKind() {
		return obj, nil
	}
	md := &rb.ObjectMeta
	return &metav1.PartialObjectMetadata{TypeMeta: rb.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: md.Name, Namespace: md.Namespace, UID: md.UID, ResourceVersion: md.ResourceVersion,
		CreationTimestamp: md.CreationTimestamp, DeletionTimestamp: md.DeletionTimestamp,
		Labels: managedLabels(md.Labels), Annotations: authz.KeptContributorAnnotations(md.Name, md.Annotations),
		OwnerReferences: controllerRef(rb),
	}}, nil
}

// managedLabels is the plugins' two labels of labels, or nil when it has neither.
func managedLabels(labels map[string]string) map[string]string {
	var kept map[string]string
	for _, k := range []string{plugin.ManagedByLabel, plugin.PluginLabel} {
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

// TrimEndpointSlice is the cache transform of [CacheByObject] for EndpointSlices when given no
// plugin: [EndpointSliceTransform] with no keys of its own.
func TrimEndpointSlice(obj any) (any, error) {
	return trimEndpointSlice(obj, nil)
}

// keptEndpointSliceLabels are the labels of an EndpointSlice that EndpointSliceTransform keeps
// whatever the plugins: the two the EndpointSlice controller writes itself, whose Service the slice
// is and who wrote it (plugin.Serving reads that), and the Gateway's name, which istiod puts on a
// waypoint's Service and the waypoint plugin tells its own slices by. So the waypoint plugin reads
// no other label unless mesh.waypoint.ignoredServices selects on one.
var keptEndpointSliceLabels = []string{discoveryv1.LabelServiceName, discoveryv1.LabelManagedBy, label.IoK8sNetworkingGatewayGatewayName.Name}

// EndpointSliceTransform is the cache transform of [CacheByObject] for EndpointSlices, which the
// waypoint plugin reads with mesh.waypoint.provision onDemand (plugin.EndpointObserver): it keeps
// of each its name, namespace, UID, resourceVersion, creation and deletion times, addressType; of
// its labels only discoveryv1.LabelServiceName, discoveryv1.LabelManagedBy,
// gateway.networking.k8s.io/gateway-name and those of keys (what the plugins read); and of its
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
	var keys []string
	for _, p := range plugins {
		if eo, ok := p.(plugin.EndpointObserver); ok && eo.NeedsEndpointSlices() {
			keys = append(keys, eo.EndpointSliceLabels()...)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// maxKept bounds each string TrimConfigMap keeps of a controller reference. The API server sets no
// bound on them, and a real Profile's are far shorter: a name of at most 253 characters and a
// 36-character UID, so cutting longer ones never changes whose object is whose.
const maxKept = 253

// TrimConfigMap is the cache transform (a toolscache.TransformFunc) of [CacheByObject] for
// ConfigMaps: it keeps of each only its name, namespace, UID, resourceVersion, creation and
// deletion times, the labels [plugin.ManagedByLabel] and [plugin.PluginLabel], and its controller
// owner reference (each string cut to 253 bytes); data, binaryData, every other label and
// annotation, finalizers and managedFields go. That is what the runner needs of a ConfigMap it
// does not want (to prune it when it is the plugins' own) and what a controller's Owns needs to
// map it to its Profile; a wanted one it reads in full past the cache. Anything else passes
// unchanged. Applied again to its result, it changes nothing.
func TrimConfigMap(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	md := &cm.ObjectMeta
	kept := &corev1.ConfigMap{TypeMeta: cm.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: md.Name, Namespace: md.Namespace, UID: md.UID, ResourceVersion: md.ResourceVersion, Generation: md.Generation,
		CreationTimestamp: md.CreationTimestamp, DeletionTimestamp: md.DeletionTimestamp,
	}}
	kept.Labels, kept.OwnerReferences = managedLabels(md.Labels), controllerRef(cm)
	return kept, nil
}

// cut is s, cut to maxKept bytes.
func cut(s string) string {
	if len(s) > maxKept {
		return s[:maxKept]
	}
	return s
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
