package runner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow-ambient/profile-plugins/internal/labelowners"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// wantedLabels decides the label phase: for each plugin that did not fail, the namespace labels
// it should own after this call, gated on what protects after the object phase. writeLabels sends
// them, in one write for every plugin.
func wantedLabels(ap *applyPlan) map[string]map[string]string {
	pr := protection(ap.plans, ap.obs)
	want := map[string]map[string]string{}
	for _, p := range ap.plans {
		if !p.failed {
			want[p.plugin.Name()] = decideLabels(p, ap.ns, pr, ap.held)
		}
	}
	return want
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
		if current[key] == want && !slices.Contains(labelowners.Managers(ns)[key], plugin.FieldManager(name)) {
			p.res.Warnings = append(p.res.Warnings, fmt.Sprintf("namespace label %s=%s was set by %s although %s: the namespace is enrolled without that protection",
				key, want, strings.Join(labelowners.Managers(ns)[key], ", "), strings.Join(gaps, ", ")))
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
