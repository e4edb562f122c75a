package runner

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// pruneDecision is what the prune phase does with one plugin's stale objects.
type pruneDecision struct {
	// deletes are deleted, each with its UID as precondition.
	deletes []client.Object
	// waiting says what the objects kept for running pods wait for.
	waiting []string
}

// stale lists the plugin's observed objects that it no longer wants. A kind listed as metadata
// only is read, never written (the access plugin reads RoleBindings so): whoever labelled such an object
// as the plugin's cannot make the runner delete it.
func stale(p *planned, obs plugin.Observed) []client.Object {
	want := map[plugin.Ref]bool{}
	for _, o := range p.objects {
		want[o.ref] = true
	}
	var out []client.Object
	for _, cur := range obs.Objects {
		if !plugin.IsManagedBy(cur.GetLabels(), p.plugin.Name()) {
			continue
		}
		if _, readOnly := cur.(*metav1.PartialObjectMetadata); readOnly {
			continue
		}
		if !want[refOf(cur)] {
			out = append(out, cur)
		}
	}
	return out
}

// decidePrune decides which stale objects of the plugin go: all but those a held data-plane label
// requires or running pods depend on; with wait, it says what those wait for.
func decidePrune(p *planned, obs plugin.Observed, held holds, wait bool) pruneDecision {
	var d pruneDecision
	for _, cur := range stale(p, obs) {
		ref := refOf(cur)
		if held.refs[ref] {
			if why := held.keeping(ref); why != "" && wait {
				d.waiting = append(d.waiting, why)
			}
			continue
		}
		if cur.GetDeletionTimestamp() != nil {
			continue // being deleted already: deleting again writes and changes nothing
		}
		d.deletes = append(d.deletes, cur)
	}
	return d
}

// pruneStale is Apply's prune phase: every plugin that did not fail, as planned.
func (r *Runner) pruneStale(ctx context.Context, ap *applyPlan) {
	for i, p := range ap.plans {
		if !p.failed {
			r.prune(ctx, p, ap.prune[i])
		}
	}
}

// prune sends the deletes of d and records them, and what the kept objects wait for, in p's
// result. An object already gone counts as deleted.
func (r *Runner) prune(ctx context.Context, p *planned, d pruneDecision) {
	p.res.Waiting = append(p.res.Waiting, d.waiting...)
	for _, cur := range d.deletes {
		ref := refOf(cur)
		uid := cur.GetUID()
		err := r.Client.Delete(ctx, cur, client.Preconditions{UID: &uid})
		if err != nil && !apierrors.IsNotFound(err) {
			p.res.Errors = append(p.res.Errors, fmt.Errorf("plugin %s: deleting %s: %w", p.plugin.Name(), ref, err))
			continue
		}
		p.res.Deleted = append(p.res.Deleted, ref)
	}
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
