package labelowners

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/internal/ssa"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// Owners maps a plugin's name to a set of namespace label keys.
type Owners map[string]map[string]bool

// Add puts key into the set of the named plugin.
func (o Owners) Add(pluginName, key string) {
	if o[pluginName] == nil {
		o[pluginName] = map[string]bool{}
	}
	o[pluginName][key] = true
}

// Ledger is what a namespace's managedFields say about the labels the runner owns. Ownership
// comes from managedFields alone: a key is the runner's while LabelFieldManager owns it (or, on a
// namespace a release before the shared write labelled, the plugin's own field manager). The
// LabelOwnersAnnotation only says whose a key the shared manager owns is, and is believed only
// while LabelFieldManager owns the annotation too: any other writer that changes it (an Update, a
// patch, a forced apply) takes that ownership, so a changed attribution is never read as ours.
type Ledger struct {
	// Shared are the keys LabelFieldManager owns.
	Shared map[string]bool
	// Named are, per plugin, the shared keys the annotation names it for; empty unless Annotated.
	Named Owners
	// Legacy are, per plugin, the keys FieldManager(plugin) still owns from a release before the
	// shared write.
	Legacy Owners
	// Annotated is whether LabelFieldManager owns the annotation (whatever its value).
	Annotated bool
}

// runnerEntry reports whether e is one of the runner's label writes: an apply (never an Update,
// which anyone could send under our name and which the runner never sends) to the object itself.
func runnerEntry(e metav1.ManagedFieldsEntry) bool {
	return e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.FieldsV1 != nil &&
		(e.Manager == plugin.LabelFieldManager || strings.HasPrefix(e.Manager, plugin.FieldManagerPrefix))
}

// Read reads obj's managedFields and LabelOwnersAnnotation. It fails only when one of the
// runner's own managedFields entries cannot be decoded: then nothing it owns is known.
func Read(obj metav1.Object) (Ledger, error) {
	l := Ledger{Shared: map[string]bool{}, Named: Owners{}, Legacy: Owners{}}
	for _, e := range obj.GetManagedFields() {
		if !runnerEntry(e) {
			continue
		}
		labels, annotations, err := ssa.ManagedLabelKeys(e)
		if err != nil {
			return Ledger{}, err
		}
		if e.Manager == plugin.LabelFieldManager {
			for _, k := range labels {
				l.Shared[k] = true
			}
			l.Annotated = l.Annotated || slices.Contains(annotations, plugin.LabelOwnersAnnotation)
			continue
		}
		name := strings.TrimPrefix(e.Manager, plugin.FieldManagerPrefix)
		for _, k := range labels {
			l.Legacy.Add(name, k)
		}
	}
	if l.Annotated {
		for name, keys := range decode(obj.GetAnnotations()[plugin.LabelOwnersAnnotation]) {
			for _, k := range keys {
				if l.Shared[k] { // the annotation never grants a key the shared manager does not own
					l.Named.Add(name, k)
				}
			}
		}
	}
	return l, nil
}

// decode reads the annotation; a value that is not the runner's encoding attributes nothing.
func decode(value string) map[string][]string {
	var out map[string][]string
	if value == "" || json.Unmarshal([]byte(value), &out) != nil {
		return nil
	}
	return out
}

// Encode is the annotation for owners: keys sorted, plugins with no key left out, "" when there
// is none. encoding/json sorts the map, so equal owners give equal bytes.
func Encode(owners Owners) string {
	out := map[string][]string{}
	for name, keys := range owners {
		if len(keys) > 0 {
			out[name] = slices.Sorted(maps.Keys(keys))
		}
	}
	if len(out) == 0 {
		return ""
	}
	data, _ := json.Marshal(out) // strings only: cannot fail
	return string(data)
}

// Managers maps each label key of obj to the field managers that own it, sorted. A key
// LabelFieldManager owns is reported under the field manager of each plugin the annotation names
// it for (FieldManager), as if that plugin had written it alone, so plugins tell their own labels
// from other writers' without knowing how the runner writes them; a shared key no plugin is named
// for is reported under LabelFieldManager itself, like any other writer's.
func Managers(obj metav1.Object) map[string][]string {
	l, err := Read(obj)
	attributed := map[string][]string{}
	for name, keys := range l.Named {
		for k := range keys {
			attributed[k] = append(attributed[k], plugin.FieldManager(name))
		}
	}
	out := map[string][]string{}
	add := func(key, manager string) {
		if !slices.Contains(out[key], manager) {
			out[key] = append(out[key], manager)
		}
	}
	for _, e := range obj.GetManagedFields() {
		if e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		labels, _, decodeErr := ssa.ManagedLabelKeys(e)
		if decodeErr != nil {
			continue
		}
		for _, k := range labels {
			if e.Manager == plugin.LabelFieldManager && e.Operation == metav1.ManagedFieldsOperationApply && err == nil && len(attributed[k]) > 0 {
				for _, m := range attributed[k] {
					add(k, m)
				}
				continue
			}
			add(k, e.Manager)
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}
