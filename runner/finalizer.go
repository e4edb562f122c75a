package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// The objects a data-plane label requires must outlive the pods they protect. Revoke keeps them
// while pods run; what it cannot order is garbage collection. When the Profile controls its
// namespace, deleting the Profile makes the garbage collector delete every dependent at once
// (k8s.io/kubernetes pkg/controller/garbagecollector: a dependent whose owners are all gone, or
// all waiting for their dependents in a foreground deletion, is deleted), so the ztunnel policy
// can go while the namespace's pods are still terminating, and ztunnel then admits every caller
// to them. Two things close that window:
//
//   - plugin.ProtectionFinalizer on those objects in a namespace the Profile controls (decorate):
//     a deletion only marks them, the policy still applies (istiod reads policies from informers,
//     which hold an object until it is gone), and releaseProtection removes the finalizer once no
//     pod depends on the object any more;
//   - Revoke hands the objects it keeps to the namespace's deletion (handOver): without the
//     Profile's owner reference garbage collection leaves them alone, and the namespace
//     controller deletes a namespace's pods first and everything else only once they are gone
//     (ordered namespace deletion, a conformance requirement since Kubernetes 1.34). The
//     finalizer goes with the owner reference: once the Profile is gone nothing would remove it.
//
// A pod counts as depending on them until its grace period is over, never longer (stillRunning),
// so the finalizer cannot wait on a pod whose object lingers after the kubelet killed it (a lost
// node, a pod finalizer). A namespace force-deleted (its spec.finalizers emptied) is gone without
// waiting for its content at all; objects left over in storage come back only with a namespace of
// the same name, where the next call releases them.

// stillRunning is pods as they may still serve: finished pods left out, and a pod being deleted
// kept, presented to the plugins as running (no deletionTimestamp), until its deletionTimestamp.
// For a pod that is the end of its grace period: the API server sets it to the time of the delete
// request plus the grace period (k8s.io/apiserver pkg/registry/rest, BeforeDelete), and the kubelet
// kills what still runs then. A pod never scheduled gets no grace period, so it does not count.
func stillRunning(pods []corev1.Pod, now time.Time) []corev1.Pod {
	if pods == nil {
		return nil
	}
	out := make([]corev1.Pod, 0, len(pods))
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if pod.DeletionTimestamp != nil {
			if !now.Before(pod.DeletionTimestamp.Time) {
				continue
			}
			pod.DeletionTimestamp = nil // a copy: the caller's pod keeps it
		}
		out = append(out, pod)
	}
	return out
}

// dependants names, per object, the running pods that depend on it: those a data-plane label the
// plugin owns on ns captures, for each object the label requires, and those a PodProtector names.
// A data-plane label only another writer set is that writer's business, as for the holds (see
// holdDataPlane); when the runner's own managedFields cannot be read, every set label counts.
// obs.Pods are the pods as stillRunning presents them.
func dependants(plugins []plugin.Plugin, ns *corev1.Namespace, obs plugin.Observed) map[plugin.Ref][]string {
	own := readLabelOwners(ns, plugins)
	out := map[plugin.Ref][]string{}
	add := func(ref plugin.Ref, names []string) {
		for _, n := range names {
			if !slices.Contains(out[ref], n) {
				out[ref] = append(out[ref], n)
			}
		}
	}
	for _, p := range plugins {
		if dp, ok := p.(plugin.DataPlane); ok {
			owned := own.owned(p.Name())
			for key, refs := range dp.DataPlaneLabels() {
				value, set := ns.Labels[key]
				if !set || (own.err == nil && !owned[key]) {
					continue
				}
				captured := dp.Captured(key, value, obs.Pods)
				for _, ref := range refs {
					add(ref, captured)
				}
			}
		}
		if pp, ok := p.(plugin.PodProtector); ok {
			for ref, names := range pp.ProtectedPods(obs) {
				add(ref, names)
			}
		}
	}
	for ref := range out {
		slices.Sort(out[ref])
	}
	return out
}

