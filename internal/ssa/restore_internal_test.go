package ssa

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

func TestRestoredBody(t *testing.T) {
	cur := &istiosecurityv1.AuthorizationPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "security.istio.io/v1", Kind: "AuthorizationPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "z", Namespace: "ns", ResourceVersion: "42", UID: "u1",
			Labels:          map[string]string{"theirs": "1", plugin.ManagedByLabel: "old"},
			Annotations:     map[string]string{"note": "x"},
			Finalizers:      []string{"their/finalizer"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Thing", Name: "t", UID: "other"}, {APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: "ns", UID: "p1"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{entry("gitops", metav1.ManagedFieldsOperationUpdate, "", `{"f:spec":{"f:selector":{}}}`)},
		},
		Spec: securityv1beta1.AuthorizationPolicy{Action: securityv1beta1.AuthorizationPolicy_AUDIT, Selector: nil},
	}
	desired := map[string]any{
		"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
		"metadata": map[string]any{
			"name": "z", "namespace": "ns",
			"labels":          map[string]any{plugin.ManagedByLabel: plugin.ManagedByValue},
			"annotations":     map[string]any{plugin.DesiredHashAnnotation: "h"},
			"ownerReferences": []any{map[string]any{"apiVersion": "kubeflow.org/v1", "kind": "Profile", "name": "ns", "uid": "p1", "controller": true}},
		},
		"spec": map[string]any{"action": "ALLOW", "rules": []any{map[string]any{}}},
	}
	u, err := RestoredBody(cur, desired)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"action": "ALLOW", "rules": []any{map[string]any{}}}, u.Object["spec"])
	assert.Equal(t, "42", u.GetResourceVersion(), "the precondition")
	assert.Equal(t, map[string]string{"theirs": "1", plugin.ManagedByLabel: plugin.ManagedByValue}, u.GetLabels())
	assert.Equal(t, map[string]string{"note": "x", plugin.DesiredHashAnnotation: "h"}, u.GetAnnotations())
	assert.Equal(t, []string{"their/finalizer"}, u.GetFinalizers())
	assert.Len(t, u.GetOwnerReferences(), 2, "ours is not added twice")
	assert.Empty(t, u.GetManagedFields(), "left out, so the server keeps and updates them")

	// A desired object without a spec (a ConfigMap) drops the observed one; a missing owner is added.
	desired["spec"] = nil
	delete(desired, "spec")
	cur.OwnerReferences = nil
	cur.Labels, cur.Annotations = nil, nil
	u, err = RestoredBody(cur, desired)
	require.NoError(t, err)
	assert.NotContains(t, u.Object, "spec")
	assert.Len(t, u.GetOwnerReferences(), 1)
	assert.Equal(t, map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue}, u.GetLabels())

	// Another writer's owner is kept, and ours is added next to it.
	cur.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Thing", Name: "t", UID: "other"}}
	u, err = RestoredBody(cur, desired)
	require.NoError(t, err)
	var uids []types.UID
	for _, o := range u.GetOwnerReferences() {
		uids = append(uids, o.UID)
	}
	assert.Equal(t, []types.UID{"other", "p1"}, uids)
}

// A meaning annotation another writer set goes back to the desired value, or away when the body
// does not set it: istio.io/dry-run "true" switches a policy off.
func TestRestoredBodyResetsMeaningAnnotations(t *testing.T) {
	cur := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "z",
		Annotations: map[string]string{"istio.io/dry-run": "true", "note": "x"}}}
	desired := map[string]any{"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
		"metadata": map[string]any{"name": "z", "annotations": map[string]any{"istio.io/dry-run": "false"}}}
	u, err := RestoredBody(cur, desired)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"istio.io/dry-run": "false", "note": "x"}, u.GetAnnotations())

	delete(desired, "metadata")
	u, err = RestoredBody(cur, desired)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"note": "x"}, u.GetAnnotations())
}
