package runner

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/ssa"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// labelOwners says which plugin owns each namespace label the runner owns. Ownership comes from
// managedFields alone: a key is the runner's while LabelFieldManager owns it (or, on a namespace
// a release before the shared write labelled, the plugin's own field manager). The
// LabelOwnersAnnotation only says whose a key the shared manager owns is, and is believed only
// while LabelFieldManager owns the annotation too: any other writer that changes it (an Update,
// a patch, a forced apply) takes that ownership, so a changed attribution is never read as ours.
type labelOwners struct {
	shared   map[string]bool            // keys LabelFieldManager owns
	byPlugin map[string]map[string]bool // plugin -> keys LabelFieldManager owns for it
	legacy   map[string]map[string]bool // plugin -> keys FieldManager(plugin) still owns
	// unattributed are shared keys no plugin is named for: nobody decides for them, so the next
	// write releases them unless a plugin wants them.
	unattributed map[string]bool
	// annotated is whether LabelFieldManager owns the annotation (whatever its value).
	annotated bool
	// err: the runner's own managedFields could not be read; no label is written.
	err error
}

// runnerEntry reports whether e is one of the runner's label writes: an apply (never an Update,
// which anyone could send under our name and which the runner never sends) to the object itself.
func runnerEntry(e metav1.ManagedFieldsEntry) bool {
	return e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.FieldsV1 != nil &&
		(e.Manager == plugin.LabelFieldManager || strings.HasPrefix(e.Manager, plugin.FieldManagerPrefix))
}

// readLabelOwners reads obj's managedFields and LabelOwnersAnnotation. A shared key the annotation
// does not attribute goes to the data-plane plugins among plugins that declare it (see
// DataPlane), so a lost annotation never lets a data-plane label go while pods depend on it.
func readLabelOwners(obj client.Object, plugins []plugin.Plugin) labelOwners {
	o := labelOwners{shared: map[string]bool{}, byPlugin: map[string]map[string]bool{}, legacy: map[string]map[string]bool{}, unattributed: map[string]bool{}}
	for _, e := range obj.GetManagedFields() {
		if !runnerEntry(e) {
			continue
		}
		labels, annotations, err := ssa.ManagedLabelKeys(e)
		if err != nil {
			o.err = err
			return o
		}
		if e.Manager == plugin.LabelFieldManager {
			for _, k := range labels {
				o.shared[k] = true
			}
			o.annotated = o.annotated || slices.Contains(annotations, plugin.LabelOwnersAnnotation)
			continue
		}
		name := strings.TrimPrefix(e.Manager, plugin.FieldManagerPrefix)
		for _, k := range labels {
			addKey(o.legacy, name, k)
		}
	}
	attributed := map[string]bool{}
	if o.annotated {
		for name, keys := range decodeLabelOwners(obj.GetAnnotations()[plugin.LabelOwnersAnnotation]) {
			for _, k := range keys {
				if o.shared[k] { // the annotation never grants a key the shared manager does not own
					addKey(o.byPlugin, name, k)
					attributed[k] = true
				}
			}
		}
	}
	for k := range o.shared {
		if attributed[k] {
			continue
		}
		claimed := false
		for _, p := range plugins {
			if dp, ok := p.(plugin.DataPlane); ok {
				if _, declared := dp.DataPlaneLabels()[k]; declared {
					addKey(o.byPlugin, p.Name(), k)
					claimed = true
				}
			}
		}
		if !claimed {
			o.unattributed[k] = true
		}
	}
	return o
}

func addKey(m map[string]map[string]bool, name, key string) {
	if m[name] == nil {
		m[name] = map[string]bool{}
	}
	m[name][key] = true
}

// owned is every label key the plugin owns, through either manager.
func (o labelOwners) owned(pluginName string) map[string]bool {
	out := maps.Clone(o.byPlugin[pluginName])
	if out == nil {
		out = map[string]bool{}
	}
	maps.Copy(out, o.legacy[pluginName])
	return out
}

// decodeLabelOwners reads the annotation; a value that is not the runner's encoding attributes
// nothing.
func decodeLabelOwners(value string) map[string][]string {
	var out map[string][]string
	if value == "" || json.Unmarshal([]byte(value), &out) != nil {
		return nil
	}
	return out
}

// encodeLabelOwners is the annotation for owners (plugin -> keys): keys sorted, plugins with no
// key left out, "" when there is none. encoding/json sorts the map, so equal owners give equal bytes.
func encodeLabelOwners(owners map[string]map[string]bool) string {
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

// labelManagers maps each label key of obj to the field managers that own it, sorted. A key
// LabelFieldManager owns is reported under the field manager of each plugin it belongs to
// (FieldManager), as if that plugin had written it alone, so plugins tell their own labels from
// other writers' without knowing how the runner writes them; a shared key no plugin is named for
// is reported under LabelFieldManager itself, like any other writer's.
func labelManagers(obj client.Object) map[string][]string {
	own := readLabelOwners(obj, nil)
	attributed := map[string][]string{}
	for name, keys := range own.byPlugin {
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
		labels, _, err := ssa.ManagedLabelKeys(e)
		if err != nil {
			continue
		}
		for _, k := range labels {
			if e.Manager == plugin.LabelFieldManager && e.Operation == metav1.ManagedFieldsOperationApply && own.err == nil && len(attributed[k]) > 0 {
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