// releaseProtection removes plugin.ProtectionFinalizer from each plugin's own objects that are
// being deleted (observed so, or deleted by this call's prune) once no running pod depends on them.
// While one does, the object stays, still protecting, and the plugin waits for it; stuck, when set,
// says what ends those pods if nothing else will. An object being deleted that its plugin still
// wants keeps the finalizer while the namespace stays: it protects as it stands, and releasing it
// would take away what the labels that require it count on. A failed plugin's objects are left
// as they are. It runs after the prune phase: deleting first keeps the object protecting if the
// release fails, and the next call retries.
func (r *Runner) releaseProtection(ctx context.Context, ns *corev1.Namespace, plans []*planned, obs plugin.Observed, stuck string) {
	type candidate struct {
		p   *planned
		cur client.Object
	}
	var found []candidate
	for _, p := range plans {
		if p.failed {
			continue
		}
		for _, cur := range ownObjects(p, obs) {
			ref := refOf(cur)
			pruned := slices.Contains(p.res.Deleted, ref)
			if !slices.Contains(cur.GetFinalizers(), plugin.ProtectionFinalizer) || (cur.GetDeletionTimestamp() == nil && !pruned) {
				continue
			}
			if !pruned && ns.DeletionTimestamp == nil && slices.ContainsFunc(p.objects, func(ao applyObject) bool { return ao.ref == ref }) {
				p.res.Warnings = append(p.res.Warnings, fmt.Sprintf("%s is being deleted although plugin %s wants it: its finalizer %s keeps it, "+
					"and it still applies; it goes once no plugin wants it or the namespace is deleted", ref, p.plugin.Name(), plugin.ProtectionFinalizer))
				p.res.Notes = append(p.res.Notes, heldNote(pluginsOf(plans), p.plugin.Name(), ns, ref))
				continue
			}
			found = append(found, candidate{p, cur})
		}
	}
	if len(found) == 0 {
		return
	}
	if obs.Pods == nil {
		pods, err := r.listPods(ctx, ns.Name)
		if err != nil {
			for _, c := range found {
				c.p.res.Errors = append(c.p.res.Errors, fmt.Errorf("plugin %s: %s keeps its finalizer: %w", c.p.plugin.Name(), refOf(c.cur), err))
			}
			return
		}
		obs.Pods = pods
	}
	obs.Pods = stillRunning(obs.Pods, time.Now())
	deps := dependants(pluginsOf(plans), ns, obs)
	for _, c := range found {
		ref := refOf(c.cur)
		if pods := deps[ref]; len(pods) > 0 {
			c.p.res.Waiting = append(c.p.res.Waiting, fmt.Sprintf("keeps %s, which is being deleted, until no pod depends on it (its finalizer %s holds it)%s; %d pod(s) still run or terminate: %s",
				ref, plugin.ProtectionFinalizer, stuck, len(pods), strings.Join(pods, ", ")))
			continue
		}
		i := slices.Index(c.cur.GetFinalizers(), plugin.ProtectionFinalizer)
		ops := []patchOp{{Op: "test", Path: fmt.Sprintf("/metadata/finalizers/%d", i), Value: plugin.ProtectionFinalizer},
			{Op: "remove", Path: fmt.Sprintf("/metadata/finalizers/%d", i)}}
		if err := r.patch(ctx, c.p, c.cur, ops); err != nil {
			c.p.res.Errors = append(c.p.res.Errors, fmt.Errorf("plugin %s: releasing %s from finalizer %s: %w", c.p.plugin.Name(), ref, plugin.ProtectionFinalizer, err))
		}
	}
}

