package runner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/labelowners"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// Every plugin's namespace labels go out in one server-side apply under LabelFieldManager, with
// the LabelOwnersAnnotation saying whose each label is (see package labelowners). One write keeps a
// namespace at the profiles controller's own cost (one namespace update per reconcile), and it is
// all or nothing: when it fails, the namespace keeps every label it had, so a label gated on its
// protection can never get ahead of it. Server-side apply still removes a label no plugin wants
// any more (it leaves the applied set) and keeps every other writer's.

// labelWrite is what the call's namespace-label write leaves.
type labelWrite struct {
	// labels are exactly the labels LabelFieldManager owns after the write.
	labels map[string]string
	// owners (plugin -> keys) is the annotation's content; annotation its encoding.
	owners     labelowners.Owners
	annotation string
	// apply: the write differs from what LabelFieldManager owns now.
	apply bool
	// release lists the plugins whose own field manager, from a release before the shared write,
	// still owns labels: once the shared apply co-owns what stays, an empty apply under that
	// manager lets go of it, and removes what nobody else owns.
	release []string
	// set and removed are, per deciding plugin, the keys its labels change by, for its Result.
	set, removed map[string][]string
}

// planLabels decides the write. want holds the labels of the plugins that decide in this call;
// every other label the runner owns stays as it is: a failed plugin's (nothing of it is touched),
// a plugin's the runner no longer runs, and, in the withdraw phase, the other plugins'. Labels a
// running plugin's own field manager still owns from an earlier release are taken over, unless
// the plugin failed. A label LabelFieldManager owns for no plugin is released.
func planLabels(ns *corev1.Namespace, own labelOwners, plans []*planned, want map[string]map[string]string) labelWrite {
	w := labelWrite{labels: map[string]string{}, owners: labelowners.Owners{},
		set: map[string][]string{}, removed: map[string][]string{}}
	put := func(pluginName, key, value string) {
		if cur, taken := w.labels[key]; taken && cur != value {
			return // an earlier decision holds the key (refuseLabelClashes reports real clashes)
		}
		w.labels[key] = value
		w.owners.Add(pluginName, key)
	}
	keep := func(pluginName, key string) {
		if v, ok := ns.Labels[key]; ok {
			put(pluginName, key, v)
		}
	}
	for _, p := range plans {
		labels := want[p.plugin.Name()]
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			put(p.plugin.Name(), k, labels[k])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(own.byPlugin)) {
		if _, deciding := want[name]; !deciding {
			for _, k := range slices.Sorted(maps.Keys(own.byPlugin[name])) {
				keep(name, k)
			}
		}
	}
	for _, p := range plans {
		name := p.plugin.Name()
		if p.failed || len(own.Legacy[name]) == 0 {
			continue
		}
		w.release = append(w.release, name)
		if _, deciding := want[name]; !deciding {
			for _, k := range slices.Sorted(maps.Keys(own.Legacy[name])) {
				keep(name, k)
			}
		}
	}
	w.annotation = labelowners.Encode(w.owners)
	w.apply = !w.matches(ns, own)
	for name, labels := range want {
		owned := own.owned(name)
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			if cur, ok := ns.Labels[k]; !ok || cur != labels[k] || !owned[k] {
				w.set[name] = append(w.set[name], k)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(owned)) {
			if _, kept := labels[k]; !kept {
				w.removed[name] = append(w.removed[name], k)
			}
		}
	}
	return w
}

// matches reports whether LabelFieldManager already owns exactly w's labels with w's values and
// the annotation w would write.
func (w labelWrite) matches(ns *corev1.Namespace, own labelOwners) bool {
	if len(w.labels) != len(own.Shared) {
		return false
	}
	for k, v := range w.labels {
		if cur, ok := ns.Labels[k]; !ok || cur != v || !own.Shared[k] {
			return false
		}
	}
	if w.annotation == "" {
		return !own.Annotated
	}
	return own.Annotated && ns.Annotations[plugin.LabelOwnersAnnotation] == w.annotation
}

