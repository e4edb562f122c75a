package runner

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// planWithdrawal decides the withdraw phase: for each plugin that owns an enrolment label whose
// value is about to change or which it no longer wants, or a routing label that requires an
// object about to be written stale (see statusStale), the labels it keeps while that label comes
// off (every other label as it is). It is empty when there is nothing to withdraw, or when the
// runner's label ownership cannot be read: the label phase reports that, and writes no label.
func planWithdrawal(plans []*planned, ns *corev1.Namespace, held holds, stale map[plugin.Ref]bool) map[string]map[string]string {
	own := readLabelOwners(ns, pluginsOf(plans))
	if own.err != nil {
		return nil
	}
	want := map[string]map[string]string{}
	for _, p := range plans {
		if keep, withdraw := withdrawal(p, ns, own, held, stale); withdraw {
			want[p.plugin.Name()] = keep
		}
	}
	return want
}

// withdrawal is the labels the plugin keeps while its enrolment labels that change or go are
// withdrawn, and whether there is any to withdraw. A shared label no plugin is named for counts as
// the plugin's own when it is one of the plugin's enrolment keys. A routing label (an enrolment
// label that is no data-plane label) also goes when an object it requires is in stale: the label
// phase would withhold it anyway, and only taking it off first keeps it from pointing, between the
// object's write and the label write, at a version istiod has not programmed. A data-plane label
// never goes for that: withdrawing it takes pods out of the mesh.
func withdrawal(p *planned, ns *corev1.Namespace, own labelOwners, held holds, stale map[plugin.Ref]bool) (map[string]string, bool) {
	if p.failed || len(p.desired.Enrolment) == 0 {
		return nil, false
	}
	owned := own.owned(p.plugin.Name())
	keep := map[string]string{}
	for k := range owned {
		if v, ok := ns.Labels[k]; ok {
			keep[k] = v
		}
	}
	withdraw := false
	for _, k := range p.desired.Enrolment {
		want, wanted := p.desired.Labels[k]
		goes := !wanted || want != ns.Labels[k] || (!isDataPlaneLabel(p.plugin, k) && requiresAny(p.desired.LabelRequires[k], stale))
		if (owned[k] || own.unattributed[k]) && goes && !held.holds(p.plugin.Name(), k) {
			delete(keep, k)
			withdraw = true
		}
	}
	return keep, withdraw
}

// requiresAny reports whether any of refs is in set.
func requiresAny(refs []plugin.Ref, set map[plugin.Ref]bool) bool {
	return slices.ContainsFunc(refs, func(r plugin.Ref) bool { return set[r] })
}

// withdrawEnrolment sends the planned withdrawal, in one label write before any object changes. It
// reports false when that write failed: the labels then still route traffic.
func (r *Runner) withdrawEnrolment(ctx context.Context, ap *applyPlan, res *Result) bool {
	if len(ap.withdraw) == 0 {
		return true
	}
	if !r.writeLabels(ctx, ap.ns, ap.plans, ap.withdraw, res) {
		return false
	}
	// Later phases compare against the namespace as it is now. A cache may still show the
	// old labels; then the label phase writes once more, which converges to the same state.
	if fresh := (&corev1.Namespace{}); r.reader().Get(ctx, client.ObjectKeyFromObject(ap.ns), fresh) == nil {
		*ap.ns = *fresh
	}
	return true
}
