package runner

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// maxGenerations bounds the rounds of reading what a generation showed missing and generating
// again: each round reads names no earlier round read, and plugins want few names.
const maxGenerations = 4

// generate plans the plugins on obs. With an APIReader it then completes obs with what the Reader
// may not show (pods a decision needs, wanted objects the Reader lacks) and plans again on the
// completed state, until nothing new turns up, so every plugin decides on all of it. What it reads
// is judged as observe's objects are (disown), into cl.
func (r *Runner) generate(ctx context.Context, res *Result, profile *profilev1.Profile, ns *corev1.Namespace, obs plugin.Observed, notServed unserved, cl claims) ([]*planned, plugin.Observed, holds, error) {
	if r.APIReader == nil && len(r.Trimmed) > 0 {
		// Judged on trimmed objects, drift of their content would pass unseen.
		return nil, obs, holds{}, fmt.Errorf("runner: Trimmed lists %v, which the Reader shows trimmed, but APIReader is nil: nothing could read them in full", r.Trimmed)
	}
	read := reads{tried: map[plugin.Ref]bool{}, claims: cl}
	protect := finalized(r.Plugins, ns, profile)
	for round := 1; ; round++ {
		held := holdStanding(r.Plugins, ns, holdDataPlane(r.Plugins, ns, obs))
		obs.Held = held.all()
		t := plugin.Target{Namespace: ns.Name, Owner: profile.Spec.Owner.Name, Profile: profile, Observed: obs}
		plans := generateAll(r.Client.Scheme(), r.Plugins, res, t, notServed, protect)
		if r.APIReader == nil {
			warnStanding(plans, held)
			return plans, obs, held, nil
		}
		completed, added, err := r.complete(ctx, &read, plans, t, ns)
		if err != nil || !added {
			warnStanding(plans, held)
			return plans, obs, held, err
		}
		if round == maxGenerations {
			return nil, obs, held, fmt.Errorf("namespace %q: the plugins still want objects not read after %d generations", ns.Name, round)
		}
		obs = completed
		for i := range res.Plugins {
			res.Plugins[i] = PluginResult{Plugin: res.Plugins[i].Plugin}
		}
	}
}

// finalized are the objects that carry plugin.ProtectionFinalizer when the runner writes them
// for profile in ns: every object a data-plane label requires, in a namespace the Profile controls
// (garbage collection takes it with the Profile). Nil elsewhere, and for a preview (ns nil).
func finalized(plugins []plugin.Plugin, ns *corev1.Namespace, profile *profilev1.Profile) map[plugin.Ref]bool {
	if ns == nil || profile == nil || !controlledBy(ns, profile) {
		return nil
	}
	out := map[plugin.Ref]bool{}
	for _, p := range plugins {
		if dp, ok := p.(plugin.DataPlane); ok {
			for _, refs := range dp.DataPlaneLabels() {
				for _, ref := range refs {
					out[ref] = true
				}
			}
		}
	}
	return out
}

// controlledBy reports whether profile is ns's controller, so that deleting the Profile deletes
// the namespace, its pods and what protects them together.
func controlledBy(ns *corev1.Namespace, profile *profilev1.Profile) bool {
	c := metav1.GetControllerOf(ns)
	return c != nil && profile.UID != "" && c.UID == profile.UID
}

// planned is one plugin's generated state, decorated and keyed for the runner's phases.
type planned struct {
	plugin  plugin.Plugin
	res     *PluginResult
	desired plugin.Desired
	objects []applyObject
	failed  bool // generation failed: touch nothing of this plugin
}

// applyObject is one object a plugin wants: its apply body, and what the object phase made of it.
type applyObject struct {
	ref  plugin.Ref
	gvk  schema.GroupVersionKind
	data map[string]any // the apply body
	// broken says why the object does not protect after the object phase; "" when it does.
	broken string
	// restored: the object phase found another writer's change on the object and wrote the
	// desired one back (or tried to). What the data plane runs may still be the changed version
	// until the control plane has caught up (istiod programs a restored Gateway some time after
	// the write), so the routing labels that require the object wait for the next call.
	restored bool
	// rewritten: the object phase writes a change to an object whose readiness its plugin judged
	// from the observed status (Desired.ReadyFromStatus), which describes the version before the
	// write.
	rewritten bool
}

// generateAll runs every plugin's Generate and turns its objects into apply bodies; those named in
// protect carry plugin.ProtectionFinalizer (see finalized).
func generateAll(s *runtime.Scheme, plugins []plugin.Plugin, res *Result, t plugin.Target, notServed unserved, protect map[plugin.Ref]bool) []*planned {
	plans := make([]*planned, len(plugins))
	for i, p := range plugins {
		pl := &planned{plugin: p, res: &res.Plugins[i]}
		plans[i] = pl
		d, err := p.Generate(t)
		if err == nil {
			pl.desired = d
			pl.objects, err = decorate(s, p, t, d.Objects, protect)
		}
		if err != nil {
			pl.failed = true
			pl.res.Errors = append(pl.res.Errors, inputError{fmt.Errorf("plugin %s: %w", p.Name(), err)})
			continue
		}
		if err := wantsNotServed(pl.objects, notServed); err != nil {
			pl.failed = true
			pl.res.Errors = append(pl.res.Errors, fmt.Errorf("plugin %s: %w", p.Name(), err))
			continue
		}
		pl.res.Waiting = append(pl.res.Waiting, d.Waiting...)
		pl.res.Warnings = append(pl.res.Warnings, d.Warnings...)
		pl.res.Notes = append(pl.res.Notes, d.Notes...)
		pl.res.RequeueAfter = d.RequeueAfter
		for _, e := range d.Errors {
			pl.res.Errors = append(pl.res.Errors, inputError{fmt.Errorf("plugin %s: %w", p.Name(), e)})
		}
	}
	refuseLabelClashes(plans)
	warnSecondWriters(plans, t.Observed)
	return plans
}

// refuseLabelClashes stops two plugins from fighting over one namespace label: both would force
// their value on every reconcile. The earlier plugin keeps the key; the later one gets an error.
func refuseLabelClashes(plans []*planned) {
	type claim struct{ plugin, value string }
	claims := map[string]claim{}
	for _, p := range plans {
		if p.failed {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(p.desired.Labels)) {
			v := p.desired.Labels[k]
			c, taken := claims[k]
			if !taken {
				claims[k] = claim{p.plugin.Name(), v}
				continue
			}
			if c.value != v {
				p.res.Errors = append(p.res.Errors, inputError{fmt.Errorf("plugin %s: namespace label %s=%q clashes with plugin %s's %q; it is not applied",
					p.plugin.Name(), k, v, c.plugin, c.value)})
				p.desired.Labels = maps.Clone(p.desired.Labels)
				delete(p.desired.Labels, k)
			}
		}
	}
}
