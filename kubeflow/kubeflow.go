package kubeflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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

// DefaultMaxWaitRequeue is the cap cmd/profile-plugins-controller sets as
// [Integration.MaxWaitRequeue]: a namespace waiting for its waypoint is reconciled about eleven
// times in its first hour instead of 240 times (BENCHMARKS.md, "Waiting namespace").
const DefaultMaxWaitRequeue = 10 * time.Minute

// Integration runs the plugins from the profiles controller's reconciler. Apply and Revoke map
// the Result to what Reconcile returns, the same way for every controller built on it (see
// [Outcome]).
type Integration struct {
	// Runner applies the plugin set (profileplugins.NewRunner).
	Runner *runner.Runner
	// OnResult, if set, receives the Result of every Apply and Revoke, for a controller that
	// records events or metrics.
	OnResult func(profile client.Object, res *runner.Result)
	// AfterApply, if set, receives the Result of every Apply before Apply maps it, whatever the
	// plugins reported, errors included: the place to write [Condition] of it to the Profile's
	// status, so the condition is written whether the outcome is done, waiting, terminal or
	// retried. An error it returns (a status write the API server refused) is what Apply returns,
	// wrapped, for controller-runtime's backoff.
	AfterApply func(ctx context.Context, profile client.Object, res *runner.Result) error
	// MaxWaitRequeue, if set, spaces the requeues of a Profile that waits only for its waypoint
	// (a Gateway not yet Programmed, for example while istiod is down): the first after the
	// Runner's WaitRequeue, then twice as long each Apply that still waits so, up to
	// MaxWaitRequeue. Set it only where the controller watches the Gateways and
	// AuthorizationPolicies the Profile controls (Owns, as cmd/profile-plugins-controller and
	// examples/fork do): the watch ends such a wait, and the requeue is a fallback. Zero requeues
	// every wait after WaitRequeue. Other waits (pods to leave) keep WaitRequeue: no watch sees
	// them end.
	MaxWaitRequeue time.Duration

	memory memory
}

// Apply runs the plugins for profile, the controller's own Profile object, and says what the
// reconciler should return (see [Outcome]). A zero Result and nil error mean done.
func (i *Integration) Apply(ctx context.Context, profile client.Object) (ctrl.Result, error) {
	p, err := ProfileFrom(i.Runner.Client.Scheme(), profile)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	res := i.Runner.Apply(ctx, p)
	i.report(ctx, profile, res)
	if i.AfterApply != nil {
		if err := i.AfterApply(ctx, profile, res); err != nil {
			return ctrl.Result{}, fmt.Errorf("profile %q: %w", profile.GetName(), err)
		}
	}
	out, err := Outcome(res)
	out = i.spaceWaits(profile, res, out)
	if inputErr := res.Err(); err == nil && inputErr != nil && i.memory.newError(profile, inputErr.Error()) {
		// Once per change: a waiting namespace comes back with the same error again and again.
		log.FromContext(ctx).Error(inputErr, "input errors; requeued for a wait or a deadline of the plugins", "profile", profile.GetName(), "requeueAfter", out.RequeueAfter)
	}
	return out, err
}

// spaceWaits lengthens out's requeue while profile waits only for what the controller watches
// (see MaxWaitRequeue), never beyond a plugin's own deadline.
func (i *Integration) spaceWaits(profile client.Object, res *runner.Result, out ctrl.Result) ctrl.Result {
	n := i.memory.waited(profile, i.MaxWaitRequeue > 0 && out.RequeueAfter > 0 && waitsOnWatch(res))
	if n == 0 {
		return out
	}
	after := backedOff(out.RequeueAfter, i.MaxWaitRequeue, n)
	for _, pr := range res.Plugins {
		if pr.RequeueAfter > 0 {
			after = min(after, pr.RequeueAfter)
		}
	}
	out.RequeueAfter = after
	return out
}

