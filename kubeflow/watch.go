package kubeflow

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
