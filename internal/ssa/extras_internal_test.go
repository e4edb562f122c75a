package ssa

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// withEntry is an object with one managedFields entry (any kind: only managedFields are read).
func withEntry(manager string, op metav1.ManagedFieldsOperationType, fieldsV1 string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{entry(manager, op, "", fieldsV1)}}}
}

func TestApplyExtras(t *testing.T) {
	body := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{"istio.io/dry-run": "false"}, "labels": map[string]any{"a": "b"}},
		"spec": map[string]any{
			"listeners": []any{map[string]any{"name": "mesh", "port": float64(15008), "protocol": "HBONE"}},
			"rules":     []any{map[string]any{}},
			"hosts":     []any{"a", "b"},
		},
	}
	const mine = "profile-plugins/p"
	for name, c := range map[string]struct {
		manager string
		op      metav1.ManagedFieldsOperationType
		fields  string
		want    []string
	}{
		"exactly the body": {mine, metav1.ManagedFieldsOperationApply,
			`{"f:metadata":{"f:annotations":{"f:istio.io/dry-run":{}},"f:labels":{"f:a":{}}},"f:spec":{"f:listeners":{"k:{\"name\":\"mesh\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{}}},"f:rules":{},"f:hosts":{"v:\"a\"":{},"v:\"b\"":{}}}}`, nil},
		"an extra field, cut where the body ends": {mine, metav1.ManagedFieldsOperationApply,
			`{"f:spec":{"f:selector":{".":{},"f:matchLabels":{"f:app":{}}}}}`, []string{"spec.selector"}},
		"an extra list item by key": {mine, metav1.ManagedFieldsOperationApply,
			`{"f:spec":{"f:listeners":{"k:{\"name\":\"open\"}":{"f:port":{}}}}}`, []string{`spec.listeners[name="open"]`}},
		"an extra set item": {mine, metav1.ManagedFieldsOperationApply,
			`{"f:spec":{"f:hosts":{"v:\"c\"":{}}}}`, []string{`spec.hosts[="c"]`}},
		"a meaning annotation": {mine, metav1.ManagedFieldsOperationApply,
			`{"f:metadata":{"f:annotations":{"f:istio.io/dry-run":{}}}}`, nil},
		"other metadata is no content": {mine, metav1.ManagedFieldsOperationApply,
			`{"f:metadata":{"f:labels":{"f:x":{}},"f:annotations":{"f:x":{}}}}`, nil},
		"another data key": {mine, metav1.ManagedFieldsOperationApply,
			`{"f:data":{"f:service":{}}}`, []string{"data"}},
		"another manager's entry is ForeignFields' business": {"gitops", metav1.ManagedFieldsOperationApply,
			`{"f:spec":{"f:selector":{}}}`, nil},
		"the manager's Update entry is ForeignFields' business": {mine, metav1.ManagedFieldsOperationUpdate,
			`{"f:spec":{"f:selector":{}}}`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, c.want, ApplyExtras(withEntry(c.manager, c.op, c.fields), mine, body))
		})
	}
	// An entry that cannot be read is no proof that the object is intact.
	assert.Len(t, ApplyExtras(withEntry(mine, metav1.ManagedFieldsOperationApply, `{"f:spec":`), mine, body), 1)
}

// Extras also counts the manager's Updates: a field the runner's restoring Update (or anyone's
// Update in its name) holds outlives the apply that no longer sets it.
func TestExtrasCountsTheManagersUpdates(t *testing.T) {
	const mine = "profile-plugins/p"
	body := map[string]any{"spec": map[string]any{"rules": []any{}}}
	update := withEntry(mine, metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:rules":{},"f:targetRefs":{}}}`)
	assert.Equal(t, []string{"spec.targetRefs"}, Extras(update, mine, body))
	assert.Empty(t, ApplyExtras(update, mine, body))
	assert.Empty(t, Extras(update, "profile-plugins/other", body), "only the named manager's entries")
}

// child selects an atomic list's item by its index only when the index lies in the list.
func TestChildSelectsAListItemByIndexOnlyInsideTheList(t *testing.T) {
	items := []any{"zero", "one"}
	at := func(i int) fieldpath.PathElement { return fieldpath.PathElement{Index: &i} }
	for i, want := range items {
		got, ok := child(items, at(i))
		assert.True(t, ok, "index %d", i)
		assert.Equal(t, want, got)
	}
	for _, i := range []int{-1, 2} {
		_, ok := child(items, at(i))
		assert.False(t, ok, "index %d", i)
	}
	_, ok := child(map[string]any{"x": 1}, at(0))
	assert.False(t, ok, "a map has no items")
}
