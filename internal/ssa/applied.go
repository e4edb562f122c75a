package ssa

import (
	"bytes"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// AppliedBody is the body of manager's last Apply as obj shows it: obj's JSON form cut down to the
// fields that manager's Apply entry owns, which are exactly the fields that Apply sent (fields the
// API server defaults belong to nobody), with their values in obj, and obj's identity (apiVersion,
// kind, metadata.name and metadata.namespace, which managedFields never list). ok is false when
// manager has no single decodable Apply entry.
//
// The runner hashes it to tell its own earlier body from a forged one: whoever applies under the
// plugin's manager name with another desired-hash annotation writes a body whose hash is not that
// annotation, unless they compute it over their own body, which the admission guard is for.
func AppliedBody(obj metav1.Object, manager string) (map[string]any, bool) {
	var entry *metav1.ManagedFieldsEntry
	for i, e := range obj.GetManagedFields() {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" {
			continue
		}
		if entry != nil || e.FieldsV1 == nil {
			return nil, false
		}
		entry = &obj.GetManagedFields()[i]
	}
	if entry == nil {
		return nil, false
	}
	set := &fieldpath.Set{}
	if err := set.FromJSON(bytes.NewReader(entry.FieldsV1.GetRawBytes())); err != nil {
		return nil, false
	}
	m, err := ToMap(obj)
	if err != nil {
		return nil, false
	}
	out, _ := owned(m, set).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	for _, k := range []string{"apiVersion", "kind"} {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	md, _ := out["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		out["metadata"] = md
	}
	md["name"] = obj.GetName()
	if obj.GetNamespace() != "" {
		md["namespace"] = obj.GetNamespace()
	}
	return out, true
}

// owned is node cut down to what set owns: a member is kept whole, a child is cut down further.
// List items keep their order in node.
func owned(node any, set *fieldpath.Set) any {
	switch n := node.(type) {
	case map[string]any:
		out := map[string]any{}
		for pe := range set.Members.All() {
			if pe.FieldName != nil {
				if v, ok := n[*pe.FieldName]; ok {
					out[*pe.FieldName] = v
				}
			}
		}
		for pe := range set.Children.All() {
			if pe.FieldName == nil {
				continue
			}
			if v, ok := n[*pe.FieldName]; ok {
				child, _ := set.Children.Get(pe)
				out[*pe.FieldName] = owned(v, child)
			}
		}
		return out
	case []any:
		kept := map[int]any{}
		for pe := range set.Members.All() {
			if i, ok := itemIndex(n, pe); ok {
				kept[i] = n[i]
			}
		}
		for pe := range set.Children.All() {
			if i, ok := itemIndex(n, pe); ok {
				child, _ := set.Children.Get(pe)
				kept[i] = owned(n[i], child)
			}
		}
		out := make([]any, 0, len(kept))
		for _, i := range slices.Sorted(func(yield func(int) bool) {
			for i := range kept {
				if !yield(i) {
					return
				}
			}
		}) {
			out = append(out, kept[i])
		}
		return out
	}
	return node
}

// itemIndex is the index of the list item pe selects: by its key fields, by its value (a set),
// or by its index (an atomic list's items, which are owned as a whole).
func itemIndex(items []any, pe fieldpath.PathElement) (int, bool) {
	for i, it := range items {
		switch {
		case pe.Key != nil:
			if m, ok := it.(map[string]any); ok && hasKey(m, *pe.Key) {
				return i, true
			}
		case pe.Value != nil:
			if value.Equals(value.NewValueInterface(it), *pe.Value) {
				return i, true
			}
		}
	}
	if pe.Index != nil && *pe.Index < len(items) {
		return *pe.Index, true
	}
	return 0, false
}
