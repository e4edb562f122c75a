package runner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/labelowners"
	"github.com/kubeflow-ambient/profile-plugins/internal/ssa"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// This file is the observe phase: what the runner reads of a namespace, through its Reader and
// past it, and whose each object it read is.

// observe reads the namespace and every object of the plugins' kinds in it through the Reader,
// and, without an APIReader, its pods. Labels only claim an object; the Profile as its controller
// proves it: the objects come as disown leaves them, and what only claims to be the plugins' is
// recorded in cl.
func (r *Runner) observe(ctx context.Context, profile *profilev1.Profile, cl claims) (*corev1.Namespace, plugin.Observed, unserved, error) {
	name := profile.Name
	ns := &corev1.Namespace{}
	if err := r.reader().Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, plugin.Observed{}, nil, fmt.Errorf("namespace %q: %w", name, ErrNamespaceNotFound)
		}
		return nil, plugin.Observed{}, nil, fmt.Errorf("reading namespace %q: %w", name, err)
	}
	obs := plugin.Observed{Labels: ns.Labels, LabelManagers: labelowners.Managers(ns), Now: r.now()}
	listed := map[schema.GroupVersionKind]bool{}
	missing := unserved{}
	wantPods := false
	for _, p := range r.Plugins {
		if po, ok := p.(plugin.PodObserver); ok && po.NeedsPods() {
			wantPods = true
		}
		if _, ok := p.(plugin.DataPlane); ok {
			wantPods = true
		}
		for _, l := range p.Kinds() {
			gvk, err := gvkFor(r.Client.Scheme(), l)
			if err != nil {
				return nil, plugin.Observed{}, nil, fmt.Errorf("plugin %s: kind %T: %w", p.Name(), l, err)
			}
			if listed[gvk] {
				continue
			}
			listed[gvk] = true
			itemGVK := gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))
			list := l.DeepCopyObject().(client.ObjectList)
			if err := r.reader().List(ctx, list, client.InNamespace(name)); err != nil {
				// A kind the API server does not serve has no objects (see served.go).
				if notServed(err, r.Client.RESTMapper(), itemGVK) {
					missing[itemGVK] = true
					continue
				}
				return nil, plugin.Observed{}, nil, fmt.Errorf("listing %s in %q: %w", gvk.Kind, name, err)
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return nil, plugin.Observed{}, nil, err
			}
			for _, it := range items {
				obj := it.(client.Object)
				obj.GetObjectKind().SetGroupVersionKind(itemGVK)
				obs.Objects = append(obs.Objects, obj)
			}
		}
	}
	if wantsEndpointSlices(r.Plugins) {
		slices, err := r.listEndpointSlices(ctx, name)
		if err != nil {
			return nil, plugin.Observed{}, nil, err
		}
		obs.EndpointSlices = slices
	}
	if wantPods && r.APIReader == nil {
		// Through the Reader on every call, as before APIReader existed; with an APIReader,
		// generate lists them only when a decision needs them.
		pods, err := r.listPods(ctx, name)
		if err != nil {
			return nil, plugin.Observed{}, nil, err
		}
		obs.Pods = pods
	}
	obs.Objects = disown(profile, obs.Objects, cl)
	return ns, obs, missing, nil
}

// checkProfile is profilev1.Validate as an input error, or nil. Apply asks it when the Profile's
// namespace does not exist: no controller should make one for a Profile without an owner (the
// namespace's owner annotation would be empty, and the admission guard manages only namespaces
// whose annotation is not, guard/guard.go managed), so the Profile waits for an edit, not for
// its namespace. An existing namespace answers through its own annotation instead
// (ownership.Policy.Check), and an owner edited away from an enrolled namespace is the authz
// plugin's input error: the namespace stays protected, the owner's rule goes.
func checkProfile(profile *profilev1.Profile) error {
	errs := profilev1.Validate(profile)
	if len(errs) == 0 {
		return nil
	}
	return inputError{fmt.Errorf("profile %q: %w", profile.Name, errs.ToAggregate())}
}

