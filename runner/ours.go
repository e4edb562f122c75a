package runner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// This file is the one place that decides whether an observed object is the plugins' own. Labels
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
