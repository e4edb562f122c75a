package main

import (
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// Finalizer keeps a Profile until the plugins have revoked what they made.
const Finalizer = "profile-plugins.kubeflow-ambient.io/revoke"

// Reconciler runs the plugins for one Profile per call. It writes only when something changed:
// the runner skips unchanged objects and labels, the finalizer and namespace are written once, the
// status only when the condition changes, and events only when what they say is new.
type Reconciler struct {
	Client   client.Client
	Runner   *runner.Runner
	Recorder events.EventRecorder
	Metrics  *Metrics

	mu       sync.Mutex
	lastSaid map[string][]string // profile name -> the warnings and errors last recorded as events
	inOnce   sync.Once
	in       *kubeflow.Integration
}

// Reconcile implements reconcile.Reconciler. It runs the plugins through kubeflow.Integration, as
// a fork of the profiles controller does, so both return the same for the same Result (see
// kubeflow.Outcome); this controller adds the namespace, the finalizer, and what record writes.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	profile := &profilev1.Profile{}
	if err := r.Client.Get(ctx, req.NamespacedName, profile); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	in := r.integration()

	if !profile.DeletionTimestamp.IsZero() {
		if res, err := in.Revoke(ctx, profile); err != nil || !res.IsZero() {
			// The revoke failed, or pods still depend on the namespace's data plane: the
			// finalizer stays until it is done.
			return res, err
		}
		r.Metrics.forget(profile.Name)
		r.forget(profile.Name)
		if controllerutil.RemoveFinalizer(profile, Finalizer) {
			return ctrl.Result{}, r.Client.Update(ctx, profile)
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(profile, Finalizer) {
		if err := r.Client.Update(ctx, profile); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.ensureNamespace(ctx, profile); err != nil {
		return ctrl.Result{}, err
	}
	return in.Apply(ctx, profile)
}

// integration wraps the Runner as a fork of the profiles controller does, with record after every
// Apply. It is built on the first call and kept: it remembers each Profile's warnings and waits.
// A namespace that waits only for its waypoint backs off to kubeflow.DefaultMaxWaitRequeue: the
// Gateway and AuthorizationPolicy watches (setup) end such a wait, so a broken istiod does not
// keep a thousand namespaces polling every WaitRequeue.
func (r *Reconciler) integration() *kubeflow.Integration {
	r.inOnce.Do(func() {
		r.in = &kubeflow.Integration{Runner: r.Runner, AfterApply: r.record, MaxWaitRequeue: kubeflow.DefaultMaxWaitRequeue}
	})
	return r.in
}

// record is what this controller keeps of an Apply, whatever its outcome: the metrics, events for
// what is new, and the condition in the Profile's status. A failed status write is returned, so
// the Profile is reconciled again until the condition is there.
func (r *Reconciler) record(ctx context.Context, obj client.Object, res *runner.Result) error {
	profile, err := kubeflow.ProfileFrom(r.Client.Scheme(), obj)
	if err != nil {
		return err
	}
	r.Metrics.observe(profile.Name, res)
	r.say(profile, res)
	return r.writeCondition(ctx, profile, kubeflow.Condition(res))
}

// ensureNamespace creates the Profile's namespace if it is missing, as the profiles controller
// does, with the owner annotation and the Profile as controller. An existing namespace is never
// changed here, even one that is not the Profile's (the runner refuses it and says why), and a
// reserved name is never created: a user must not get kubeflow or istio-system by registering
// before the platform is installed. Nor is one made for a Profile profilev1.Validate refuses (a
// name no namespace may have, such as "team.a"): the API server would refuse the namespace, and
// that error, returned before the runner ran, left the Profile without a condition and retried
// with backoff forever; the runner refuses the Profile, and the condition names the field.
func (r *Reconciler) ensureNamespace(ctx context.Context, profile *profilev1.Profile) error {
	if _, reserved := r.Runner.Namespaces.ReservedBy(profile.Name); reserved {
		return nil
	}
	if len(profilev1.Validate(profile)) > 0 {
		return nil
	}
	ns := &corev1.Namespace{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: profile.Name}, ns)
	if !apierrors.IsNotFound(err) {
		return err
	}
	ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        profile.Name,
		Annotations: map[string]string{ownership.OwnerAnnotation: profile.Spec.Owner.Name},
	}}
	if err := controllerutil.SetControllerReference(profile, ns, r.Client.Scheme()); err != nil {
		return err
	}
	return client.IgnoreAlreadyExists(r.Client.Create(ctx, ns))
}

// writeCondition puts the Result's condition into the Profile's status, replacing the one of the
// same type, and writes nothing when it is already there.
func (r *Reconciler) writeCondition(ctx context.Context, profile *profilev1.Profile, c profilev1.ProfileCondition) error {
	i := slices.IndexFunc(profile.Status.Conditions, func(have profilev1.ProfileCondition) bool { return have.Type == c.Type })
	if i >= 0 && profile.Status.Conditions[i] == c {
		return nil
	}
	patch := client.MergeFrom(profile.DeepCopy())
	if i >= 0 {
		profile.Status.Conditions[i] = c
	} else {
		profile.Status.Conditions = append(profile.Status.Conditions, c)
	}
	return r.Client.Status().Patch(ctx, profile, patch)
}

// say records the Result's errors and warnings as events on the Profile, each once per change:
// only those the previous call did not have. A waiting namespace is reconciled again and again
// with the same warnings.
func (r *Reconciler) say(profile *profilev1.Profile, res *runner.Result) {
	var lines []string
	for _, w := range res.Warnings() {
		lines = append(lines, "W "+w)
	}
	if err := res.Err(); err != nil {
		lines = append(lines, "E "+err.Error())
	}
	r.mu.Lock()
	if r.lastSaid == nil {
		r.lastSaid = map[string][]string{}
	}
	before := r.lastSaid[profile.Name]
	r.lastSaid[profile.Name] = lines
	r.mu.Unlock()
	if r.Recorder == nil {
		return
	}
	for _, line := range lines {
		if slices.Contains(before, line) {
			continue
		}
		kind, text, _ := strings.Cut(line, " ")
		reason := "PluginWarning"
		if kind == "E" {
			reason = "PluginError"
		}
		r.Recorder.Eventf(profile, nil, corev1.EventTypeWarning, reason, "Apply", "%s", text)
	}
}

func (r *Reconciler) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.lastSaid, name)
}

// waitingForWaypoint reports whether the waypoint plugin of res is waiting.
func waitingForWaypoint(res *runner.Result) bool {
	for _, p := range res.Plugins {
		if p.Plugin == waypoint.PluginName {
			for _, w := range p.Waiting {
				if strings.HasPrefix(w, waypoint.WaitingForWaypoint) {
					return true
				}
			}
		}
	}
	return false
}
