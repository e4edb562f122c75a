package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

func TestControlledBy(t *testing.T) {
	t.Parallel()
	profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{UID: "p1"}}
	ns := func(refs ...metav1.OwnerReference) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{OwnerReferences: refs}}
	}
	yes := true
	no := false
	assert.True(t, controlledBy(ns(metav1.OwnerReference{UID: "p1", Controller: &yes}), profile))
	assert.False(t, controlledBy(ns(metav1.OwnerReference{UID: "p1", Controller: &no}), profile), "an owner, not the controller")
	assert.False(t, controlledBy(ns(metav1.OwnerReference{UID: "other", Controller: &yes}), profile))
	assert.False(t, controlledBy(ns(), profile))
	assert.False(t, controlledBy(ns(metav1.OwnerReference{UID: "", Controller: &yes}), &profilev1.Profile{}), "a Profile without UID controls nothing")
}