// findObserved is the observed object of kind gvk named name, or nil.
func findObserved(obs plugin.Observed, gvk schema.GroupVersionKind, name string) client.Object {
	for _, o := range obs.Objects {
		if o.GetName() == name && o.GetObjectKind().GroupVersionKind() == gvk {
			return o
		}
	}
	return nil
}

// refOf names an observed object.
func refOf(obj client.Object) plugin.Ref {
	return plugin.Ref{GroupKind: obj.GetObjectKind().GroupVersionKind().GroupKind(), Name: obj.GetName()}
}

// findObservedRef is the observed object ref names, or nil.
func findObservedRef(obs plugin.Observed, ref plugin.Ref) client.Object {
	for _, o := range obs.Objects {
		if o.GetName() == ref.Name && o.GetObjectKind().GroupVersionKind().GroupKind() == ref.GroupKind {
			return o
		}
	}
	return nil
}

// wantsEndpointSlices says whether a plugin decides on the namespace's EndpointSlices.
func wantsEndpointSlices(plugins []plugin.Plugin) bool {
	for _, p := range plugins {
		if eo, ok := p.(plugin.EndpointObserver); ok && eo.NeedsEndpointSlices() {
			return true
		}
	}
	return false
}

// listEndpointSlices lists the namespace's EndpointSlices through the Reader: a manager's cache
// holds them trimmed (CacheByObject, EndpointSliceTransform), so a reconcile reads none from the API
// server, and what the plugins see of each is what the transform kept.
func (r *Runner) listEndpointSlices(ctx context.Context, name string) ([]discoveryv1.EndpointSlice, error) {
	list := &discoveryv1.EndpointSliceList{}
	if err := r.reader().List(ctx, list, client.InNamespace(name)); err != nil {
		return nil, fmt.Errorf("listing EndpointSlices in %q: %w", name, err)
	}
	return list.Items, nil
}

// now is the runner's clock.
func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// What the runner reads past its Reader (Runner.APIReader), decided and read below. A
// cache of every Pod and ConfigMap in the cluster would cost the controller memory in proportion
// to other people's objects; with an APIReader the runner needs neither.

// reads is what the runner read past its Reader in one call.
type reads struct {
	tried      map[plugin.Ref]bool
	podsListed bool
	// sourcesRelisted: the objects of the kinds plugins only read were read through the APIReader
	// under the names of the contested objects to create (see confirmReadOnly).
	sourcesRelisted bool
	// claims collects what the objects read claim, as observe's objects (see disown).
	claims claims
}

// readObject is one wanted object read from the APIReader: obj is nil when it does not exist.
type readObject struct {
	ref plugin.Ref
	obj client.Object
}

// complete reads through the APIReader what t.Observed may lack and plans need: the namespace's
// pods, once, when a decision needs them, and every wanted object the Reader did not show, or
// showed trimmed (Runner.Trimmed). It reports whether anything was added or replaced.
func (r *Runner) complete(ctx context.Context, read *reads, plans []*planned, t plugin.Target, ns *corev1.Namespace) (plugin.Observed, bool, error) {
	obs := t.Observed
	added := false
	if !read.podsListed && needsPods(r.Plugins, plans, t, ns) {
		read.podsListed = true
		pods, err := r.listPods(ctx, t.Namespace)
		if err != nil {
			return obs, false, err
		}
		if len(pods) > 0 {
			obs.Pods, added = pods, true
		}
	}
	fresh, err := r.readUnseen(ctx, read, plans, t)
	if err != nil {
		return obs, false, err
	}
	if len(fresh) > 0 {
		obs.Objects = withRead(obs.Objects, fresh)
		added = true
	}
	if names := contestedCreates(plans, obs); len(names) > 0 && !read.sourcesRelisted {
		read.sourcesRelisted = true
		confirmed, changed, err := r.confirmReadOnly(ctx, t.Namespace, names, obs.Objects)
		if err != nil {
			return obs, false, err
		}
		if changed {
			obs.Objects, added = disown(t.Profile, confirmed, read.claims), true
		}
	}
	return obs, added, nil
}

