package runner

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/ssa"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// This file decides whether an object protects as it stands, and whether writing it undoes
// someone else's change, from what package ssa reads of its managedFields. Intact means its
// meaning, not its bytes: every field of the apply body holds its value, and nobody but the
// plugin's own apply holds content the plugin does not set (see ssa.ForeignFields).

// asItIs says why an observed object that is not written in this call does not protect ("" when
// it does): it protects while it carries the plugin's labels and no other writer's content (spec
// fields, data keys, labels and annotations of Istio's domain).
func asItIs(cur client.Object, pluginName string) string {
	if !plugin.IsManagedBy(cur.GetLabels(), pluginName) {
		return "exists and was made by " + (&ConflictError{ManagedBy: managedBy(cur.GetLabels())}).who()
	}
	if f := ssa.ForeignFields(cur, plugin.FieldManager(pluginName), nil); len(f) > 0 {
		return "was changed by another writer (" + describeForeign(f) + ")"
	}
	return ""
}

// matches reports whether cur holds every field of the apply body with the same value.
func matches(cur client.Object, body map[string]any) bool {
	held, _, _ := ssa.Holds(cur, body)
	return held
}

// facts are what the object phase knows of an observed object before it writes body over it,
// each computed once: whether it is unchanged, the warnings and the drift decision read them.
type facts struct {
	// foreign: the managers that hold content the body does not set (ssa.ForeignFields).
	foreign map[string][]string
	// others: foreign without the plugin's own manager.
	others map[string][]string
	// held: cur holds every field of the body with the same value (matches).
	held bool
	// The rest is known only of a changed object (changed): nothing reads it of an unchanged one.
	// earlier: cur was written from another body of the plugin's (earlierBody).
	earlier bool
	// ownHash: the observed desired-hash annotation is body's, or names no earlier body of the
	// plugin's (a forged one): a change under the plugin's own manager is then someone else's.
	ownHash bool
	// missing: meaning metadata the body sets and cur lacks (ssa.MissingMeaning).
	missing []string
	// applyExtras: content an Apply under the plugin's own manager holds that the body does not
	// set (ssa.ApplyExtras); extras: the same of any of its entries (ssa.Extras).
	applyExtras, extras []string
	// differs: cur differs from the body without missing (as far as ssa.Holds could tell), first
	// at the path differsAt.
	differs   bool
	differsAt string
}

// factsOf computes the facts of cur against body, the plugin's apply body, that tell whether it
// is unchanged.
func factsOf(cur client.Object, pluginName string, body map[string]any) facts {
	manager := plugin.FieldManager(pluginName)
	held, _, _ := ssa.Holds(cur, body)
	foreign := ssa.ForeignFields(cur, manager, body)
	return facts{foreign: foreign, others: withoutManager(foreign, manager), held: held}
}

// changed adds to f the facts the warnings and the drift decision read of an object that is
// written.
func (f facts) changed(cur client.Object, pluginName string, body map[string]any) facts {
	manager := plugin.FieldManager(pluginName)
	want := (&unstructured.Unstructured{Object: body}).GetAnnotations()[plugin.DesiredHashAnnotation]
	have := cur.GetAnnotations()[plugin.DesiredHashAnnotation]
	f.earlier = earlierBody(cur, pluginName, body)
	// Written from another body, or never by the plugin (no hash): unless the hash is forged.
	f.ownHash = want != "" && (have == want || (have != "" && !f.earlier))
	f.missing = ssa.MissingMeaning(cur, body)
	f.applyExtras = ssa.ApplyExtras(cur, manager, body)
	f.extras = ssa.Extras(cur, manager, body)
	if held, at, err := ssa.Holds(cur, ssa.WithoutMeaning(body, f.missing)); err == nil && !held {
		f.differs, f.differsAt = true, strings.TrimPrefix(at, ".")
	}
	return f
}

