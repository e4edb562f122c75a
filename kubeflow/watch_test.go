package kubeflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
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

// Only the Profile's own ConfigMap, in its namespace and naming its UID, reconciles it: one
// another namespace's editor made naming the Profile, or one with a wrong UID, enqueues nothing.
func TestEnqueueProfileOfOwnerFollowsOnlyTheProfilesOwnNamespaceAndUID(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	victim := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "victim", UID: "u-victim"}}
	s := runner.NewScheme()
	require.NoError(t, profilev1.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(victim).Build()
	h := kubeflow.EnqueueProfileOfOwner(c)
	owned := func(ns string, uid types.UID) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: profilev1.GroupVersion.String(), Kind: profilev1.Kind, Name: "victim", UID: uid, Controller: ptr.To(true)}}}}
	}
	h.Create(context.Background(), event.CreateEvent{Object: owned("mallory", "u-victim")}, q)
	h.Create(context.Background(), event.CreateEvent{Object: owned("victim", "u-forged")}, q)
	h.Create(context.Background(), event.CreateEvent{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "victim"}}}, q)
	assert.Equal(t, 0, q.Len(), "foreign, forged and unowned ConfigMaps enqueue nothing")

	h.Create(context.Background(), event.CreateEvent{Object: owned("victim", "u-victim")}, q)
	assert.Equal(t, 1, q.Len())
	item, _ := q.Get()
	assert.Equal(t, reconcile.Request{NamespacedName: types.NamespacedName{Name: "victim"}}, item)
}

// TestNewProfilesFirst: after a restart every Profile arrives in the informer's initial list at
// low priority; a Profile no controller has answered yet goes ahead of them, one already answered
// is left where For's handler put it, and a plain work queue gets nothing.
func TestNewProfilesFirst(t *testing.T) {
	ctx := context.Background()
	q := priorityqueue.New[reconcile.Request]("profiles")
	defer q.ShutDown()
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
	}
	profile := func(name string, answered bool) *profilev1.Profile {
		p := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if answered {
			p.Status.Conditions = []profilev1.ProfileCondition{{Type: kubeflow.ConditionType, Status: "True"}}
		}
		return p
	}
	// The initial list, as For's handler enqueues it.
	for _, name := range []string{"team-a", "team-b", "newcomer", "team-c"} {
		q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req(name))
	}
	h := kubeflow.EnqueueNewProfilesFirst()
	for _, name := range []string{"team-a", "team-b", "team-c"} {
		h.Create(ctx, event.CreateEvent{Object: profile(name, true), IsInInitialList: true}, q)
	}
	h.Create(ctx, event.CreateEvent{Object: profile("newcomer", false), IsInInitialList: true}, q)

	require.Eventually(t, func() bool { return q.Len() == 4 }, 5*time.Second, 10*time.Millisecond)
	first, priority, _ := q.GetWithPriority()
	assert.Equal(t, req("newcomer"), first, "the Profile nobody answered goes first")
	assert.Equal(t, kubeflow.NewProfilePriority, priority)
	for _, want := range []string{"team-a", "team-b", "team-c"} {
		got, priority, _ := q.GetWithPriority()
		assert.Equal(t, req(want), got, "answered Profiles keep the initial list's order")
		assert.Equal(t, handler.LowPriority, priority)
	}

	// An update that answers it adds nothing; an edit of one still unanswered raises it again.
	h.Update(ctx, event.UpdateEvent{ObjectOld: profile("newcomer", false), ObjectNew: profile("newcomer", true)}, q)
	assert.Zero(t, q.Len())
	h.Update(ctx, event.UpdateEvent{ObjectOld: profile("late", false), ObjectNew: profile("late", false)}, q)
	require.Eventually(t, func() bool { return q.Len() == 1 }, 5*time.Second, 10*time.Millisecond)

	plain := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer plain.ShutDown()
	h.Create(ctx, event.CreateEvent{Object: profile("newcomer", false)}, plain)
	assert.Zero(t, plain.Len(), "without a priority queue For's handler alone enqueues")
}
