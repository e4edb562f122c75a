package ssa

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// AppliedBody keeps exactly the fields of the manager's Apply entry, with the object's values and
// identity: not the keys another manager set, not the fields nobody owns.
func TestAppliedBodyIsWhatTheManagersApplyEntryHolds(t *testing.T) {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "waypoint-seccomp", Namespace: "alice", UID: "u-1", ResourceVersion: "7",
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "profile-plugins", "team": "ml"},
			Annotations: map[string]string{"profile-plugins.kubeflow-ambient.io/desired-hash": "abc"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "profile-plugins/waypoint", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:deployment":{}},"f:metadata":{"f:annotations":{"f:profile-plugins.kubeflow-ambient.io/desired-hash":{}},"f:labels":{"f:app.kubernetes.io/managed-by":{}}}}`)},
				{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:service":{}},"f:metadata":{"f:labels":{"f:team":{}}}}`)},
			},
		},
		Data: map[string]string{"deployment": "patch", "service": "theirs"},
	}
	got, ok := AppliedBody(cm, "profile-plugins/waypoint")
	require.True(t, ok)
	assert.Equal(t, map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "waypoint-seccomp", "namespace": "alice",
			"labels":      map[string]any{"app.kubernetes.io/managed-by": "profile-plugins"},
			"annotations": map[string]any{"profile-plugins.kubeflow-ambient.io/desired-hash": "abc"}},
		"data": map[string]any{"deployment": "patch"},
	}, got)

	_, ok = AppliedBody(cm, "nobody")
	assert.False(t, ok, "no Apply entry of that manager")
	cm.ManagedFields = append(cm.ManagedFields, cm.ManagedFields[0])
	_, ok = AppliedBody(cm, "profile-plugins/waypoint")
	assert.False(t, ok, "two Apply entries of one manager are no single body")
}

// In a list, the Apply entry selects items by their key fields (a map list), by their value (a
// set) or by their index (an atomic list's items); an item it does not select is left out, and
// the items it keeps stay in the object's order.
func TestAppliedBodyKeepsTheListItemsTheEntrySelects(t *testing.T) {
	set := &fieldpath.Set{}
	require.NoError(t, set.FromJSON(strings.NewReader(`{"f:spec":{`+
		`"f:containers":{"k:{\"name\":\"app\"}":{"f:image":{}},"k:{\"name\":\"gone\"}":{}},`+
		`"f:finalizers":{"v:\"b\"":{},"v:\"a\"":{}},`+
		`"f:args":{"i:1":{},"i:5":{}}}}`)))
	node := map[string]any{"spec": map[string]any{
		"containers": []any{
			map[string]any{"name": "sidecar", "image": "theirs"},
			map[string]any{"name": "app", "image": "ours", "command": "theirs"},
		},
		"finalizers": []any{"a", "c", "b"},
		"args":       []any{"zero", "one", "two"},
	}}
	assert.Equal(t, map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"image": "ours"}},
		"finalizers": []any{"a", "b"},
		"args":       []any{"one"},
	}}, owned(node, set))
}
