package runner

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// applyPlan is what one Apply decided before its first write, from the observed state and what
// the plugins generated: which enrolment labels come off first, and what the prune phase deletes
// and keeps. The object and label phases decide the rest as they go, because each of their
// decisions depends on the writes before it: an object is created only once what it requires
// protects after the writes before it, and a label is set only on what protects after the object
// phase.
type applyPlan struct {
	ns    *corev1.Namespace // refreshed after the withdraw phase's write
	obs   plugin.Observed
	held  holds
	plans []*planned
	// withdraw maps each plugin that has enrolment labels to take off first to the labels it keeps
	// meanwhile; empty when there is none.
	withdraw map[string]map[string]string
	// prune is, per plan, what the prune phase does with the plugin's stale objects; the zero
	// value, deleting nothing, for a plugin whose generation failed.
	prune []pruneDecision
	// claims are the observed objects that carry the managed labels without being controlled by
	// the Profile (see disown): obs shows them without those labels.
	claims claims
}

// plan decides what Apply can decide before it writes anything.
func plan(ns *corev1.Namespace, obs plugin.Observed, held holds, plans []*planned, cl claims) *applyPlan {
	ap := &applyPlan{ns: ns, obs: obs, held: held, plans: plans, claims: cl,
		withdraw: planWithdrawal(plans, ns, held, statusStale(plans, obs, cl)), prune: make([]pruneDecision, len(plans))}
	for i, p := range plans {
		if !p.failed {
			ap.prune[i] = decidePrune(p, obs, held, true)
		}
	}
	return ap
}

// statusStale are the existing objects the object phase will write so that a routing label's
// judgement of them goes stale: restored from another writer's change, or a status-gated object
// changed (Desired.ReadyFromStatus); the label phase withholds the labels that require them (see
// protections.restoredNow). The object phase decides an existing object from the observation
// alone (decideWrite), so this is what it writes once the withdrawal has succeeded; the withdraw
// phase takes those labels off before that write, so that no routing label points at a version
// istiod has not programmed at any moment. A missing object is left out: a label that requires
// one is not wanted or already withheld.
func statusStale(plans []*planned, obs plugin.Observed, cl claims) map[plugin.Ref]bool {
	out := map[plugin.Ref]bool{}
	for _, p := range plans {
		if p.failed {
			continue
		}
		for i := range p.objects {
			ao := &p.objects[i]
			cur := findObserved(obs, ao.gvk, ao.ref.Name)
			if cur == nil {
				continue
			}
			var claimed *claim
			if c, ok := cl[ao.ref]; ok {
				claimed = &c
			}
			if s := decideWrite(p, ao, cur, slices.Contains(p.desired.Adopt, ao.ref), claimed); s.send && (s.restored || s.rewritten) {
				out[ao.ref] = true
			}
		}
	}
	return out
}