// contestedCreates are the names of the objects a plugin that did not fail wants to create and
// another writer may create under the same name (those in Desired.Adopt that obs lacks), such as
// a policy that writer creates right after the object a plugin derives it from (the access
// plugin's contributor policies: package authz).
func contestedCreates(plans []*planned, obs plugin.Observed) []string {
	var names []string
	for _, p := range plans {
		if p.failed {
			continue
		}
		for _, ao := range p.objects {
			if slices.Contains(p.desired.Adopt, ao.ref) && findObserved(obs, ao.gvk, ao.ref.Name) == nil && !slices.Contains(names, ao.ref.Name) {
				names = append(names, ao.ref.Name)
			}
		}
	}
	return names
}

// confirmReadOnly reads, through the APIReader, the object of each kind a plugin only reads
// (listed as metadata) under each of names, and returns objs with what it found in place of what
// the Reader showed (trimmed as the cache trims it), and whether that differs. The decision to
// create a contested object rests on them: a cache that still shows a source another writer has
// just deleted would have the plugin create the object of the same name, which that writer's next
// create of it then meets as AlreadyExists (the access plugin's contributor policies: package
// authz). One read per name and kind, whatever else the namespace holds.
func (r *Runner) confirmReadOnly(ctx context.Context, namespace string, names []string, objs []client.Object) ([]client.Object, bool, error) {
	kinds, err := r.readOnlyKinds()
	if err != nil {
		return objs, false, err
	}
	out := slices.Clone(objs)
	changed := false
	for _, gvk := range kinds {
		for _, name := range names {
			fresh, served, err := r.readMetadata(ctx, gvk, namespace, name)
			if err != nil {
				return objs, false, err
			}
			if !served {
				break
			}
			i := slices.IndexFunc(out, func(o client.Object) bool {
				return o.GetName() == name && o.GetObjectKind().GroupVersionKind() == gvk
			})
			switch {
			case i < 0 && fresh != nil:
				out, changed = append(out, fresh), true
			case i >= 0 && fresh == nil:
				out, changed = slices.Delete(out, i, i+1), true
			case i >= 0 && versionKey(out[i]) != versionKey(fresh):
				out[i], changed = fresh, true
			}
		}
	}
	return out, changed, nil
}

// readMetadata reads the metadata of the object of gvk named name through the APIReader, trimmed
// as the cache trims it (CacheByObject of r's plugins): nil when there is none, and served false when the API
// server does not serve the kind.
func (r *Runner) readMetadata(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (client.Object, bool, error) {
	cur := &metav1.PartialObjectMetadata{}
	cur.SetGroupVersionKind(gvk)
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cur)
	switch {
	case meta.IsNoMatchError(err):
		return nil, false, nil
	case apierrors.IsNotFound(err):
		return nil, true, nil
	case err != nil:
		return nil, true, fmt.Errorf("reading %s %s in %q: %w", gvk.Kind, name, namespace, err)
	}
	cur.SetGroupVersionKind(gvk)
	trim := r.cacheTransform(gvk)
	if trim == nil {
		return cur, true, nil
	}
	t, err := trim(cur)
	if err != nil {
		return nil, true, fmt.Errorf("trimming %s %s in %q: %w", gvk.Kind, name, namespace, err)
	}
	if to, ok := t.(client.Object); ok {
		return to, true, nil
	}
	return cur, true, nil
}

// readOnlyKinds are the kinds the plugins only read (Kinds lists them as metadata), sorted.
func (r *Runner) readOnlyKinds() ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	for _, p := range r.Plugins {
		for _, l := range p.Kinds() {
			if _, readOnly := l.(*metav1.PartialObjectMetadataList); !readOnly {
				continue
			}
			gvk, err := gvkFor(r.Client.Scheme(), l)
			if err != nil {
				return nil, fmt.Errorf("plugin %s: kind %T: %w", p.Name(), l, err)
			}
			if item := gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List")); !slices.Contains(out, item) {
				out = append(out, item)
			}
		}
	}
	slices.SortFunc(out, compareGVK)
	return out, nil
}

