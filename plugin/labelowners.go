package plugin

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// managedLabelKeys is the label and annotation keys one managedFields entry owns.
func managedLabelKeys(e metav1.ManagedFieldsEntry) (labels, annotations []string, err error) {
	var fields struct {
		Metadata struct {
			Labels      map[string]json.RawMessage `json:"f:labels"`
			Annotations map[string]json.RawMessage `json:"f:annotations"`
		} `json:"f:metadata"`
	}
	if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
		return nil, nil, fmt.Errorf("managedFields of %s: %w", e.Manager, err)
	}
	for k := range fields.Metadata.Labels {
		if key, ok := strings.CutPrefix(k, "f:"); ok {
			labels = append(labels, key)
		}
	}
	for k := range fields.Metadata.Annotations {
		if key, ok := strings.CutPrefix(k, "f:"); ok {
			annotations = append(annotations, key)
		}
	}
	return labels, annotations, nil
}

// runnerEntry reports whether e is one of the runner's label writes: an apply (never an Update,
// which anyone could send under our name and which the runner never sends) to the object itself.
func runnerEntry(e metav1.ManagedFieldsEntry) bool {
	return e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.FieldsV1 != nil &&
		(e.Manager == LabelFieldManager || strings.HasPrefix(e.Manager, FieldManagerPrefix))
}

// readLabelOwners reads obj's managedFields and LabelOwnersAnnotation. A shared key the annotation
// does not attribute goes to the data-plane plugins among plugins that declare it (see
// DataPlane), so a lost annotation never lets a data-plane label go while pods depend on it.
func readLabelOwners(obj client.Object, plugins []Plugin) labelOwners {
	o := labelOwners{shared: map[string]bool{}, byPlugin: map[string]map[string]bool{}, legacy: map[string]map[string]bool{}, unattributed: map[string]bool{}}
	for _, e := range obj.GetManagedFields() {
		if !runnerEntry(e) {
			continue
		}
		labels, annotations, err := managedLabelKeys(e)
		if err != nil {
			o.err = err
			return o
		}
		if e.Manager == LabelFieldManager {
			for _, k := range labels {
				o.shared[k] = true
			}
			o.annotated = o.annotated || slices.Contains(annotations, LabelOwnersAnnotation)
			continue
		}
		name := strings.TrimPrefix(e.Manager, FieldManagerPrefix)
		for _, k := range labels {
			addKey(o.legacy, name, k)
		}
	}
	attributed := map[string]bool{}
	if o.annotated {
		for name, keys := range decodeLabelOwners(obj.GetAnnotations()[LabelOwnersAnnotation]) {
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
			if dp, ok := p.(DataPlane); ok {
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
func (o labelOwners) owned(plugin string) map[string]bool {
	out := maps.Clone(o.byPlugin[plugin])
	if out == nil {
		out = map[string]bool{}
	}
	maps.Copy(out, o.legacy[plugin])
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
			attributed[k] = append(attributed[k], FieldManager(name))
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
		labels, _, err := managedLabelKeys(e)
		if err != nil {
			continue
		}
		for _, k := range labels {
			if e.Manager == LabelFieldManager && e.Operation == metav1.ManagedFieldsOperationApply && own.err == nil && len(attributed[k]) > 0 {
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
