package runner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/ssa"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// objectStep is what the object phase decided for one wanted object, before writing anything.
type objectStep struct {
	cur  client.Object  // as observed; nil when missing
	body map[string]any // the apply body with its desired hash
	// send: the object is written, restored first when foreign holds anything. Otherwise nothing
	// is written, and broken says why the object does not protect ("" when it does).
	send   bool
	broken string
	// foreign are the content fields that others (or an Update under the plugin's own manager)
	// hold and the body does not set: the restore takes them away.
	foreign map[string][]string
	// restored and rewritten become the object's (see applyObject).
	restored, rewritten bool
	// What the step reports before any write: a reason to wait, warnings, an error that stops the
	// object, or that it is unchanged.
	waiting, warnings []string
	err               error
	unchanged         bool
}

// writeObjects is the object phase: every wanted object of the plugins that did not fail, in
// plugin order. With rewrite false (a withdrawal failed) it only creates missing ones: an object
// that exists stays as it is and counts as what it is. A missing object is created only once what
// it requires (Desired.CreateRequires) protects, after the writes made so far in this phase.
func (r *Runner) writeObjects(ctx context.Context, ap *applyPlan, rewrite bool) {
	sofar := protections{why: map[plugin.Ref]string{}, obs: ap.obs}
	for _, p := range ap.plans {
		if p.failed {
			continue
		}
		adopt := map[plugin.Ref]bool{}
		for _, ref := range p.desired.Adopt {
			adopt[ref] = true
		}
		for i := range p.objects {
			ao := &p.objects[i]
			var claimed *claim
			if c, ok := ap.claims[ao.ref]; ok {
				claimed = &c
			}
			step := decideObject(p, ao, ap.obs, rewrite, adopt[ao.ref], sofar, claimed)
			ao.broken = r.writeObject(ctx, p, ao, step)
			sofar.why[ao.ref] = ao.broken
		}
	}
}

// decideObject decides whether one object is written now; it writes nothing. claimed is set when
// the observed object under the wanted name carries the managed labels without being controlled
// by the Profile (see disown).
func decideObject(p *planned, ao *applyObject, obs plugin.Observed, rewrite, adoptable bool, sofar protections, claimed *claim) objectStep {
	cur := findObserved(obs, ao.gvk, ao.ref.Name)
	if cur == nil {
		if gaps := sofar.gapsSoFar(p.desired.CreateRequires[ao.ref]); len(gaps) > 0 {
			return objectStep{broken: "is not created yet",
				waiting: []string{fmt.Sprintf("%s is not created yet: %s", ao.ref, strings.Join(gaps, ", "))}}
		}
		return decideWrite(p, ao, nil, adoptable, nil)
	}
	if !rewrite {
		return keepAsItIs(p, ao, cur)
	}
	return decideWrite(p, ao, cur, adoptable, claimed)
}

// keepAsItIs is the step for an object that exists while a withdrawal failed: nothing is written,
// and it protects as it stands.
func keepAsItIs(p *planned, ao *applyObject, cur client.Object) objectStep {
	s := objectStep{cur: cur, broken: asItIs(cur, p.plugin.Name())}
	if extras := ssa.ApplyExtras(cur, plugin.FieldManager(p.plugin.Name()), ao.data); s.broken == "" && len(extras) > 0 {
		s.broken = "holds content the plugin does not set (" + strings.Join(extras, ", ") + ")"
	}
	if body, err := withHash(ao.data); err != nil || !matches(cur, body) || s.broken != "" {
		s.waiting = []string{fmt.Sprintf("%s is left as it is until the enrolment labels that route to it are withdrawn", ao.ref)}
	}
	return s
}

// decideWrite is the step for an object the runner may write: left alone when another writer
// made it (a ConflictError, unless the plugin adopts it; one that only claims to be the library's
// is never adopted), unchanged when it is as desired, and otherwise written, with a warning for
// each change another writer made.
func decideWrite(p *planned, ao *applyObject, cur client.Object, adoptable bool, claimed *claim) objectStep {
	name := p.plugin.Name()
	body, err := withHash(ao.data)
	if err != nil {
		return objectStep{broken: "could not be rendered", err: fmt.Errorf("plugin %s: %s: %w", name, ao.ref, err)}
	}
	s := objectStep{cur: cur, body: body, send: true}
	if cur == nil {
		return s
	}
	adopted := false
	if !plugin.IsManagedBy(cur.GetLabels(), name) {
		// Another of this library's plugins is never adopted from: that would make two
		// plugins fight over one object. Nor is an object that carries the library's labels
		// without the Profile as its controller: whoever made it copied them, and taking it
		// over would restore over their object.
		if !adoptable || cur.GetLabels()[plugin.ManagedByLabel] == plugin.ManagedByValue || claimed != nil {
			err := &ConflictError{Plugin: name, Ref: ao.ref, ManagedBy: managedBy(cur.GetLabels())}
			if claimed != nil {
				err.ManagedBy, err.NotControlled = claimed.labels, claimed.why
			}
			return objectStep{cur: cur, broken: "exists and " + err.held(), err: err}
		}
		adopted = true
		s.warnings = append(s.warnings, fmt.Sprintf("adopted %s, which another writer made", ao.ref))
	}
	f := factsOf(cur, name, body)
	s.foreign = f.foreign
	if len(f.foreign) == 0 && f.held {
		return objectStep{cur: cur, warnings: s.warnings, unchanged: true}
	}
	if len(f.others) > 0 && !adopted {
		s.warnings = append(s.warnings, fmt.Sprintf("%s was changed by another writer (%s); restoring the desired spec", ao.ref, describeForeign(f.others)))
	}
	f = f.changed(cur, name, body)
	s.warnings = append(s.warnings, ownManagerWarnings(ao.ref, name, f)...)
	s.restored = restoresDrift(f)
	s.rewritten = slices.Contains(p.desired.ReadyFromStatus, ao.ref)
	return s
}

