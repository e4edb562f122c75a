package runner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// This file decides; runner.go writes. The rules are the safety model of the package doc.

// protections says, for each object a label may require, why it does not protect ("" when it does).
type protections struct {
	why map[plugin.Ref]string
	obs plugin.Observed
	// restored are the objects phase 1 restored from another writer's change (applyObject.restored).
	restored map[plugin.Ref]bool
	// rewritten are the status-gated objects phase 1 changed (applyObject.rewritten).
	rewritten map[plugin.Ref]bool
}

// protection is the state of every object after phase 1. An object a plugin wants protects when it
// exists as desired: observed intact, written in this run, or an earlier version of the plugin's
// own that still stands after a failed update. An object of a plugin whose generation failed
// counts as what it is: it protects while it exists, carries the plugin's labels and holds no
// other writer's spec fields. A failed plugin therefore never takes enrolment down by itself.
func protection(plans []*planned, obs plugin.Observed) protections {
	pr := protections{why: map[plugin.Ref]string{}, obs: obs, restored: map[plugin.Ref]bool{}, rewritten: map[plugin.Ref]bool{}}
	for _, p := range plans {
		if !p.failed {
			for _, o := range p.objects {
				pr.why[o.ref] = o.broken
				if o.restored {
					pr.restored[o.ref] = true
				}
				if o.rewritten {
					pr.rewritten[o.ref] = true
				}
			}
			continue
		}
		for _, cur := range obs.Objects {
			if plugin.IsManagedBy(cur.GetLabels(), p.plugin.Name()) {
				pr.why[refOf(cur)] = asItIs(cur, p.plugin.Name())
			}
		}
	}
	return pr
}

// gaps lists the required objects that do not protect, each with the reason.
func (pr protections) gaps(refs []plugin.Ref) []string {
	var out []string
	for _, ref := range refs {
		why, known := pr.why[ref]
		if !known {
			why = pr.unwanted(ref)
		}
		if why != "" {
			out = append(out, ref.String()+" "+why)
		}
	}
	return out
}

// gapsSoFar is gaps during phase 1: an object not written yet in this call counts as observed.
func (pr protections) gapsSoFar(refs []plugin.Ref) []string {
	var out []string
	for _, ref := range refs {
		why, known := pr.why[ref]
		if !known {
			why = "does not exist"
			if cur := findObservedRef(pr.obs, ref); cur != nil {
				why = asItIs(cur, cur.GetLabels()[plugin.PluginLabel])
			}
		}
		if why != "" {
			out = append(out, ref.String()+" "+why)
		}
	}
	return out
}

// restoredNow lists the required objects restored from another writer's change in this call, and
// the status-gated ones changed in it (Desired.ReadyFromStatus): the same holds for both.
// Such an object is as desired, but what the data plane runs may still be the changed version:
// istiod programs a restored Gateway after the write, and the status the call observed is the
// changed version's. A routing label that requires one waits for the next call, whose observation
// shows the restored version (waypoint.Ready wants it Programmed for its new generation).
func (pr protections) restoredNow(refs []plugin.Ref) []string {
	var out []string
	for _, ref := range refs {
		switch {
		case pr.restored[ref]:
			out = append(out, ref.String()+" was restored from another writer's change in this call and may not be in effect yet")
		case pr.rewritten[ref]:
			out = append(out, ref.String()+" was changed in this call, so the status it was judged ready by is of the version before")
		}
	}
	return out
}

// unwanted says why an object that no plugin generated in this run does not protect.
func (pr protections) unwanted(ref plugin.Ref) string {
	cur := findObservedRef(pr.obs, ref)
	if cur == nil {
		return "does not exist"
	}
	if cur.GetLabels()[plugin.ManagedByLabel] != plugin.ManagedByValue {
		return "exists and was made by " + (&ConflictError{ManagedBy: managedBy(cur.GetLabels())}).who()
	}
	return "is no longer wanted by plugin " + cur.GetLabels()[plugin.PluginLabel]
}

