package kubeflow_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
)

func TestEnqueueProfileOfNamespace(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h := kubeflow.EnqueueProfileOfNamespace()

	// kfam's RoleBinding, not owned by the Profile: its namespace's Profile is reconciled.
	h.Create(context.Background(), event.CreateEvent{Object: &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "user-bob-clusterrole-edit", Namespace: "alice"}}}, q)
	// A cluster-scoped object has no Profile of its namespace.
	h.Create(context.Background(), event.CreateEvent{Object: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alice"}}}, q)

	assert.Equal(t, 1, q.Len())
	item, _ := q.Get()
	assert.Equal(t, reconcile.Request{NamespacedName: types.NamespacedName{Name: "alice"}}, item)
}

func TestEnqueueProfileOfSameName(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h := kubeflow.EnqueueProfileOfSameName()

	// A namespace an admin handed over: owner annotation, no owner reference.
	old := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alice", Annotations: map[string]string{"owner": "alice@example.com"}}}
	tampered := old.DeepCopy()
	tampered.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}
	h.Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: tampered}, q)
	// A namespaced object is not a Profile's namespace.
	h.Create(context.Background(), event.CreateEvent{Object: &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob", Namespace: "alice"}}}, q)

	assert.Equal(t, 1, q.Len())
	item, _ := q.Get()
	assert.Equal(t, reconcile.Request{NamespacedName: types.NamespacedName{Name: "alice"}}, item)
}