// cacheTransform is the transform CacheByObject of r's plugins has for objects of gvk, or nil.
func (r *Runner) cacheTransform(gvk schema.GroupVersionKind) func(any) (any, error) {
	for key, by := range CacheByObject(r.Plugins...) {
		if by.Transform != nil && key.GetObjectKind().GroupVersionKind() == gvk {
			return by.Transform
		}
	}
	return nil
}

// versionKey names one version of an object: its kind, name, UID and resourceVersion.
func versionKey(o client.Object) string {
	return o.GetObjectKind().GroupVersionKind().String() + "/" + o.GetName() + "/" + string(o.GetUID()) + "/" + o.GetResourceVersion()
}

func compareGVK(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) }

// withRead is objs with each object read in place of the observed one of its reference (dropped
// when the read found none), and the others read appended, in the order read.
func withRead(objs []client.Object, fresh []readObject) []client.Object {
	byRef := make(map[plugin.Ref]client.Object, len(fresh))
	for _, f := range fresh {
		byRef[f.ref] = f.obj
	}
	out := make([]client.Object, 0, len(objs)+len(fresh))
	placed := map[plugin.Ref]bool{}
	for _, o := range objs {
		ref := refOf(o)
		f, read := byRef[ref]
		if !read {
			out = append(out, o)
			continue
		}
		placed[ref] = true
		if f != nil {
			out = append(out, f)
		}
	}
	for _, f := range fresh {
		if !placed[f.ref] && f.obj != nil {
			out = append(out, f.obj)
		}
	}
	return out
}

// readUnseen reads from the APIReader every object a plugin wants that the Reader did not show,
// unless the Reader shows every object of its kind (Runner.FullyCached), and every one it showed
// trimmed (Runner.Trimmed), whose content and managedFields the decisions need. A Reader that
// caches only the plugins' own objects does not show another writer's object with a wanted name,
// and server-side apply with force would take it over: read, it is a ConflictError and left alone.
// It also finds the plugins' own objects a lagging cache does not show yet; of a fully cached
// kind, such an object is applied again unchanged, as without an APIReader. What it reads is
// judged by disown, as observe's objects are.
func (r *Runner) readUnseen(ctx context.Context, read *reads, plans []*planned, t plugin.Target) ([]readObject, error) {
	var out []readObject
	for _, p := range plans {
		if p.failed {
			continue // writes nothing
		}
		for _, ao := range p.objects {
			gk := ao.gvk.GroupKind()
			seen := findObserved(t.Observed, ao.gvk, ao.ref.Name) != nil
			if read.tried[ao.ref] || (seen && !r.trimmed(gk)) || (!seen && r.fullyCached(gk)) {
				continue
			}
			read.tried[ao.ref] = true
			// The read decides again what the object claims.
			delete(read.claims, ao.ref)
			obj, err := r.Client.Scheme().New(ao.gvk)
			if err != nil {
				return nil, fmt.Errorf("reading %s in %q: %w", ao.ref, t.Namespace, err)
			}
			cur, ok := obj.(client.Object)
			if !ok {
				return nil, fmt.Errorf("reading %s in %q: %T is not a client.Object", ao.ref, t.Namespace, obj)
			}
			err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: ao.ref.Name}, cur)
			if apierrors.IsNotFound(err) {
				if seen {
					out = append(out, readObject{ref: ao.ref}) // gone since the cache saw it
				}
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("reading %s in %q: %w", ao.ref, t.Namespace, err)
			}
			cur.GetObjectKind().SetGroupVersionKind(ao.gvk)
			out = append(out, readObject{ref: ao.ref, obj: disown(t.Profile, []client.Object{cur}, read.claims)[0]})
		}
	}
	return out, nil
}

// fullyCached says whether the Reader shows every object of kind gk (Runner.FullyCached).
func (r *Runner) fullyCached(gk schema.GroupKind) bool {
	return slices.Contains(r.FullyCached, gk)
}

// trimmed says whether the Reader shows the objects of kind gk trimmed (Runner.Trimmed).
func (r *Runner) trimmed(gk schema.GroupKind) bool {
	return slices.Contains(r.Trimmed, gk)
}

