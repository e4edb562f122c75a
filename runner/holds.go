package runner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/internal/labelowners"
	"github.com/kubeflow-ambient/profile-plugins/internal/ssa"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// holds are the data-plane labels the runner keeps on the namespace although their plugin would
// take them away, and the objects they require, because pods they capture still run.
type holds struct {
	labels map[string]map[string]string   // plugin -> label key -> value kept
	pods   map[string]map[string][]string // plugin -> label key -> captured pods
	refs   map[plugin.Ref]bool            // objects a held label requires: never pruned
	// protected are objects running pods depend on whatever the labels say (PodProtector):
	// never pruned either, and their pods are named while they wait.
	protected map[plugin.Ref][]string
	// standing are data-plane labels (key to value) another writer also owns on the namespace:
	// they stay whatever the runner writes (server-side apply removes only what nobody else
	// owns), so the objects they require are kept (in refs) and made (Observed.Held) as for a
	// held label; by names their other owners, for the warning.
	standing map[string]string
	by       map[string][]string
}

// holdStanding adds to h the data-plane labels of ns that a field manager other than the runner's
// owns, whoever else does, and the objects they require. A namespace-label writer who applies the
// runner's own value under a manager of their own (admission sees no change of value) would
// otherwise keep istio.io/dataplane-mode=ambient on the namespace after the runner withdrew it, and
// the runner would prune the ztunnel policy that keeps the namespace closed.
func holdStanding(plugins []plugin.Plugin, ns *corev1.Namespace, h holds) holds {
	others := otherLabelOwners(ns, plugins)
	for _, p := range plugins {
		dp, ok := p.(plugin.DataPlane)
		if !ok {
			continue
		}
		for key, refs := range dp.DataPlaneLabels() {
			value, set := ns.Labels[key]
			if !set || len(others[key]) == 0 {
				continue
			}
			if h.standing == nil {
				h.standing, h.by = map[string]string{}, map[string][]string{}
			}
			h.standing[key], h.by[key] = value, others[key]
			for _, ref := range refs {
				h.refs[ref] = true
			}
		}
	}
	return h
}

