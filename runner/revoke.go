package runner

import (
	"context"
	"errors"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// Revoke takes down what the plugins made, in the order that keeps pods covered: routing labels
// first, then the objects behind them; data-plane labels and the objects they require last, and
// only once no pod would be left outside every data plane (a pod being deleted counts until its
// grace period is over). Admission labels (plugin.AdmissionGuard: Pod Security) stay while pods
// run, so the namespace never admits unconstrained what their owners create next.
//
// Where the namespace stays, Revoke waits for those pods and says so in Waiting (the controller
// requeues). Where it is going away anyway, because it is being deleted or the Profile is its
// controller, the labels are left to the namespace's deletion, which removes pods first and the
// rest once they are gone, and so are the objects pods depend on, taken out of garbage
// collection's hands (see handOver): the finalizer does not wait on pods. Only an object garbage
// collection already marked deleted (a foreground deletion of the Profile) is waited for, until its
// pods are gone (see releaseProtection). It is idempotent, and a missing namespace is success.
func (r *Runner) Revoke(ctx context.Context, profile *profilev1.Profile) *Result {
	res := r.newResult()
	if !r.admitRevoke(ctx, profile, res) {
		return res
	}
	ns, obs, _, err := r.observe(ctx, profile.Name)
	if errors.Is(err, ErrNamespaceNotFound) {
		return res
	}
	// observe lists pods only for the plugins Apply lists them for, and never with an APIReader.
	if err == nil && revokeNeedsPods(r.Plugins) && (r.APIReader != nil || obs.Pods == nil) {
		obs.Pods, err = r.listPods(ctx, profile.Name)
	}
	if err != nil {
		res.Errors = append(res.Errors, err)
		return res
	}
	// What only claims to be the plugins' is never taken down (ours.go).
	cl := claims{}
	obs.Objects = disown(profile, obs.Objects, cl)
	r.warnClaims(res, profile, cl)
	running := obs
	running.Pods = stillRunning(obs.Pods, time.Now())
	held := holdDataPlane(r.Plugins, ns, running)
	leaving := ns.DeletionTimestamp != nil || controlledBy(ns, profile)
	guarded := holdAdmission(r.Plugins, ns, obs.Pods, leaving)
	plans, want := r.planRevoke(res, held, guarded, leaving)
	if !r.writeLabels(ctx, ns, plans, want, res) {
		// A label that could not be taken off may still route traffic to, or enrol pods behind,
		// the objects: they stay until the next Revoke has taken the labels off.
		return res
	}
	for _, p := range plans {
		r.prune(ctx, p, decidePrune(p, obs, held, !leaving))
	}
	stuck := ""
	if leaving {
		r.handOver(ctx, profile, plans, obs, held)
		if ns.DeletionTimestamp == nil && !slices.Contains(profile.Finalizers, metav1.FinalizerDeleteDependents) {
			// Garbage collection deletes the namespace, and so its pods, only once the Profile is
			// gone, and the Profile waits for them; a foreground deletion deletes it meanwhile.
			stuck = "; the pods end with the namespace, which garbage collection deletes only once the Profile is gone: delete the namespace or the pods to finish"
		}
	}
	r.releaseProtection(ctx, ns, plans, obs, stuck)
	return res
}

// planRevoke decides Revoke's label write: every plugin keeps only its held data-plane labels and
// the admission labels it keeps (none wants anything any more), and, unless the namespace is
// leaving anyway, waits for the pods that hold them. The plans it returns want no object, so all
// of each plugin's own are stale.
func (r *Runner) planRevoke(res *Result, held holds, guarded admissionHolds, leaving bool) ([]*planned, map[string]map[string]string) {
	plans := make([]*planned, len(r.Plugins))
	want := map[string]map[string]string{}
	for i, p := range r.Plugins {
		plans[i] = &planned{plugin: p, res: &res.Plugins[i]}
		keep := held.labelsOf(p.Name())
		for k, v := range guarded.labelsOf(p.Name()) {
			keep[k] = v
		}
		want[p.Name()] = keep
		if !leaving {
			plans[i].res.Waiting = append(plans[i].res.Waiting, held.waiting(p.Name())...)
			plans[i].res.Waiting = append(plans[i].res.Waiting, guarded.waiting(p.Name())...)
		}
	}
	return plans, want
}

// controlledBy reports whether profile is ns's controller, so that deleting the Profile deletes
// the namespace, its pods and what protects them together.
func controlledBy(ns *corev1.Namespace, profile *profilev1.Profile) bool {
	c := metav1.GetControllerOf(ns)
	return c != nil && profile.UID != "" && c.UID == profile.UID
}