// decideLabels is the set of namespace labels the plugin's field manager should own after this
// call. A wanted label whose required objects all protect is set or kept. Otherwise it is not set,
// and one already set is withdrawn, unless it is a held data-plane label: taking that away would
// leave running pods outside every data plane, which protects nothing. A held label the plugin no
// longer wants stays too, and the plugin waits. A label that is not a data-plane label (routing)
// is also withheld for the call while an object it requires was restored from drift in it (see
// restoredNow); a data-plane label is not, since withdrawing it takes pods out of the mesh. ns is
// nil for a preview (Render).
func decideLabels(p *planned, ns *corev1.Namespace, pr protections, held holds) map[string]string {
	name := p.plugin.Name()
	labels := maps.Clone(p.desired.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	var current map[string]string
	if ns != nil {
		current = ns.Labels
	}
	for _, key := range slices.Sorted(maps.Keys(p.desired.LabelRequires)) {
		want, wanted := labels[key]
		if !wanted {
			continue
		}
		gaps := pr.gaps(p.desired.LabelRequires[key])
		if len(pr.restored)+len(pr.rewritten) > 0 && !isDataPlaneLabel(p.plugin, key) {
			gaps = append(gaps, pr.restoredNow(p.desired.LabelRequires[key])...)
		}
		if len(gaps) == 0 {
			continue
		}
		if held.holds(name, key) && current[key] == want {
			p.res.Warnings = append(p.res.Warnings, fmt.Sprintf("label %s=%s stays although %s: %s",
				key, want, strings.Join(gaps, ", "), held.reason(name, key)))
			continue
		}
		delete(labels, key)
		p.res.Waiting = append(p.res.Waiting, fmt.Sprintf("label %s withheld: %s", key, strings.Join(gaps, ", ")))
		if current[key] == want && !slices.Contains(labelManagers(ns)[key], plugin.FieldManager(name)) {
			p.res.Warnings = append(p.res.Warnings, fmt.Sprintf("namespace label %s=%s was set by %s although %s: the namespace is enrolled without that protection",
				key, want, strings.Join(labelManagers(ns)[key], ", "), strings.Join(gaps, ", ")))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(held.labels[name])) {
		v := held.labels[name][key]
		if have, ok := labels[key]; ok && have == v {
			continue
		}
		labels[key] = v
		p.res.Waiting = append(p.res.Waiting, held.waitingFor(name, key))
	}
	return labels
}

// isDataPlaneLabel reports whether key is one of the plugin's data-plane labels (DataPlane).
func isDataPlaneLabel(p plugin.Plugin, key string) bool {
	dp, ok := p.(plugin.DataPlane)
	if !ok {
		return false
	}
	_, is := dp.DataPlaneLabels()[key]
	return is
}

// holds are the data-plane labels the runner keeps on the namespace although their plugin would
// take them away, and the objects they require, because pods they capture still run.
type holds struct {
	labels map[string]map[string]string   // plugin -> label key -> value kept
	pods   map[string]map[string][]string // plugin -> label key -> captured pods
	refs   map[plugin.Ref]bool            // objects a held label requires: never pruned
	// protected are objects running pods depend on whatever the labels say (PodProtector):
	// never pruned either, and their pods are named while they wait.
	protected map[plugin.Ref][]string
}

// holdDataPlane finds, for each DataPlane plugin, the data-plane labels it owns on
// ns that capture running pods, and, for each PodProtector, the objects running pods depend on.
func holdDataPlane(plugins []plugin.Plugin, ns *corev1.Namespace, obs plugin.Observed) holds {
	pods := obs.Pods
	h := holds{labels: map[string]map[string]string{}, pods: map[string]map[string][]string{}, refs: map[plugin.Ref]bool{}, protected: map[plugin.Ref][]string{}}
	for _, p := range plugins {
		pp, ok := p.(plugin.PodProtector)
		if !ok {
			continue
		}
		for ref, names := range pp.ProtectedPods(obs) {
			if len(names) > 0 {
				h.refs[ref] = true
				h.protected[ref] = slices.Sorted(slices.Values(names))
			}
		}
	}
	own := readLabelOwners(ns, plugins)
	if own.err != nil {
		return h // the label phase reports it and writes no label
	}
	for _, p := range plugins {
		dp, ok := p.(plugin.DataPlane)
		if !ok {
			continue
		}
		owned := own.owned(p.Name())
		for key, refs := range dp.DataPlaneLabels() {
			value, set := ns.Labels[key]
			if !owned[key] || !set {
				continue
			}
			captured := dp.Captured(key, value, pods)
			if len(captured) == 0 {
				continue
			}
			if h.labels[p.Name()] == nil {
				h.labels[p.Name()] = map[string]string{}
				h.pods[p.Name()] = map[string][]string{}
			}
			h.labels[p.Name()][key] = value
			h.pods[p.Name()][key] = slices.Sorted(slices.Values(captured))
			for _, ref := range refs {
				h.refs[ref] = true
			}
		}
	}
	return h
}

func (h holds) holds(plugin, key string) bool {
	_, ok := h.labels[plugin][key]
	return ok
}

// all is every held label, for Observed.Held.
func (h holds) all() map[string]string {
	out := map[string]string{}
	for _, labels := range h.labels {
		maps.Copy(out, labels)
	}
	return out
}

// labelsOf is a copy of the plugin's held labels, never nil.
func (h holds) labelsOf(pluginName string) map[string]string {
	out := maps.Clone(h.labels[pluginName])
	if out == nil {
		out = map[string]string{}
	}
	return out
}

func (h holds) reason(plugin, key string) string {
	pods := h.pods[plugin][key]
	return fmt.Sprintf("%d running pod(s) would otherwise be outside every data plane: %s", len(pods), strings.Join(pods, ", "))
}

func (h holds) waitingFor(plugin, key string) string {
	return fmt.Sprintf("keeps %s=%s and the objects it requires until no pod depends on it (restart the pods into the new data plane or delete them); %s",
		key, h.labels[plugin][key], h.reason(plugin, key))
}

// keeping says why an object the plugin no longer wants is not pruned ("" when no pod depends on it).
func (h holds) keeping(ref plugin.Ref) string {
	pods := h.protected[ref]
	if len(pods) == 0 {
		return ""
	}
	return fmt.Sprintf("keeps %s until no running pod depends on it (restart the pods into the new data plane or delete them); %d running pod(s) would otherwise have no ALLOW policy and admit every caller: %s",
		ref, len(pods), strings.Join(pods, ", "))
}

// waiting lists a waiting reason for every label held for the plugin.
func (h holds) waiting(pluginName string) []string {
	var out []string
	for _, key := range slices.Sorted(maps.Keys(h.labels[pluginName])) {
		out = append(out, h.waitingFor(pluginName, key))
	}
	return out
}

// controlledBy reports whether profile is ns's controller, so that deleting the Profile deletes
// the namespace, its pods and what protects them together.
func controlledBy(ns *corev1.Namespace, profile *profilev1.Profile) bool {
	c := metav1.GetControllerOf(ns)
	return c != nil && profile.UID != "" && c.UID == profile.UID
}

func refOf(obj client.Object) plugin.Ref {
	return plugin.Ref{GroupKind: obj.GetObjectKind().GroupVersionKind().GroupKind(), Name: obj.GetName()}
}

func findObservedRef(obs plugin.Observed, ref plugin.Ref) client.Object {
	for _, o := range obs.Objects {
		if o.GetName() == ref.Name && o.GetObjectKind().GroupVersionKind().GroupKind() == ref.GroupKind {
			return o
		}
	}
	return nil
}
