package ssa

import (
	"testing"

	"github.com/stretchr/testify/assert"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

// entry is fixture.ManagedFields, short for the tables below.
var entry = fixture.ManagedFields

func withFields(entries ...metav1.ManagedFieldsEntry) *istiosecurityv1.AuthorizationPolicy {
	return &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: entries}}
}

func TestForeignFields(t *testing.T) {
	const mine = "profile-plugins/authz"
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	cases := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    map[string][]string
	}{
		{"only ours", []metav1.ManagedFieldsEntry{entry(mine, apply, "", `{"f:spec":{"f:action":{},"f:rules":{}}}`)}, map[string][]string{}},
		{"shared with another writer", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:action":{},"f:rules":{}}}`),
			entry("kfam", update, "", `{"f:spec":{"f:rules":{}}}`),
		}, map[string][]string{}},
		{"another writer took a field", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:rules":{}}}`),
			entry("kubectl-edit", update, "", `{"f:spec":{"f:action":{}}}`),
		}, map[string][]string{"kubectl-edit": {"spec.action"}}},
		{"another writer added fields", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:action":{},"f:rules":{}}}`),
			entry("gitops", apply, "", `{"f:spec":{"f:selector":{".":{},"f:matchLabels":{"f:app":{}}},"f:targetRefs":{}}}`),
		}, map[string][]string{"gitops": {"spec.selector", "spec.selector.matchLabels.app", "spec.targetRefs"}}},
		// After an adoption, the previous writer's entry keeps a bare spec node that owns nothing.
		{"a bare spec node owns no field", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:action":{},"f:rules":{}}}`),
			entry("kfam", update, "", `{"f:metadata":{"f:annotations":{"f:user":{}}},"f:spec":{}}`),
		}, map[string][]string{}},
		{"our own update shared with our apply", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:action":{},"f:rules":{}}}`),
			entry(mine, update, "", `{"f:spec":{"f:action":{}}}`),
		}, map[string][]string{}},
		{"a field only our own update holds is not removed by apply", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:rules":{}}}`),
			entry(mine, update, "", `{"f:spec":{"f:targetRefs":{}}}`),
		}, map[string][]string{mine: {"spec.targetRefs"}}},
		{"status writers are not drift", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:rules":{}}}`),
			entry("istiod", update, "status", `{"f:status":{"f:conditions":{}}}`),
			entry("istiod", apply, "status", `{"f:spec":{"f:x":{}}}`),
		}, map[string][]string{}},
		{"status writers are not drift next to another writer either", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:rules":{}}}`),
			entry("kfam", update, "", `{"f:spec":{"f:rules":{}}}`),
			entry("istiod", apply, "status", `{"f:spec":{"f:x":{}}}`),
		}, map[string][]string{}},
		{"metadata only, unreadable or empty entries", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:rules":{}}}`),
			entry("labeller", update, "", `{"f:metadata":{"f:labels":{"f:x":{}}}}`),
			entry("broken", update, "", `{not json`),
			entry("nothing", update, "", ""),
		}, map[string][]string{}},
		// Objects the plugin has not applied (yet): a same-named object of another writer, and one
		// that only the plugin's restoring Update wrote.
		{"only another writer's apply", []metav1.ManagedFieldsEntry{
			entry("gitops", apply, "", `{"f:spec":{"f:action":{}}}`),
		}, map[string][]string{"gitops": {"spec.action"}}},
		{"only our own update", []metav1.ManagedFieldsEntry{
			entry(mine, update, "", `{"f:spec":{"f:targetRefs":{}}}`),
		}, map[string][]string{mine: {"spec.targetRefs"}}},
		{"keyed list items", []metav1.ManagedFieldsEntry{
			entry(mine, apply, "", `{"f:spec":{"f:listeners":{"k:{\"name\":\"mesh\"}":{".":{},"f:port":{}}}}}`),
			entry("kubectl-edit", update, "", `{"f:spec":{"f:listeners":{"k:{\"name\":\"open\"}":{".":{},"f:port":{}}}}}`),
		}, map[string][]string{"kubectl-edit": {`spec.listeners[{"name":"open"}]`, `spec.listeners[{"name":"open"}].port`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ForeignFields(withFields(tc.entries...), mine, nil))
		})
	}
}

