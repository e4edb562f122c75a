package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/labelowners"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// observe reads the namespace and every object of the plugins' kinds in it through the Reader,
// and, without an APIReader, its pods.
func (r *Runner) observe(ctx context.Context, name string) (*corev1.Namespace, plugin.Observed, unserved, error) {
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
	return ns, obs, missing, nil
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
