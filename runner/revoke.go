package runner

import (
	"context"
	"errors"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// Revoke takes down what the plugins made, in the order that keeps pods covered: routing labels
// first, then the objects behind them; data-plane labels and the objects they require last, and
// only once no pod would be left outside every data plane (a pod being deleted counts until its
// grace period is over). Admission labels (plugin.AdmissionGuard: Pod Security) are never taken
// off. Where the namespace survives its Profile (an admin made it), the RoleBindings that grant
// access there without the Profile's owner reference survive too (contributors' bindings,
// those the owner made), and so do the people they name: without the labels the API server would
// admit their privileged pods. Revoke leaves the labels in place, manages them no more, and says
// so in a warning; it waits on no pod for them, so the tenant's pods cannot hold the Profile back.
//
// Where the namespace stays, Revoke waits for the pods a data-plane label captures and says so in
// Waiting (the controller requeues). Where it is going away anyway, because it is being deleted
// or the Profile is its controller, the labels are left to the namespace's deletion, which removes
// pods first and the rest once they are gone, and so are the objects pods depend on, taken out of
// garbage collection's hands (see handOver): the finalizer does not wait on pods. Only an object
// garbage collection already marked deleted (a foreground deletion of the Profile) is waited for,
// until its pods are gone (see releaseProtection). It is idempotent, and a missing namespace is
// success.
func (r *Runner) Revoke(ctx context.Context, profile *profilev1.Profile) *Result {
	res := r.newResult()
	if !r.admitRevoke(ctx, profile, res) {
		return res
	}
	// What only claims to be the plugins' is never taken down (observe, disown).
	cl := claims{}
	ns, obs, _, err := r.observe(ctx, profile, cl)
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
	r.warnClaims(res, profile, cl)
	running := obs
	running.Pods = stillRunning(obs.Pods, time.Now())
	leaving := ns.DeletionTimestamp != nil || controlledBy(ns, profile)
	held := holdDataPlane(r.Plugins, ns, running)
	guarded := holdAdmission(r.Plugins, ns, leaving)
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
	if !leaving {
		warnSurviving(res, ns.Name, guarded)
	} else {
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
// leaving anyway, waits for the pods that hold the data-plane labels. Admission labels wait for
// nothing: they stay (see holdAdmission). The plans it returns want no object, so all of each
// plugin's own are stale.
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
		}
	}
	return plans, want
}
