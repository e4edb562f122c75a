package kubeflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// ProfileKind is the group and kind of the object Apply and Revoke take; any version
// (v1, v1beta1) is accepted because they share one schema.
var ProfileKind = schema.GroupKind{Group: profilev1.GroupVersion.Group, Kind: profilev1.Kind}

// Integration runs the plugins from the profiles controller's reconciler.
type Integration struct {
	// Runner applies the plugin set (profileplugins.NewRunner).
	Runner *runner.Runner
	// OnResult, if set, receives every Result, for a controller that records events or writes
	// Result.Condition() to the Profile's status.
	OnResult func(profile client.Object, res *runner.Result)
}

// Apply runs the plugins for profile, the controller's own Profile object, and says what the
// reconciler should return: a RequeueAfter with a nil error while a plugin waits (a waypoint not
// yet Programmed is not a failure), a reconcile.TerminalError for errors that only a change of
// input mends (a conflict, a refused Profile), and the error itself, for controller-runtime's
// backoff, when any error may go away on its own. A zero Result and nil error mean done.
func (i *Integration) Apply(ctx context.Context, profile client.Object) (ctrl.Result, error) {
	p, err := ProfileFrom(i.Runner.Client.Scheme(), profile)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	res := i.Runner.Apply(ctx, p)
	i.report(ctx, profile, res)
	return Outcome(res)
}

// Revoke removes what the plugins made for profile and the labels they own, for the controller's
// finalizer. It is idempotent; it returns a RequeueAfter while the runner waits (for example for
// pods to leave before protection comes down), and never a terminal error, so a finalizer cannot
// be stuck by input the runner has already refused.
func (i *Integration) Revoke(ctx context.Context, profile client.Object) (ctrl.Result, error) {
	p, err := ProfileFrom(i.Runner.Client.Scheme(), profile)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	res := i.Runner.Revoke(ctx, p)
	i.report(ctx, profile, res)
	if err := res.Err(); err != nil && res.Retryable() {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: res.RequeueAfter()}, nil
}

// Outcome maps a Result to what a controller-runtime reconciler returns (see Integration.Apply).
func Outcome(res *runner.Result) (ctrl.Result, error) {
	err := res.Err()
	switch {
	case err != nil && res.Retryable():
		return ctrl.Result{}, err
	case err != nil:
		// Watches on the plugins' objects bring the Profile back when a foreign object goes.
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	return ctrl.Result{RequeueAfter: res.RequeueAfter()}, nil
}

func (i *Integration) report(ctx context.Context, profile client.Object, res *runner.Result) {
	logger := log.FromContext(ctx).WithValues("profile", profile.GetName())
	for _, w := range res.Warnings() {
		logger.Info("plugin warning", "warning", w)
	}
	if res.Changed() {
		logger.Info("plugins applied", "result", res.String())
	}
	if i.OnResult != nil {
		i.OnResult(profile, res)
	}
}

// ProfileFrom converts the profiles controller's Profile (any client.Object of group kubeflow.org,
// kind Profile) to this module's type through its JSON form, so a fork needs no field copy. The
// scheme finds the kind of typed objects whose TypeMeta is empty, as objects read through a
// client are.
func ProfileFrom(s *runtime.Scheme, obj client.Object) (*profilev1.Profile, error) {
	if p, ok := obj.(*profilev1.Profile); ok {
		return p, nil
	}
	if obj == nil {
		return nil, errors.New("profile: nil object")
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() && s != nil {
		if found, err := apiutil.GVKForObject(obj, s); err == nil {
			gvk = found
		}
	}
	if gvk.GroupKind() != ProfileKind {
		return nil, fmt.Errorf("profile: %T has kind %q, not %s (register the controller's Profile in the client's scheme)", obj, gvk.String(), ProfileKind)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("profile %q: %w", obj.GetName(), err)
	}
	p := &profilev1.Profile{}
	if err := json.Unmarshal(data, p); err != nil {
		return nil, fmt.Errorf("profile %q: %w", obj.GetName(), err)
	}
	p.SetGroupVersionKind(profilev1.GroupVersion.WithKind(profilev1.Kind))
	return p, nil
}