// ownManagerWarnings are the warnings for changes that name no other field manager: meaning
// metadata the body sets and someone removed (a removal leaves no manager behind), and content an
// Apply under the plugin's own manager added or changed: the extras, and, when no other writer is
// reported for the object, the first other value that differs from the body. There are none when
// the observed object was written from another body than the one about to be sent (the
// desired-hash annotation differs): the plugin itself may then have set or left out those fields,
// and the apply changes them silently, as any change of the plugin's wish.
func ownManagerWarnings(ref plugin.Ref, pluginName string, f facts) []string {
	if !f.ownHash {
		return nil
	}
	var out []string
	if len(f.missing) > 0 {
		out = append(out, fmt.Sprintf("%s lost %s to another writer (the API server records no field manager for a removal); restoring the desired spec",
			ref, strings.Join(f.missing, ", ")))
	}
	paths := slices.Clone(f.applyExtras)
	if len(f.others) == 0 && f.differs {
		paths = append(paths, f.differsAt)
	}
	if len(paths) > 0 {
		out = append(out, fmt.Sprintf("%s was changed by a writer using the plugin's own field manager %s (set %s); restoring the desired spec",
			ref, plugin.FieldManager(pluginName), strings.Join(paths, ", ")))
	}
	return out
}

// restoresDrift reports whether writing the body over the object undoes another writer's change,
// rather than carrying a change of the plugin's own wish: another manager holds content fields,
// or, while it was written from the same body (its desired-hash annotation is the body's, or
// missing, which the plugin never leaves), a value differs from the body or the plugin's own
// manager holds content the body does not set. When the desired-hash differs, the plugin's
// previous body may itself have set those, and the write is an ordinary update (a config change,
// a new owner). The plugin's own restoring Update left without its apply (the apply failed) holds
// only what the body sets, with its values: no drift.
func restoresDrift(f facts) bool {
	if len(f.others) > 0 {
		return true
	}
	if f.earlier {
		return false
	}
	return !f.held || len(f.extras) > 0
}

// earlierBody reports whether cur was written from another body of the plugin's than the one about
// to be sent: its desired-hash annotation is set, differs from body's, and is the hash of what the
// plugin's Apply entry holds (ssa.AppliedBody). A desired-hash that is not the hash of that content
// was set by someone writing under the plugin's manager name, and their change is drift like any
// other: restored, reported, and routing withdrawn for the call. The annotation alone proves
// nothing, since whoever may patch the object can write it.
func earlierBody(cur client.Object, pluginName string, body map[string]any) bool {
	want := (&unstructured.Unstructured{Object: body}).GetAnnotations()[plugin.DesiredHashAnnotation]
	have := cur.GetAnnotations()[plugin.DesiredHashAnnotation]
	if have == "" || have == want {
		return false
	}
	applied, ok := ssa.AppliedBody(cur, plugin.FieldManager(pluginName))
	if !ok {
		return false
	}
	// Typed objects read from a cache may lack their type; the body names it.
	applied["apiVersion"], applied["kind"] = body["apiVersion"], body["kind"]
	u := &unstructured.Unstructured{Object: applied}
	ann := u.GetAnnotations()
	delete(ann, plugin.DesiredHashAnnotation)
	if md, ok := applied["metadata"].(map[string]any); ok && len(ann) == 0 {
		delete(md, "annotations")
	} else if len(ann) > 0 {
		u.SetAnnotations(ann)
	}
	h, err := ssa.DesiredHash(applied)
	return err == nil && h == have
}

// withoutManager is foreign without the named manager's entry.
func withoutManager(foreign map[string][]string, manager string) map[string][]string {
	out := maps.Clone(foreign)
	delete(out, manager)
	return out
}

// describeForeign says which other writers hold which spec fields, for a warning.
func describeForeign(foreign map[string][]string) string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(foreign)) {
		who := m
		if who == "" {
			who = "an unnamed field manager"
		}
		parts = append(parts, fmt.Sprintf("%s set %s", who, strings.Join(foreign[m], ", ")))
	}
	return strings.Join(parts, "; ")
}

// managedBy is what an object's labels say about who made it ("" when unmarked).
func managedBy(labels map[string]string) string {
	if labels[plugin.ManagedByLabel] == "" {
		return ""
	}
	if labels[plugin.PluginLabel] != "" {
		return labels[plugin.ManagedByLabel] + " plugin " + labels[plugin.PluginLabel]
	}
	return labels[plugin.ManagedByLabel]
}