// listPods lists the namespace's pods through the APIReader when there is one (a direct read, so
// no cluster-wide Pod informer), otherwise through the Reader.
func (r *Runner) listPods(ctx context.Context, namespace string) ([]corev1.Pod, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.reader()
	}
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing pods in %q: %w", namespace, err)
	}
	return pods.Items, nil
}

// needsPods says whether a decision of this call depends on the running pods, given plans made
// without them: a PodObserver asks for them (all of them do, unless they implement PodDemand), a
// data-plane label may be withdrawn or changed, or an object may be pruned that a PodProtector
// could name.
func needsPods(plugins []plugin.Plugin, plans []*planned, t plugin.Target, ns *corev1.Namespace) bool {
	for i, p := range plugins {
		po, ok := p.(plugin.PodObserver)
		if !ok || !po.NeedsPods() || plans[i].failed {
			continue
		}
		pd, ok := p.(plugin.PodDemand)
		if !ok || pd.NeedsPodsFor(t, plans[i].desired) {
			return true
		}
	}
	return dataPlaneAtRisk(plans, ns, t.Observed) || pruneAtRisk(plugins, plans, t.Observed)
}

// revokeNeedsPods says whether Revoke has pods to decide on: when a plugin holds data-plane
// labels or protects pods. Admission labels (AdmissionGuard) stay whatever runs.
func revokeNeedsPods(plugins []plugin.Plugin) bool {
	for _, p := range plugins {
		_, dp := p.(plugin.DataPlane)
		_, pp := p.(plugin.PodProtector)
		if dp || pp {
			return true
		}
	}
	return false
}

// dataPlaneAtRisk says whether this call may take away or change a data-plane label a plugin
// owns on ns (see DataPlane): the plugin no longer wants it as it is, or an object
// the label requires is not observed exactly as its plugin wants it, so the label depends on
// the object phase's writes. Only then may the pods it captures keep it (holdDataPlane).
func dataPlaneAtRisk(plans []*planned, ns *corev1.Namespace, obs plugin.Observed) bool {
	// The same owners holdDataPlane reads: the pods are listed whenever it could hold a label.
	own := readLabelOwners(ns, pluginsOf(plans))
	if own.err != nil {
		return false // the label phase reports it and writes no label
	}
	for _, p := range plans {
		dp, ok := p.plugin.(plugin.DataPlane)
		if !ok || p.failed {
			continue // a failed plugin's labels are not written
		}
		owned := own.owned(p.plugin.Name())
		for key, refs := range dp.DataPlaneLabels() {
			value, set := ns.Labels[key]
			if !owned[key] || !set {
				continue
			}
			if want, wanted := p.desired.Labels[key]; !wanted || want != value {
				return true
			}
			for _, ref := range append(append([]plugin.Ref(nil), refs...), p.desired.LabelRequires[key]...) {
				if !observedAsWanted(plans, obs, ref) {
					return true
				}
			}
		}
	}
	return false
}

// observedAsWanted says whether ref is observed exactly as a plugin that did not fail wants it now:
// made by that plugin, holding no other writer's content, and matching its apply body. The object
// phase then leaves it unchanged and it protects.
func observedAsWanted(plans []*planned, obs plugin.Observed, ref plugin.Ref) bool {
	for _, p := range plans {
		if p.failed {
			continue
		}
		for _, ao := range p.objects {
			if ao.ref != ref {
				continue
			}
			cur := findObserved(obs, ao.gvk, ref.Name)
			if cur == nil || !plugin.IsManagedBy(cur.GetLabels(), p.plugin.Name()) {
				return false
			}
			body, err := withHash(ao.data)
			return err == nil && len(ssa.ForeignFields(cur, plugin.FieldManager(p.plugin.Name()), body)) == 0 && matches(cur, body)
		}
	}
	return false
}

// Whose an observed object is, decided below and nowhere else: whether it is the plugins' own. Labels
// only claim it: anyone who may create an object in the namespace can copy them. What proves it is
// the controller owner reference the runner sets on everything it writes (decorate), naming the
// Profile by UID; every release of this library has set it. An object that carries the managed
// labels and is not controlled by the Profile is another writer's. The runner shows it to the
// plugins, and to its own phases, without those labels, so every later check ("made by the
// plugin", plugin.IsManagedBy) sees it as another writer's: never pruned, restored, adopted or
// counted as protection; under a wanted name it is a ConflictError. Each such object is reported
// once per call.