// writeObject records s in the plugin's result and carries it out, and says why the object does
// not protect after the call ("" when it does: as desired, written now, or an earlier version of
// the plugin's own that still stands because an update failed).
func (r *Runner) writeObject(ctx context.Context, p *planned, ao *applyObject, s objectStep) string {
	p.res.Waiting = append(p.res.Waiting, s.waiting...)
	p.res.Warnings = append(p.res.Warnings, s.warnings...)
	if s.err != nil {
		p.res.Errors = append(p.res.Errors, s.err)
	}
	if s.unchanged {
		p.res.Unchanged = append(p.res.Unchanged, ao.ref)
	}
	if !s.send {
		return s.broken
	}
	name := p.plugin.Name()
	ao.restored, ao.rewritten = s.restored, s.rewritten
	// An object another writer may also create or delete under its name (Desired.Adopt) is not
	// brought back when it went since it was read: that writer's DELETE and its next create of the
	// name must both succeed. The plugin's own objects are: they protect.
	contested := s.cur != nil && slices.Contains(p.desired.Adopt, ao.ref)
	restoreFailed := false
	if len(s.foreign) > 0 {
		switch err := r.restore(ctx, p, s.cur, s.body); {
		case contested && apierrors.IsNotFound(err):
			return gone(p, ao)
		case err != nil:
			p.res.Errors = append(p.res.Errors, fmt.Errorf("plugin %s: restoring %s: %w", name, ao.ref, err))
			restoreFailed = true
		}
	}
	body := s.body
	if contested {
		body = sameObject(body, s.cur)
	}
	wctx, warnings := collectWarnings(ctx)
	err := r.Client.Apply(wctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: body}),
		client.FieldOwner(plugin.FieldManager(name)), client.ForceOwnership)
	p.res.Warnings = append(p.res.Warnings, warnings()...)
	switch {
	case contested && apierrors.IsConflict(err):
		return gone(p, ao)
	case err != nil:
		p.res.Errors = append(p.res.Errors, fmt.Errorf("plugin %s: applying %s: %w", name, ao.ref, err))
	}
	if err == nil {
		if s.cur == nil {
			p.res.Created = append(p.res.Created, ao.ref)
		} else {
			p.res.Updated = append(p.res.Updated, ao.ref)
		}
	}
	return afterWrite(s.cur, name, s.foreign, restoreFailed, ao.restored, err)
}

// gone records that the object the runner read was deleted or replaced before its write reached
// the API server, and says so as the reason it does not protect: nothing was written, and the
// next call, which the deletion's event starts, decides on what stands.
func gone(p *planned, ao *applyObject) string {
	p.res.Waiting = append(p.res.Waiting, fmt.Sprintf("%s was deleted or replaced since it was read; the next call decides on what stands", ao.ref))
	return "was deleted or replaced since it was read"
}

// sameObject is body for an update of cur: with cur's UID, so that the API server refuses the apply
// (Conflict) when cur was deleted or replaced since it was read, instead of creating the object
// anew as server-side apply does for a missing one. An apply racing another writer's DELETE of a
// contested object (Desired.Adopt) would otherwise bring it back, and that writer's next create of
// the name would fail.
// The UID is no field a manager owns: it changes nothing of the object's managedFields.
func sameObject(body map[string]any, cur client.Object) map[string]any {
	if cur == nil || cur.GetUID() == "" {
		return body
	}
	out := maps.Clone(body)
	md, _ := body["metadata"].(map[string]any)
	md = maps.Clone(md)
	if md == nil {
		md = map[string]any{}
	}
	md["uid"] = string(cur.GetUID())
	out["metadata"] = md
	return out
}

// afterWrite says why an object does not protect after the runner wrote it ("" when it does).
func afterWrite(cur client.Object, pluginName string, foreign map[string][]string, restoreFailed, restored bool, applyErr error) string {
	switch {
	case restoreFailed:
		return "was changed by another writer (" + describeForeign(foreign) + ") and restoring it failed"
	case applyErr == nil:
		return ""
	case cur == nil:
		return "does not exist and creating it failed"
	case len(foreign) > 0:
		return "" // restored to exactly the desired spec; only taking ownership back failed
	case restored:
		// A value changed under the plugin's own field manager: only the failed apply would undo it.
		return "was changed by a writer using the plugin's own field manager and restoring it failed"
	case plugin.IsManagedBy(cur.GetLabels(), pluginName):
		return "" // the earlier version of the plugin's own still protects
	}
	return "could not be taken over"
}

// restore replaces cur's spec by exactly the desired one. Server-side apply cannot do it: it
// never removes fields another manager owns, such as a selector or targetRefs added to a
// policy. An Update with cur's resourceVersion as precondition can, and it keeps the object in
// place throughout; deleting and re-creating it (with a UID precondition) would leave the
// namespace without the policy in between, and with no ALLOW policy ztunnel admits every caller.
// A stale resourceVersion fails with a conflict and the next reconcile tries again.
func (r *Runner) restore(ctx context.Context, p *planned, cur client.Object, body map[string]any) error {
	u, err := ssa.RestoredBody(cur, body)
	if err != nil {
		return err
	}
	wctx, warnings := collectWarnings(ctx)
	err = r.Client.Update(wctx, u, client.FieldOwner(plugin.FieldManager(p.plugin.Name())))
	p.res.Warnings = append(p.res.Warnings, warnings()...)
	return err
}
