package ssa

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// The API server does not tie a field manager to an identity: anyone who may patch an object can
// server-side apply it under a plugin's own manager name (kubectl apply --server-side
// --field-manager=profile-plugins/authz --force-conflicts) and add a field, such as a selector
// that narrows the namespace-wide ztunnel ALLOW policy, or a Gateway's
// infrastructure.parametersRef. The field then belongs to no other manager, and the observed
// object is a superset of the apply body, so neither ForeignFields without a body nor Holds sees
// it. What does see it: a manager's Apply entry owns exactly the fields of the last body it sent,
// and no more (fields the API server defaults belong to nobody), so every content field of that
// entry that the body about to be sent does not set was added by someone else, or is left from a
// body no longer sent. Either way it must go.

// ApplyExtras lists the content fields (spec, data, binaryData and the meaning metadata) that
// manager's Apply entry in obj's managedFields holds and body does not set, as sorted paths
// ("spec.selector"), each cut at the first element body lacks. An entry that cannot be decoded
// counts as holding its whole content: an unreadable ownership is no proof of intactness.
func ApplyExtras(obj metav1.Object, manager string, body map[string]any) []string {
	return extras(obj, manager, body, true)
}

// Extras is ApplyExtras over every entry of manager, its Updates too (the runner's restores, or
// anyone's Update in its name).
func Extras(obj metav1.Object, manager string, body map[string]any) []string {
	return extras(obj, manager, body, false)
}

func extras(obj metav1.Object, manager string, body map[string]any, applyOnly bool) []string {
	seen := map[string]bool{}
	for _, e := range obj.GetManagedFields() {
		if e.Manager != manager || (applyOnly && e.Operation != metav1.ManagedFieldsOperationApply) || e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(e.FieldsV1.GetRawBytes())); err != nil {
			seen[fmt.Sprintf("managedFields of %s (%v)", manager, err)] = true
			continue
		}
		for p := range set.Leaves().All() {
			if !isContentPath(p) {
				continue
			}
			if n := resolved(body, p); n < len(p) {
				if isMeaningPath(p) {
					n = len(p) - 1 // a key is set or not: name the key, not the map the body lacks
				}
				seen[pathString(p[:n+1])] = true
			}
		}
	}
	return slices.Sorted(func(yield func(string) bool) {
		for p := range seen {
			if !yield(p) {
				return
			}
		}
	})
}

// isContentPath reports whether p is under a content root or is a meaning label or annotation.
func isContentPath(p fieldpath.Path) bool {
	if len(p) == 0 || p[0].FieldName == nil {
		return false
	}
	return slices.Contains(contentRoots, *p[0].FieldName) || isMeaningPath(p)
}

// isMeaningPath reports whether p is a meaning label or annotation.
func isMeaningPath(p fieldpath.Path) bool {
	return len(p) == 3 && p[0].FieldName != nil && *p[0].FieldName == "metadata" &&
		p[1].FieldName != nil && slices.Contains(metadataMaps, *p[1].FieldName) &&
		p[2].FieldName != nil && IsMeaningKey(*p[2].FieldName)
}

// resolved is how many leading elements of p name a value in body.
func resolved(body any, p fieldpath.Path) int {
	node := body
	for i, pe := range p {
		next, ok := child(node, pe)
		if !ok {
			return i
		}
		node = next
	}
	return len(p)
}

// child is the value pe selects in node: a map field, a list item by its key fields or by its
// value (a set), or by index (an atomic list; its items are owned as a whole, so this is rare).
func child(node any, pe fieldpath.PathElement) (any, bool) {
	if pe.FieldName != nil {
		m, _ := node.(map[string]any)
		v, ok := m[*pe.FieldName]
		return v, ok
	}
	items, _ := node.([]any)
	switch {
	case pe.Key != nil:
		for _, it := range items {
			if m, ok := it.(map[string]any); ok && hasKey(m, *pe.Key) {
				return it, true
			}
		}
	case pe.Value != nil:
		for _, it := range items {
			if value.Equals(value.NewValueInterface(it), *pe.Value) {
				return it, true
			}
		}
	case pe.Index != nil:
		if *pe.Index >= 0 && *pe.Index < len(items) {
			return items[*pe.Index], true
		}
	}
	return nil, false
}

// hasKey reports whether the list item m carries every key field with its value.
func hasKey(m map[string]any, key value.FieldList) bool {
	for _, f := range key {
		v, ok := m[f.Name]
		if !ok || !value.Equals(value.NewValueInterface(v), f.Value) {
			return false
		}
	}
	return true
}

// pathString is p without fieldpath's leading dot: spec.selector, spec.listeners[name="mesh"].
func pathString(p fieldpath.Path) string {
	return strings.TrimPrefix(p.String(), ".")
}