// A field the manager's own restoring Update holds outlives the apply that stops setting it, so
// once the body drops it, it is drift even though the apply still co-owns it now.
func TestForeignFieldsForABodyThatDropsAField(t *testing.T) {
	const mine = "profile-plugins/authz"
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	obj := withFields(
		entry(mine, apply, "", `{"f:spec":{"f:rules":{},"f:targetRefs":{}}}`),
		entry(mine, update, "", `{"f:spec":{"f:rules":{},"f:targetRefs":{}}}`),
	)
	sidecar := map[string]any{"spec": map[string]any{"rules": []any{}}}
	ambient := map[string]any{"spec": map[string]any{"rules": []any{}, "targetRefs": []any{}}}
	assert.Equal(t, map[string][]string{mine: {"spec.targetRefs"}}, ForeignFields(obj, mine, sidecar))
	assert.Equal(t, map[string][]string{}, ForeignFields(obj, mine, ambient))
	assert.Equal(t, map[string][]string{}, ForeignFields(obj, mine, nil), "without a body, the Update's field counts only once the apply lets go of it")
}

func TestFieldPaths(t *testing.T) {
	out := map[string]bool{}
	fieldPaths("spec", map[string]any{
		"f:a":                map[string]any{},
		"k:{\"name\":\"x\"}": map[string]any{".": map[string]any{}, "f:b": map[string]any{}},
		"v:\"y\"":            map[string]any{},
		"i:0":                map[string]any{},
		"other":              map[string]any{},
	}, out)
	assert.Equal(t, map[string]bool{
		"spec.a": true, `spec[{"name":"x"}]`: true, `spec[{"name":"x"}].b`: true, `spec["y"]`: true, "spec[0]": true, "specother": true,
	}, out)
}

// Two fixes of what counts as foreign. A writer that co-owns a keyed list item the body sets
// (istioctl waypoint apply of the same waypoint) holds nothing the plugin does not: the body's
// top field is "listeners", not the item. And the root's own marker ("." under "f:spec"), which
// the API server's before-first-apply entry holds after an object without managedFields is
// applied, is no content: a body with a spec wants one too.
func TestForeignFieldsCountsNeitherCoOwnedListItemsNorTheRootMarker(t *testing.T) {
	const mine = "profile-plugins/waypoint"
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	listener := `{"f:spec":{"f:gatewayClassName":{},"f:listeners":{"k:{\"name\":\"mesh\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{}}}}}`
	body := map[string]any{"spec": map[string]any{"gatewayClassName": "istio-waypoint",
		"listeners": []any{map[string]any{"name": "mesh", "port": float64(15008), "protocol": "HBONE"}}}}
	obj := withFields(entry(mine, apply, "", listener), entry("istioctl", apply, "", listener))
	assert.Equal(t, map[string][]string{}, ForeignFields(obj, mine, body))

	obj = withFields(entry(mine, apply, "", listener),
		entry("before-first-apply", update, "", `{"f:spec":{".":{},"f:gatewayClassName":{},"f:listeners":{"k:{\"name\":\"mesh\"}":{".":{},"f:port":{}}}}}`))
	assert.Equal(t, map[string][]string{}, ForeignFields(obj, mine, body))
	assert.Equal(t, map[string][]string{}, ForeignFields(obj, mine, nil))

	// What such an entry holds below the root still counts.
	obj = withFields(entry(mine, apply, "", listener),
		entry("before-first-apply", update, "", `{"f:spec":{".":{},"f:infrastructure":{}}}`))
	assert.Equal(t, map[string][]string{"before-first-apply": {"spec.infrastructure"}}, ForeignFields(obj, mine, body))
	obj = withFields(entry(mine, apply, "", listener), entry("kubectl-edit", update, "", `{"f:spec":{".":{}}}`))
	assert.Equal(t, map[string][]string{}, ForeignFields(obj, mine, body), "the marker alone holds nothing")
}