// Revoke removes what the plugins made for profile and the labels they own, for the controller's
// finalizer. It is idempotent. It returns a RequeueAfter while the runner waits (for example for
// pods to leave before protection comes down) and an API error for a retry: in both cases the
// finalizer stays. Errors that only a change of input mends never hold the finalizer (they are
// logged): the runner has refused that input already, so a Profile could otherwise never be
// deleted. A zero Result and nil error mean the finalizer may go. Only a profile that is not a
// Profile at all (a wiring error, see [ProfileFrom]) is a terminal error.
func (i *Integration) Revoke(ctx context.Context, profile client.Object) (ctrl.Result, error) {
	p, err := ProfileFrom(i.Runner.Client.Scheme(), profile)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	res := i.Runner.Revoke(ctx, p)
	i.report(ctx, profile, res)
	out, err := outcome(res, false)
	if err == nil && out.IsZero() {
		i.memory.forget(profile)
		if inputErr := res.Err(); inputErr != nil {
			log.FromContext(ctx).Error(inputErr, "revoke reported input errors; they do not hold the finalizer", "profile", profile.GetName())
		}
	}
	return out, err
}

// Outcome maps an Apply's Result to what a controller-runtime reconciler returns. In order:
//
//   - an error that may go away on its own (any API error, see [runner.Result.Retryable]) is
//     returned, for controller-runtime's backoff;
//   - while a plugin waits (a waypoint not yet Programmed is not a failure), a RequeueAfter and a
//     nil error, even next to an input error: controller-runtime drops RequeueAfter whenever the
//     error is not nil, and no watch ends a wait for pods;
//   - a plugin's own deadline (plugin.Desired.RequeueAfter: an idle waypoint is removed after
//     mesh.waypoint.idleAfter, and no event marks that moment), a RequeueAfter then and a nil
//     error, also next to an input error (a refused Profile entry, which the plugins answered
//     with a safe fallback and applied the rest), so the deadline is kept;
//   - an error that only a change of input mends (a conflict, a refused Profile) is a
//     reconcile.TerminalError, never retried: an edit of the Profile, or an event on a watched
//     object, brings the Profile back;
//   - otherwise a zero Result and nil error: done.
//
// An input error that a RequeueAfter hides from controller-runtime is in the condition
// ([Integration.AfterApply]) and logged by Apply.
//
// Revoke maps its Result the same way, except that input errors never hold the finalizer.
func Outcome(res *runner.Result) (ctrl.Result, error) {
	return outcome(res, true)
}

// outcome is the one mapping of a Result to a reconcile result; inputTerminal is false for
// Revoke, whose input errors mean done.
func outcome(res *runner.Result, inputTerminal bool) (ctrl.Result, error) {
	err := res.Err()
	switch {
	case err != nil && res.Retryable():
		return ctrl.Result{}, err
	case len(res.Waiting()) > 0:
		after := res.RequeueAfter()
		if after <= 0 {
			// A wait must come back: a zero RequeueAfter would read as done, and under a
			// finalizer as "protection may come down".
			after = runner.DefaultWaitRequeue
		}
		return ctrl.Result{RequeueAfter: after}, nil
	case inputTerminal && res.RequeueAfter() > 0:
		// A decision that changes by itself (an idle waypoint's deadline, provision onDemand),
		// also next to an input error: what the plugins applied despite it (a refused Profile
		// entry keeps only the admin's sizing) still has its deadline, and controller-runtime
		// drops RequeueAfter next to any error. Not for Revoke, where any RequeueAfter reads as
		// "not done" and would hold the finalizer.
		return ctrl.Result{RequeueAfter: res.RequeueAfter()}, nil
	case err != nil && inputTerminal:
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	return ctrl.Result{}, nil
}

func (i *Integration) report(ctx context.Context, profile client.Object, res *runner.Result) {
	logger := log.FromContext(ctx).WithValues("profile", profile.GetName())
	// Each warning once per change: a waiting namespace comes back again and again with the
	// same ones.
	for _, w := range i.memory.newWarnings(profile, res.Warnings()) {
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