// heldNote says, for the Profile's condition, why ref, deleted while plugin owner still wants it,
// stays in force under plugin.ProtectionFinalizer, as Kubernetes' PVC protection keeps a claim
// in use (pkg/controller/volume/pvcprotection): the data-plane labels on ns that require it. The
// finalizer holds it whether pods run or not, since a pod may start at any moment under them.
func heldNote(plugins []plugin.Plugin, owner string, ns *corev1.Namespace, ref plugin.Ref) string {
	var labels []string
	for _, p := range plugins {
		dp, ok := p.(plugin.DataPlane)
		if !ok {
			continue
		}
		for key, refs := range dp.DataPlaneLabels() {
			if value, set := ns.Labels[key]; set && slices.Contains(refs, ref) {
				labels = append(labels, key+"="+value)
			}
		}
	}
	slices.Sort(labels)
	why := "plugin " + owner + " still wants it"
	if len(labels) > 0 {
		why = fmt.Sprintf("namespace label %s requires it (without it the namespace's pods would admit any caller)", strings.Join(slices.Compact(labels), ", "))
	}
	return fmt.Sprintf("%s is held: it was deleted, but finalizer %s keeps it in force because %s; a delete of it waits "+
		"until the plugin no longer wants it (a change of mesh mode) or namespace %s is deleted, and then it goes", ref, plugin.ProtectionFinalizer, why, ns.Name)
}

// handOver leaves the objects Revoke keeps for running pods, in a namespace that is going away,
// to the namespace's deletion: each loses the Profile's owner reference, so garbage collection
// does not delete it with the Profile, and plugin.ProtectionFinalizer, which nothing would remove
// once the Profile is gone. An object already being deleted keeps both: releaseProtection lets it
// go once its pods are gone.
func (r *Runner) handOver(ctx context.Context, profile *profilev1.Profile, plans []*planned, obs plugin.Observed, held holds) {
	for _, p := range plans {
		for _, cur := range ownObjects(p, obs) {
			if !held.refs[refOf(cur)] || cur.GetDeletionTimestamp() != nil {
				continue
			}
			ops := handOverOps(cur, profile)
			if len(ops) == 0 {
				continue
			}
			if err := r.patch(ctx, p, cur, ops); err != nil {
				p.res.Errors = append(p.res.Errors, fmt.Errorf("plugin %s: leaving %s to the namespace's deletion: %w", p.plugin.Name(), refOf(cur), err))
				continue
			}
			p.res.Updated = append(p.res.Updated, refOf(cur))
		}
	}
}

// handOverOps are the JSON patch operations that take profile's owner references and
// plugin.ProtectionFinalizer off cur, each behind a test of what it removes, so a concurrent change
// makes the patch fail rather than remove something else. Later indices go first.
func handOverOps(cur client.Object, profile *profilev1.Profile) []patchOp {
	var ops []patchOp
	owners := cur.GetOwnerReferences()
	for i := len(owners) - 1; i >= 0; i-- {
		if profile.UID != "" && owners[i].UID == profile.UID {
			path := fmt.Sprintf("/metadata/ownerReferences/%d", i)
			ops = append(ops, patchOp{Op: "test", Path: path + "/uid", Value: string(profile.UID)}, patchOp{Op: "remove", Path: path})
		}
	}
	finalizers := cur.GetFinalizers()
	for i := len(finalizers) - 1; i >= 0; i-- {
		if finalizers[i] == plugin.ProtectionFinalizer {
			path := fmt.Sprintf("/metadata/finalizers/%d", i)
			ops = append(ops, patchOp{Op: "test", Path: path, Value: plugin.ProtectionFinalizer}, patchOp{Op: "remove", Path: path})
		}
	}
	return ops
}

// patchOp is one JSON patch (RFC 6902) operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// patch sends ops to cur under the plugin's field manager. An object already gone needs nothing.
func (r *Runner) patch(ctx context.Context, p *planned, cur client.Object, ops []patchOp) error {
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	obj, ok := cur.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%T is not a client.Object", cur)
	}
	err = r.Client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, data), client.FieldOwner(plugin.FieldManager(p.plugin.Name())))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// ownObjects are the observed objects the plugin made and may write (see stale: an object of a
// kind the plugin only reads is never its own to write).
func ownObjects(p *planned, obs plugin.Observed) []client.Object {
	var out []client.Object
	for _, cur := range obs.Objects {
		if _, readOnly := cur.(*metav1.PartialObjectMetadata); readOnly || !plugin.IsManagedBy(cur.GetLabels(), p.plugin.Name()) {
			continue
		}
		out = append(out, cur)
	}
	return out
}
