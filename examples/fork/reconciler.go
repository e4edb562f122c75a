package main

import (
	"context"

	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

// profileFinalizer is the profiles controller's finalizer.
const profileFinalizer = "profile-finalizer"

// ProfileReconciler stands in for the profiles controller's reconciler.
type ProfileReconciler struct {
	client.Client
	// Mesh runs profile-plugins: the waypoint, the access policies, Pod Security.
	Mesh *kubeflow.Integration
}

// Reconcile keeps the controller's order: the namespace, then the finalizer, then the plugins,
// so that everything the plugins write is under a finalizer that revokes it.
func (r *ProfileReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	instance := &profilev1.Profile{}
	if err := r.Get(ctx, req.NamespacedName, instance); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !instance.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(instance, profileFinalizer) {
			return ctrl.Result{}, nil
		}
		// Added by the fork: revoke before the finalizer goes; a RequeueAfter keeps it while
		// running pods still depend on the namespace's data plane.
		if res, err := r.Mesh.Revoke(ctx, instance); err != nil || !res.IsZero() {
			return res, err
		}
		controllerutil.RemoveFinalizer(instance, profileFinalizer)
		return ctrl.Result{}, r.Update(ctx, instance)
	}
	if err := r.createNamespace(ctx, instance); err != nil {
		return ctrl.Result{}, err
	}
	if controllerutil.AddFinalizer(instance, profileFinalizer) {
		if err := r.Update(ctx, instance); err != nil {
			return ctrl.Result{}, err
		}
	}
	// Added by the fork: a RequeueAfter with no error while the waypoint is not yet Programmed,
	// a terminal error for input only a change mends, the error itself for the backoff.
	if res, err := r.Mesh.Apply(ctx, instance); err != nil || !res.IsZero() {
		return res, err
	}
	return ctrl.Result{}, nil
}

// createNamespace makes the Profile's namespace as the profiles controller does: annotated with
// the owner and controlled by the Profile, which is how the runner knows it is the Profile's. An
// existing namespace is left alone (the runner refuses one that is not the Profile's), and so is a
// name the configuration reserves: registering first must not give a user kubeflow or
// istio-system before the platform is installed.
func (r *ProfileReconciler) createNamespace(ctx context.Context, instance *profilev1.Profile) error {
	if _, reserved := r.Mesh.Runner.Namespaces.ReservedBy(instance.Name); reserved {
		return nil
	}
	err := r.Get(ctx, client.ObjectKey{Name: instance.Name}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: instance.Name,
		Annotations: map[string]string{ownership.OwnerAnnotation: instance.Spec.Owner.Name}}}
	if err := controllerutil.SetControllerReference(instance, ns, r.Scheme()); err != nil {
		return err
	}
	return client.IgnoreAlreadyExists(r.Create(ctx, ns))
}

// SetupWithManager watches what the plugins write, so a change to it (or istiod programming the
// waypoint) brings the Profile back. The access policies are watched as security/v1, in place of
// the controller's v1beta1 watch: a second watch of the same resource would double the cache.
// RoleBindings, the controller's and kfam's (contributor policies follow kfam's), are watched as
// metadata, which is all the runner reads of them.
func (r *ProfileReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&profilev1.Profile{}).
		Owns(&corev1.Namespace{}).
		Owns(&istiosecurityv1.AuthorizationPolicy{}).
		Owns(&gatewayv1.Gateway{}).
		Owns(&corev1.ConfigMap{}).
		Watches(&rbacv1.RoleBinding{}, kubeflow.EnqueueProfileOfNamespace(), builder.OnlyMetadata).
		Complete(r)
}
