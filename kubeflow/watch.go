package kubeflow

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// EnqueueProfileOfNamespace maps an object in a user namespace to the Profile of the same name,
// for watches on objects the Profile does not own: kfam's RoleBindings, from which contributor
// policies are derived. It covers the RoleBindings the controller owns as well, so it replaces
// the controller's Owns(&rbacv1.RoleBinding{}) rather than adding a second watch. A namespace
// without a Profile enqueues a request that the reconciler ends as not found.
func EnqueueProfileOfNamespace() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		if obj.GetNamespace() == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetNamespace()}}}
	})
}

// EnqueueProfileOfSameName maps a Namespace to the Profile of the same name, whoever owns the
// namespace. It replaces the controller's Owns(&corev1.Namespace{}), which follows controller
// references only and so misses a namespace an admin made and handed over by its owner annotation:
// a label someone changed there (Pod Security loosened, ambient enrolment removed) would wait for
// the resync to be repaired. A namespace without a Profile enqueues a request that the reconciler
// ends as not found; a namespaced object enqueues nothing.
func EnqueueProfileOfSameName() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		if obj.GetNamespace() != "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetName()}}}
	})
}

// EnqueueProfileOfOwner maps an object the Profile owns to that Profile, as Owns does, but only
// when the object is in the Profile's own namespace (a Profile's objects are never elsewhere) and
// its controller reference carries the Profile's UID, read from profiles (the manager's cache).
// Owns follows a controller reference by name alone, so anyone who may create ConfigMaps in any
// namespace could otherwise reconcile any Profile as often as they write (second attack review of
// Dec 1, finding 6).
func EnqueueProfileOfOwner(profiles client.Reader) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		ref := metav1.GetControllerOf(obj)
		if ref == nil || ref.Kind != profilev1.Kind || ref.APIVersion != profilev1.GroupVersion.String() || ref.Name != obj.GetNamespace() {
			return nil
		}
		p := &profilev1.Profile{}
		if err := profiles.Get(ctx, types.NamespacedName{Name: ref.Name}, p); err != nil || p.UID != ref.UID {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: ref.Name}}}
	})
}

// NewProfilePriority is the queue priority [EnqueueNewProfilesFirst] gives a Profile the
// controller has not yet answered; controller-runtime's events have priority 0, and those of an
// informer's initial list handler.LowPriority.
const NewProfilePriority = 100

// EnqueueNewProfilesFirst puts a Profile whose status has no [ConditionType] condition yet, one no
// controller of these plugins has answered, ahead of every other request in the controller's
// queue, when that queue is controller-runtime's priority queue (its default; otherwise it adds
// nothing). Watch Profiles with it beside For, whose own handler still enqueues every Profile:
// after a restart, a change of mesh mode for instance, the informer's initial list enqueues every
// Profile at the same low priority, in no order the controller chooses, so a user registering
// then would wait behind a share of the whole fleet's switch. A request already queued is only
// raised (priorityqueue's AddWithOpts keeps the higher priority). It reads the Profile type of
// package profilev1, the reference controller's; any other type (a fork's own) adds nothing.
func EnqueueNewProfilesFirst() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			addIfNew(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			addIfNew(e.ObjectNew, q)
		},
	}
}

// addIfNew adds obj's request at NewProfilePriority if obj is a Profile not yet answered and q a
// priority queue.
func addIfNew(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	p, ok := obj.(*profilev1.Profile)
	if !ok || answered(p) {
		return
	}
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		return
	}
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(NewProfilePriority)},
		reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
}

// answered says whether p's status carries this controller's condition.
func answered(p *profilev1.Profile) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c profilev1.ProfileCondition) bool { return c.Type == ConditionType })
}