// claim is an observed object that carries the managed labels without being controlled by the
// Profile.
type claim struct {
	// labels says what its labels claim, as ConflictError.ManagedBy does.
	labels string
	// plugin is the plugin its PluginLabel names.
	plugin string
	// why says what controls it instead.
	why string
}

// claims are the claimed objects of one call, by reference.
type claims map[plugin.Ref]claim

// controls reports whether profile is obj's controller: a controller owner reference to a Profile
// (any version of its group) with the Profile's UID.
func controls(profile *profilev1.Profile, obj metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && profile.UID != "" && ref.UID == profile.UID && ownership.IsProfileRef(*ref)
}

// disown returns objs as the runner's phases and the plugins see them: an object that carries
// plugin.ManagedByLabel=plugin.ManagedByValue but that profile does not control is replaced by a
// copy without the managed labels, and recorded in cl. Other objects are returned as they are.
func disown(profile *profilev1.Profile, objs []client.Object, cl claims) []client.Object {
	var out []client.Object
	for i, obj := range objs {
		labels := obj.GetLabels()
		if labels[plugin.ManagedByLabel] != plugin.ManagedByValue || controls(profile, obj) {
			if out != nil {
				out = append(out, obj)
			}
			continue
		}
		if out == nil {
			out = append(make([]client.Object, 0, len(objs)), objs[:i]...)
		}
		cl[refOf(obj)] = claim{labels: managedBy(labels), plugin: labels[plugin.PluginLabel], why: notControlled(profile, obj)}
		cp := obj.DeepCopyObject().(client.Object)
		stripped := maps.Clone(labels)
		delete(stripped, plugin.ManagedByLabel)
		delete(stripped, plugin.PluginLabel)
		cp.SetLabels(stripped)
		out = append(out, cp)
	}
	if out == nil {
		return objs
	}
	return out
}

// notControlled says what controls obj, which profile does not.
func notControlled(profile *profilev1.Profile, obj metav1.Object) string {
	ref := metav1.GetControllerOfNoCopy(obj)
	switch {
	case ref == nil:
		return "it has no controller owner reference"
	case ownership.IsProfileRef(*ref) && ref.Name == profile.Name:
		return fmt.Sprintf("its controller is an earlier Profile %q (uid %s), with which garbage collection deletes it", ref.Name, ref.UID)
	}
	return fmt.Sprintf("its controller is %s %q (uid %s)", ref.Kind, ref.Name, ref.UID)
}

// warnClaims reports each claimed object once, to the plugin its labels name, or, when no plugin
// of the runner has that name, to the first plugin that lists its kind.
func (r *Runner) warnClaims(res *Result, profile *profilev1.Profile, cl claims) {
	if len(res.Plugins) == 0 {
		return
	}
	for _, ref := range slices.SortedFunc(maps.Keys(cl), func(a, b plugin.Ref) int { return strings.Compare(a.String(), b.String()) }) {
		c := cl[ref]
		i := r.pluginFor(c.plugin, ref.GroupKind)
		res.Plugins[i].Warnings = append(res.Plugins[i].Warnings, fmt.Sprintf(
			"%s carries the labels of %s but is not controlled by Profile %s (uid %s): %s; it is another writer's and left alone (never pruned, restored or adopted)",
			ref, c.labels, profile.Name, profile.UID, c.why))
	}
}

// pluginFor is the index of the plugin named name, or of the first plugin whose Kinds include gk,
// or 0.
func (r *Runner) pluginFor(name string, gk schema.GroupKind) int {
	for i, p := range r.Plugins {
		if p.Name() == name {
			return i
		}
	}
	for i, p := range r.Plugins {
		for _, l := range p.Kinds() {
			if gvk, err := gvkFor(r.Client.Scheme(), l); err == nil && gvk.Group == gk.Group && gvk.Kind == gk.Kind+"List" {
				return i
			}
		}
	}
	return 0
}
