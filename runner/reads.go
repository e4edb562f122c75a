package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/ssa"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// This file decides what the runner reads past its Reader (Runner.APIReader), and reads it. A
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
// another writer may create under the same name (those in Desired.Adopt that obs lacks): kfam POSTs
// a contributor's policy right after its RoleBinding.
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
// create a contested object rests on them: a cache that still shows the RoleBinding kfam has just
// deleted would have the access plugin create the policy of the same name, which kfam's next POST
// for that contributor then meets as AlreadyExists. One read per name and kind, whatever else the
// namespace holds.
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

// pruneAtRisk says whether the prune phase may delete an object a PodProtector could name: a
// plugin that did not fail no longer wants an object of its own.
func pruneAtRisk(plugins []plugin.Plugin, plans []*planned, obs plugin.Observed) bool {
	protector := false
	for _, p := range plugins {
		if _, ok := p.(plugin.PodProtector); ok {
			protector = true
		}
	}
	if !protector {
		return false
	}
	for _, p := range plans {
		if !p.failed && len(stale(p, obs)) > 0 {
			return true
		}
	}
	return false
}
