package plan

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	psaapi "k8s.io/pod-security-admission/api"
	"sigs.k8s.io/yaml"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Actions of an ObjectChange or a LabelChange.
const (
	actionCreate = "create"
	actionUpdate = "update"
	actionDelete = "delete"
	actionAdd    = "add"
	actionChange = "change"
	actionRemove = "remove"
)

// objectChanges lists the objects the Result says the apply writes, sorted by kind and name.
func objectChanges(res *dryRun, diff bool) []ObjectChange {
	var out []ObjectChange
	for _, r := range res.Plugins {
		for action, refs := range map[string][]plugin.Ref{actionCreate: r.Created, actionUpdate: r.Updated, actionDelete: r.Deleted} {
			for _, ref := range refs {
				c := ObjectChange{Action: action, Kind: ref.GroupKind.String(), Name: ref.Name, Plugin: r.Plugin}
				if slices.Contains(r.Warnings, adoptedWarning(ref)) {
					c.Note = "adopted from another writer"
				}
				if diff {
					c.Diff = objectDiff(res, ref)
				}
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// adoptedWarning is the runner's warning for an adopted object (runner/runner.go, applyObjects).
func adoptedWarning(ref plugin.Ref) string {
	return fmt.Sprintf("adopted %s, which another writer made", ref)
}

// objectDiff is a unified diff of the object before the run and after its last dry-run write.
func objectDiff(res *dryRun, ref plugin.Ref) string {
	var before, after *unstructured.Unstructured
	found := false
	for _, w := range res.DryRun {
		if w.Namespace == "" || w.Ref() != ref {
			continue
		}
		if !found {
			before, found = w.Before, true
		}
		after = w.After
	}
	d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: lines(cleanYAML(before)), B: lines(cleanYAML(after)),
		FromFile: ref.String() + " (cluster)", ToFile: ref.String() + " (planned)", Context: 3,
	})
	return d
}

// lines splits s for difflib; an absent object has no lines, not one empty line.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return difflib.SplitLines(s)
}

// cleanYAML is the object's YAML without what the server keeps for itself (managedFields,
// uid, resourceVersion, timestamps, status), which would only be noise in a diff.
func cleanYAML(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	c := u.DeepCopy()
	for _, f := range []string{"managedFields", "uid", "resourceVersion", "creationTimestamp", "generation"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(c.Object, "status")
	data, err := yaml.Marshal(c.Object)
	if err != nil {
		return fmt.Sprintf("# %v\n", err)
	}
	return string(data)
}

// namespaceBeforeAfter is the namespace before the run and after its last dry-run write; ok is
// false when the run did not write it.
func namespaceBeforeAfter(res *dryRun) (before, after *unstructured.Unstructured, ok bool) {
	for _, w := range res.DryRun {
		if w.GVK.Group != "" || w.GVK.Kind != "Namespace" {
			continue
		}
		if !ok {
			before, ok = w.Before, true
		}
		after = w.After
	}
	return before, after, ok
}

// labelChanges compares the namespace's labels before and after the run, each attributed to the
// plugin that set or removed it.
func labelChanges(res *dryRun) []LabelChange {
	before, after, ok := namespaceBeforeAfter(res)
	if !ok {
		return nil
	}
	owner := map[string]string{}
	for _, r := range res.Plugins {
		for _, k := range append(append([]string(nil), r.LabelsRemoved...), r.LabelsSet...) {
			owner[k] = r.Plugin
		}
	}
	old, cur := before.GetLabels(), after.GetLabels()
	keys := slices.Sorted(maps.Keys(mergeKeys(old, cur)))
	var out []LabelChange
	for _, k := range keys {
		o, hadOld := old[k]
		n, hasNew := cur[k]
		c := LabelChange{Key: k, Plugin: owner[k]}
		switch {
		case !hadOld:
			c.Action, c.New = actionAdd, &n
		case !hasNew:
			c.Action, c.Old = actionRemove, &o
		case o != n:
			c.Action, c.Old, c.New = actionChange, &o, &n
		default:
			continue
		}
		out = append(out, c)
	}
	return out
}

func mergeKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// secondWriters reports labels the plan changes that another field manager also owns: the
// runner forces its value, and that writer may set its own back on its next reconcile.
func secondWriters(res *dryRun, labels []LabelChange) []Finding {
	before, _, ok := namespaceBeforeAfter(res)
	if !ok || before == nil {
		return nil
	}
	var out []Finding
	for _, c := range labels {
		if c.Action != actionChange {
			continue
		}
		others := foreignManagers(before, c.Key)
		if len(others) == 0 {
			continue
		}
		out = append(out, Finding{Plugin: c.Plugin, Message: fmt.Sprintf(
			"namespace label %s=%q is also set by field manager %s; the apply forces %q, and that writer may set its value back",
			c.Key, *c.Old, strings.Join(others, ", "), *c.New)})
	}
	return out
}

// foreignManagers names the field managers other than the runner's that own the label key.
func foreignManagers(u *unstructured.Unstructured, key string) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		if e.Subresource != "" || e.FieldsV1 == nil || e.Manager == plugin.LabelFieldManager || strings.HasPrefix(e.Manager, plugin.FieldManagerPrefix) {
			continue
		}
		if strings.Contains(e.FieldsV1.GetRawString(), `"f:`+key+`"`) && !slices.Contains(out, e.Manager) {
			out = append(out, e.Manager)
		}
	}
	sort.Strings(out)
	return out
}

// enforceChange reports the namespace's enforce level before and after, when the plan tightens it.
func enforceChange(res *dryRun) (before, after config.LevelVersion, tighter bool) {
	b, a, ok := namespaceBeforeAfter(res)
	if !ok || b == nil || a == nil {
		return before, after, false
	}
	before, after = enforceOf(b.GetLabels()), enforceOf(a.GetLabels())
	return before, after, psaapi.CompareLevels(after.Level, before.Level) > 0
}

// enforceOf reads the enforce level as Pod Security does: missing means privileged.
func enforceOf(labels map[string]string) config.LevelVersion {
	defaults := psaapi.Policy{Enforce: psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()}}
	p, _ := psaapi.PolicyToEvaluate(labels, defaults)
	return config.LevelVersion{Level: p.Enforce.Level, Version: p.Enforce.Version.String()}
}

// warnings are the plugins' and the API server's warnings, once each, without the adoption
// notes already shown on the objects.
func warnings(res *dryRun) []Finding {
	var out []Finding
	seen := map[Finding]bool{}
	for _, f := range pluginFindings(res, func(r runner.PluginResult) []string { return r.Warnings }) {
		if seen[f] || strings.HasPrefix(f.Message, "adopted ") {
			continue
		}
		seen[f] = true
		out = append(out, f)
	}
	return out
}

// rejected reports an API server answer that a real write would get too: admission or
// validation said no.
func rejected(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}

// dryRunUnsupported reports the API server's refusal to send a dry run to an admission webhook
// whose sideEffects are not None or NoneOnDryRun: a 400 whose reason k8s.io/apiserver words as
// "admission webhook %q does not support dry run" (pkg/admission/plugin/webhook/errors,
// NewDryRunUnsupportedErr).
func dryRunUnsupported(err error) bool {
	return apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "does not support dry run")
}

// rewritten names the objects the plan updates or deletes: readiness does not judge what the
// apply replaces anyway.
func rewritten(objects []ObjectChange) map[string]bool {
	out := map[string]bool{}
	for _, o := range objects {
		if o.Action != actionCreate {
			out[o.Kind+"/"+o.Name] = true
		}
	}
	return out
}