// otherLabelOwners maps each label key of ns to the field managers that own it and are not the
// runner: every managedFields entry but the runner's own applies (LabelFieldManager, or the field
// manager of one of plugins from an earlier release) to the namespace itself. A manager's name is
// the client's choice, so one that only starts like the runner's is another writer's, and so is
// any entry of a subresource (the status update of a namespace takes its labels too), whoever made
// it: the runner writes none there, so nothing of its own lets go of such a label.
func otherLabelOwners(ns *corev1.Namespace, plugins []plugin.Plugin) map[string][]string {
	own := map[string]bool{plugin.LabelFieldManager: true}
	for _, p := range plugins {
		own[plugin.FieldManager(p.Name())] = true
	}
	out := map[string][]string{}
	for _, e := range ns.GetManagedFields() {
		if e.FieldsV1 == nil || (e.Subresource == "" && e.Operation == metav1.ManagedFieldsOperationApply && own[e.Manager]) {
			continue
		}
		keys, _, err := ssa.ManagedLabelKeys(e)
		if err != nil {
			continue
		}
		who := e.Manager
		if e.Subresource != "" {
			who += " (" + e.Subresource + ")"
		}
		for _, k := range keys {
			if !slices.Contains(out[k], who) {
				out[k] = append(out[k], who)
			}
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

// warnStanding tells each data-plane plugin that does not want a standing label as it stands
// which of its objects the label keeps, and why.
func warnStanding(plans []*planned, h holds) {
	for _, p := range plans {
		dp, ok := p.plugin.(plugin.DataPlane)
		if !ok || p.failed {
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(h.standing)) {
			refs := dp.DataPlaneLabels()[key]
			if want, wanted := p.desired.Labels[key]; len(refs) == 0 || (wanted && want == h.standing[key]) {
				continue
			}
			names := make([]string, len(refs))
			for i, r := range refs {
				names[i] = r.String()
			}
			p.res.Warnings = append(p.res.Warnings, fmt.Sprintf("namespace label %s=%s is also set by %s, so it stays whatever plugin %s wants; %s stays with it, as for a label pods depend on",
				key, h.standing[key], strings.Join(h.by[key], ", "), p.plugin.Name(), strings.Join(names, ", ")))
		}
	}
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

// all is every held label, and every standing one, for Observed.Held.
func (h holds) all() map[string]string {
	out := maps.Clone(h.standing)
	if out == nil {
		out = map[string]string{}
	}
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

// admissionHolds are the admission labels (see plugin.AdmissionGuard) that Revoke keeps on the
// namespace, per plugin.
type admissionHolds struct {
	labels map[string]map[string]string // plugin -> label key -> value kept
}

// holdAdmission decides which admission labels each AdmissionGuard keeps through Revoke: every
// such label the plugin owns on ns, wherever the namespace goes, and whether or not pods run. One
// that goes away leaves them to its deletion: taking them off first would leave it admitting
// anything until then, and for good if the Profile was deleted orphaning its dependents. One that
// survives keeps them for good: whoever may still create pods there (see Revoke) is held to what
// the Profile's namespace was held to. There a label another field manager owns too is left to
// that writer (an admin who applied it under their own manager): it stays when the runner lets go.
func holdAdmission(plugins []plugin.Plugin, ns *corev1.Namespace, leaving bool) admissionHolds {
	h := admissionHolds{labels: map[string]map[string]string{}}
	own := readLabelOwners(ns, plugins)
	if own.err != nil {
		return h // the label phase reports it and writes no label
	}
	managers := labelowners.Managers(ns)
	for _, p := range plugins {
		ag, ok := p.(plugin.AdmissionGuard)
		if !ok {
			continue
		}
		owned := own.owned(p.Name())
		kept := map[string]string{}
		for _, key := range ag.AdmissionLabels() {
			value, set := ns.Labels[key]
			if !owned[key] || !set || (!leaving && slices.ContainsFunc(managers[key], notTheRunners)) {
				continue
			}
			kept[key] = value
		}
		if len(kept) > 0 {
			h.labels[p.Name()] = kept
		}
	}
	return h
}

// warnSurviving says, for each plugin that keeps admission labels, what Revoke left of it in a
// namespace that survives its Profile, and why: the namespace is no longer the runner's to loosen.
func warnSurviving(res *Result, ns string, guarded admissionHolds) {
	for i := range res.Plugins {
		labels := guarded.labelsOf(res.Plugins[i].Plugin)
		if len(labels) == 0 {
			continue
		}
		var kept []string
		for _, key := range slices.Sorted(maps.Keys(labels)) {
			kept = append(kept, key+"="+labels[key])
		}
		res.Plugins[i].Warnings = append(res.Plugins[i].Warnings, fmt.Sprintf("namespace %s outlives its Profile, and so do the RoleBindings "+
			"there without the Profile's owner reference (contributors' bindings among them): Revoke leaves %s in place "+
			"and manages them no more; delete the namespace, or take them off yourself once nobody can create pods there",
			ns, strings.Join(kept, ", ")))
	}
}

// notTheRunners reports whether a field manager is another writer's: neither LabelFieldManager nor
// a plugin's (an earlier release labelled under each plugin's own manager).
func notTheRunners(manager string) bool {
	return manager != plugin.LabelFieldManager && !strings.HasPrefix(manager, plugin.FieldManagerPrefix)
}

// labelsOf is a copy of the plugin's kept admission labels, never nil.
func (h admissionHolds) labelsOf(pluginName string) map[string]string {
	out := maps.Clone(h.labels[pluginName])
	if out == nil {
		out = map[string]string{}
	}
	return out
}
