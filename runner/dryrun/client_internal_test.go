package dryrun

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

func namespaceWith(labels map[string]string, managers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetLabels(labels)
	var entries []metav1.ManagedFieldsEntry
	for _, m := range managers {
		entries = append(entries, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationApply,
			FieldsV1: metav1.NewFieldsV1(`{"owner":"` + m + `"}`)})
	}
	u.SetManagedFields(entries)
	return u
}

// The server answers each dry run against the persisted object; compose puts the run's earlier
// answers back, as the real writes would have left them.
func TestComposeKeepsEarlierDryRunWrites(t *testing.T) {
	base := namespaceWith(map[string]string{"team": "ml", "istio-injection": "enabled", "old": "x"}, "kubectl", "profile-plugins/waypoint")
	// waypoint: changes istio-injection, removes old (its own), adds dataplane-mode.
	first := namespaceWith(map[string]string{"team": "ml", "istio-injection": "disabled", "istio.io/dataplane-mode": "ambient"},
		"kubectl", "profile-plugins/waypoint")
	fields := first.GetManagedFields()
	fields[1].FieldsV1 = metav1.NewFieldsV1(`{"changed":true}`)
	first.SetManagedFields(fields)
	// pss, answered against base: none of the above, plus its own label and manager.
	second := namespaceWith(map[string]string{"team": "ml", "istio-injection": "enabled", "old": "x", "enforce": "restricted"},
		"kubectl", "profile-plugins/pss", "profile-plugins/waypoint")

	got := compose(base, []*unstructured.Unstructured{first, second})
	assert.Equal(t, map[string]string{"team": "ml", "istio-injection": "disabled", "istio.io/dataplane-mode": "ambient", "enforce": "restricted"}, got.GetLabels())
	var managers []string
	for _, e := range got.GetManagedFields() {
		managers = append(managers, e.Manager+"="+e.FieldsV1.GetRawString())
	}
	assert.Equal(t, []string{`kubectl={"owner":"kubectl"}`, `profile-plugins/pss={"owner":"profile-plugins/pss"}`, `profile-plugins/waypoint={"changed":true}`}, managers)

	assert.Equal(t, second, compose(base, []*unstructured.Unstructured{second}), "one answer is the answer")
	assert.Equal(t, second, compose(nil, []*unstructured.Unstructured{first, second}), "a created object has nothing to compose")
}

func TestFieldManagerPlugin(t *testing.T) {
	assert.Equal(t, "pss", fieldManagerPlugin(plugin.FieldManager("pss")))
	assert.Empty(t, fieldManagerPlugin("kubectl"))
	assert.Empty(t, fieldManagerPlugin(""))
}

// After a restoring Update in the same run, the server answers the apply against the persisted
// object; the run's view is the apply body on top of what the Update wrote.
func TestApplyOntoTheRunsOwnWrite(t *testing.T) {
	restored := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "p", "labels": map[string]any{"a": "1"}, "resourceVersion": "7"},
		"spec":     map[string]any{"action": "ALLOW", "rules": []any{"new"}},
	}}
	body := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "p", "labels": map[string]any{"b": "2"}},
		"spec":     map[string]any{"rules": []any{"new"}},
	}}
	answer := namespaceWith(nil, "profile-plugins/authz")
	answer.SetResourceVersion("7")
	answer.Object["spec"] = map[string]any{"action": "ALLOW", "rules": []any{"new"}, "targetRefs": []any{"stale"}}

	got := applyOnto(restored, body, answer)
	assert.Equal(t, map[string]any{"action": "ALLOW", "rules": []any{"new"}}, got.Object["spec"], "the stale field the Update removed stays removed")
	assert.Equal(t, map[string]string{"a": "1", "b": "2"}, got.GetLabels())
	assert.Equal(t, answer.GetManagedFields(), got.GetManagedFields())
	assert.Equal(t, map[string]any{"action": "ALLOW", "rules": []any{"new"}}, restored.Object["spec"], "cur is not modified")
}

// On a namespace an earlier release labelled, the shared apply co-owns a label and the old
// per-plugin manager then lets go of it. The server answers the release against the persisted
// object, where the old manager is the label's only owner, so its answer drops the label; the run's
// view keeps it, as the real writes do.
func TestComposeKeepsALabelTheSharedApplyCoOwns(t *testing.T) {
	owning := func(manager string, keys ...string) metav1.ManagedFieldsEntry {
		fields := `{"f:metadata":{"f:labels":{`
		for i, k := range keys {
			if i > 0 {
				fields += ","
			}
			fields += `"f:` + k + `":{}`
		}
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(fields + `}}}`)}
	}
	labelled := func(labels map[string]string, entries ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetLabels(labels)
		u.SetManagedFields(entries)
		return u
	}
	base := labelled(map[string]string{"enforce": "baseline", "stale": "x"}, owning(plugin.FieldManager("pss"), "enforce", "stale"))
	takeOver := labelled(map[string]string{"enforce": "baseline", "stale": "x"},
		owning(plugin.LabelFieldManager, "enforce"), owning(plugin.FieldManager("pss"), "enforce", "stale"))
	release := labelled(nil) // against base, the old manager owned both alone

	got := compose(base, []*unstructured.Unstructured{takeOver, release})
	assert.Equal(t, map[string]string{"enforce": "baseline"}, got.GetLabels(), "stale goes, enforce stays")
	require.Len(t, got.GetManagedFields(), 1)
	assert.Equal(t, plugin.LabelFieldManager, got.GetManagedFields()[0].Manager)
}
