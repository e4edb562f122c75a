package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// withEntry is an object with one managedFields entry (any kind: only managedFields are read).
func withEntry(manager string, op metav1.ManagedFieldsOperationType, fieldsV1 string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{
		Manager: manager, Operation: op, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fieldsV1),
	}}}}
}

func TestOwnApplyExtras(t *testing.T) {
	body := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{"istio.io/dry-run": "false"}, "labels": map[string]any{"a": "b"}},
		"spec": map[string]any{
			"listeners": []any{map[string]any{"name": "mesh", "port": float64(15008), "protocol": "HBONE"}},
			"rules":     []any{map[string]any{}},
			"hosts":     []any{"a", "b"},
		},
	}
	mine := plugin.FieldManager("p")
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
		"another manager's entry is foreignSpecFields' business": {"gitops", metav1.ManagedFieldsOperationApply,
			`{"f:spec":{"f:selector":{}}}`, nil},
		"the plugin's Update entry is foreignSpecFields' business": {mine, metav1.ManagedFieldsOperationUpdate,
			`{"f:spec":{"f:selector":{}}}`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, c.want, ownApplyExtras(withEntry(c.manager, c.op, c.fields), "p", body))
		})
	}
	// An entry that cannot be read is no proof that the object is intact.
	assert.Len(t, ownApplyExtras(withEntry(mine, metav1.ManagedFieldsOperationApply, `{"f:spec":`), "p", body), 1)
}