// changed lists the plans whose labels the write changes, in plugin order.
func (w labelWrite) changed(plans []*planned) []*planned {
	var out []*planned
	for _, p := range plans {
		if len(w.set[p.plugin.Name()])+len(w.removed[p.plugin.Name()]) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// warned is who gets the API server's warnings on the write. The one built-in admission that warns
// on a namespace update is PodSecurity, and only when the enforce level or version changes
// (k8s.io/pod-security-admission/admission/admission.go, ValidateNamespace): its warnings go to the
// plugins whose change is that. Any other warning goes to every plugin the write changes.
func (w labelWrite) warned(changed []*planned) []*planned {
	var enforce []*planned
	for _, p := range changed {
		keys := slices.Concat(w.set[p.plugin.Name()], w.removed[p.plugin.Name()])
		if slices.Contains(keys, psaapi.EnforceLevelLabel) || slices.Contains(keys, psaapi.EnforceVersionLabel) {
			enforce = append(enforce, p)
		}
	}
	if len(enforce) > 0 {
		return enforce
	}
	return changed
}

// writeLabels sends the call's namespace-label write, if anything differs, and then releases the
// per-plugin field managers of an earlier release. It reports whether the labels are as planned.
// The write's errors go to every plugin whose labels it changes (to the Result when it changes
// none of them: it only repairs the runner's own bookkeeping); its API warnings, see warned.
func (r *Runner) writeLabels(ctx context.Context, ns *corev1.Namespace, plans []*planned, want map[string]map[string]string, res *Result) bool {
	own := readLabelOwners(ns, pluginsOf(plans))
	if own.err != nil {
		var deciding []*planned
		for _, p := range plans {
			if _, ok := want[p.plugin.Name()]; ok {
				deciding = append(deciding, p)
			}
		}
		reportLabelError(res, deciding, fmt.Errorf("namespace %s: %w", ns.Name, own.err))
		return false
	}
	w := planLabels(ns, own, plans, want)
	changed := w.changed(plans)
	if w.apply {
		ac := corev1ac.Namespace(ns.Name).WithLabels(w.labels)
		if ns.UID != "" {
			// The namespace read, not one of its name: server-side apply would create a namespace
			// deleted since it was read, and the controller's ServiceAccount may create namespaces.
			ac = ac.WithUID(ns.UID)
		}
		if w.annotation != "" {
			ac = ac.WithAnnotations(map[string]string{plugin.LabelOwnersAnnotation: w.annotation})
		}
		wctx, warnings := collectWarnings(ctx)
		err := r.Client.Apply(wctx, ac, client.FieldOwner(plugin.LabelFieldManager), client.ForceOwnership)
		for _, p := range w.warned(changed) {
			p.res.Warnings = append(p.res.Warnings, warnings()...)
		}
		if err != nil {
			reportLabelError(res, changed, fmt.Errorf("applying labels of namespace %s: %w", ns.Name, err))
			return false
		}
	}
	released := r.releaseLegacy(ctx, ns, plans, own, w.release)
	for _, p := range plans {
		name := p.plugin.Name()
		p.res.LabelsSet = append(p.res.LabelsSet, w.set[name]...)
		if released[name] {
			p.res.LabelsRemoved = append(p.res.LabelsRemoved, w.removed[name]...)
		}
	}
	return !slices.Contains(slices.Collect(maps.Values(released)), false)
}

// releaseLegacy lets each named plugin's own field manager go of the namespace's labels with an
// apply that names none; the shared apply before it co-owns those that stay. The result maps every
// plugin of plans to whether it has nothing left to release.
func (r *Runner) releaseLegacy(ctx context.Context, ns *corev1.Namespace, plans []*planned, own labelOwners, names []string) map[string]bool {
	out := map[string]bool{}
	for _, p := range plans {
		out[p.plugin.Name()] = true
	}
	for _, p := range plans {
		name := p.plugin.Name()
		if !slices.Contains(names, name) {
			continue
		}
		ac := corev1ac.Namespace(ns.Name)
		if ns.UID != "" {
			ac = ac.WithUID(ns.UID) // as in writeLabels: never a namespace anew
		}
		err := r.Client.Apply(ctx, ac, client.FieldOwner(plugin.FieldManager(name)), client.ForceOwnership)
		if err != nil {
			out[name] = false
			p.res.Errors = append(p.res.Errors, fmt.Errorf("plugin %s: releasing the labels of namespace %s from field manager %s: %w",
				name, ns.Name, plugin.FieldManager(name), err))
			continue
		}
		p.res.Warnings = append(p.res.Warnings, fmt.Sprintf("namespace labels %s moved from field manager %s to %s (once, on upgrade)",
			strings.Join(slices.Sorted(maps.Keys(own.Legacy[name])), ", "), plugin.FieldManager(name), plugin.LabelFieldManager))
	}
	return out
}

// reportLabelError records err for each plugin of plans, or for the call when plans is empty.
func reportLabelError(res *Result, plans []*planned, err error) {
	if len(plans) == 0 {
		res.Errors = append(res.Errors, err)
		return
	}
	for _, p := range plans {
		p.res.Errors = append(p.res.Errors, fmt.Errorf("plugin %s: %w", p.plugin.Name(), err))
	}
}

func pluginsOf(plans []*planned) []plugin.Plugin {
	out := make([]plugin.Plugin, len(plans))
	for i, p := range plans {
		out[i] = p.plugin
	}
	return out
}
