package runner

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// Revoke takes down what the plugins made, in the order that keeps pods covered: routing labels
// first, then the objects behind them; data-plane labels and the objects they require last, and
// only once no running pod would be left outside every data plane. While such pods run, it says
// so in Waiting (the controller requeues) unless the namespace is going away anyway, because it is
// being deleted or the Profile is its controller: then those are left to the namespace's deletion
// and garbage collection, so a finalizer never waits on pods. It is idempotent, and a missing
// namespace is success.
func (r *Runner) Revoke(ctx context.Context, profile *profilev1.Profile) *Result {
	res := r.newResult()
	if !r.admitRevoke(ctx, profile, res) {
		return res
	}
	ns, obs, _, err := r.observe(ctx, profile.Name)
	if errors.Is(err, ErrNamespaceNotFound) {
		return res
	}
	if err == nil && r.APIReader != nil && revokeNeedsPods(r.Plugins) {
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
	held := holdDataPlane(r.Plugins, ns, obs)
	leaving := ns.DeletionTimestamp != nil || controlledBy(ns, profile)
	plans, want := r.planRevoke(res, held, leaving)
	if !r.writeLabels(ctx, ns, plans, want, res) {
		// A label that could not be taken off may still route traffic to, or enrol pods behind,
		// the objects: they stay until the next Revoke has taken the labels off.
		return res
	}
	for _, p := range plans {
		r.prune(ctx, p, decidePrune(p, obs, held, !leaving))
	}
	return res
}

// planRevoke decides Revoke's label write: every plugin keeps only its held data-plane labels
// (none wants anything any more), and, unless the namespace is leaving anyway, waits for the pods
// that hold them. The plans it returns want no object, so all of each plugin's own are stale.
func (r *Runner) planRevoke(res *Result, held holds, leaving bool) ([]*planned, map[string]map[string]string) {
	plans := make([]*planned, len(r.Plugins))
	want := map[string]map[string]string{}
	for i, p := range r.Plugins {
		plans[i] = &planned{plugin: p, res: &res.Plugins[i]}
		want[p.Name()] = held.labelsOf(p.Name())
		if !leaving {
			plans[i].res.Waiting = append(plans[i].res.Waiting, held.waiting(p.Name())...)
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
