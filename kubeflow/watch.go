package kubeflow

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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
