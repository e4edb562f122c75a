package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"istio.io/api/label"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// This file finds what could run as the waypoint, or pass as its pods, in a managed namespace,
// made before the guard was installed (the guard judges writes, not what exists) or by its
// break-glass group. The namespace's ztunnel policy admits the waypoint's ServiceAccount, and its
// owner policy is enforced inside the waypoint's pods, so each of these decides who gets in:
//
//   - a pod that runs as the waypoint's ServiceAccount, or carries its gateway-name label, and is
//     not istiod's waypoint's: istiod's Deployment, its ReplicaSet (by UID), the pod's containers
//     and volumes those of the ReplicaSet's template (podtemplate.go); terminating or not;
//   - the waypoint's Deployment with a spec field owned by anyone but istiod's apply: istiod adopts
//     an existing Deployment that carries its managed label and keeps the fields it does not set
//     (pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go, canManage; it applies with the
//     field manager PILOT_GATEWAY_API_CONTROLLER_NAME, default istio.io/gateway-controller, so it
//     is recognised by what it owns: foreignWriters); `kubectl rollout restart`'s annotation aside;
//   - a ReplicaSet named like the waypoint's (the guard's pod check passes the pods of a ReplicaSet
//     named <waypoint>-*) that istiod's Deployment does not control;
//   - a ServiceAccount named like the waypoint that istiod did not make: tokens issued for it
//     before are bound to its UID, so deleting it ends them;
//   - a token Secret for that ServiceAccount (listed as metadata only, where the reader may);
//   - a Kubeflow PodDefault that would set the waypoint's ServiceAccount or Gateway labels on
//     pods, or whose selector matches the waypoint's pods (the webhook merges its env and volumes
//     into istio-proxy).

// restartedAt is the one spec field `kubectl rollout restart` sets (field manager
// kubectl-rollout), which istiod's later applies never take back: it restarts the pods and changes
// nothing they run, so whoever owns it does not make the Deployment foreign.
var restartedAt = []string{"f:template", "f:metadata", "f:annotations", "f:kubectl.kubernetes.io/restartedAt"}

// managedLabel is the field set path of istiod's label, which istiod's apply owns.
var managedLabel = []string{"f:metadata", "f:labels", "f:" + label.GatewayManaged.Name}

// podDefaults is the kind of Kubeflow's PodDefaults, listed as unstructured so the platform check
// needs no Kubeflow types; a cluster without them is skipped.
var podDefaults = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1alpha1", Kind: "PodDefaultList"}

// checkWaypointIdentity reports, in the managed namespaces, what could run as the waypoint or pass
// as its pods without being istiod's waypoint. What the reader may not list is in notChecked.
func checkWaypointIdentity(ctx context.Context, r client.Reader, cfg *config.Config) (findings []Finding, notChecked []string, err error) {
	managed, err := managedNamespaces(ctx, r, cfg)
	if err != nil || len(managed) == 0 {
		return nil, nil, err
	}
	wp := cfg.Mesh.Waypoint.Name
	w := &identityWalk{r: r, wp: wp, managed: managed, deployments: map[string]*appsv1.Deployment{}}
	for _, step := range []func(context.Context) error{w.deploymentsAndReplicaSets, w.pods, w.serviceAccounts, w.podDefaults} {
		if err := step(ctx); err != nil {
			return nil, nil, err
		}
	}
	if err := w.tokenSecrets(ctx); apierrors.IsForbidden(err) {
		notChecked = append(notChecked, fmt.Sprintf("token Secrets of the ServiceAccount %s: the reader may not list Secrets "+
			"(the controller is not given that right); run `profile-plugins check` as a cluster admin", wp))
	} else if err != nil {
		return nil, nil, err
	}
	return w.found, notChecked, nil
}

// identityWalk holds what checkWaypointIdentity has read so far.
type identityWalk struct {
	r       client.Reader
	wp      string
	managed map[string]bool
	// deployments are istiod's waypoint Deployments, by namespace, whose spec only istiod set.
	deployments map[string]*appsv1.Deployment
	// replicaSets are the UIDs of the ReplicaSets those Deployments control.
	replicaSets map[types.UID]*appsv1.ReplicaSet
	found       []Finding
}

func (w *identityWalk) report(kind, namespace, name, problem, fix string) {
	w.found = append(w.found, Finding{Kind: FindingWaypointIdentityShared, What: kind + "/" + name, Namespace: namespace,
		Problem: fmt.Sprintf("%s %s/%s %s", kind, namespace, name, problem), Fix: fix})
}

const deleteAsBreakGlass = "delete it as a member of guard.breakGlassGroup (the guard refuses a member's delete); istiod makes the waypoint's own again"

// deploymentsAndReplicaSets judges the waypoint's Deployment and every ReplicaSet named like its
// ReplicaSets, listed cluster-wide as metadata and read in full only where the name matches.
func (w *identityWalk) deploymentsAndReplicaSets(ctx context.Context) error {
	deps, err := w.named(ctx, appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
	if err != nil {
		return err
	}
	for _, m := range deps {
		if m.Name != w.wp {
			continue
		}
		d := &appsv1.Deployment{}
		if err := w.r.Get(ctx, client.ObjectKeyFromObject(&m), d); err != nil {
			return ignoreGone(err, "reading Deployment %s/%s", m.Namespace, m.Name)
		}
		if why := w.notIstiods(ctx, d); why != "" {
			w.report("Deployment", d.Namespace, d.Name, "is the waypoint's Deployment, but "+why+
				": istiod keeps what others set on a Deployment it adopts, and its pods hold the identity the namespace's policies admit", deleteAsBreakGlass)
			continue
		}
		w.deployments[d.Namespace] = d
	}
	w.replicaSets = map[types.UID]*appsv1.ReplicaSet{}
	sets, err := w.named(ctx, appsv1.SchemeGroupVersion.WithKind("ReplicaSetList"))
	if err != nil {
		return err
	}
	for _, m := range sets {
		if !strings.HasPrefix(m.Name, w.wp+"-") {
			continue
		}
		rs := &appsv1.ReplicaSet{}
		if err := w.r.Get(ctx, client.ObjectKeyFromObject(&m), rs); err != nil {
			return ignoreGone(err, "reading ReplicaSet %s/%s", m.Namespace, m.Name)
		}
		if d := w.deployments[rs.Namespace]; d != nil && controlledBy(rs.OwnerReferences, "Deployment", d.Name, d.UID) {
			w.replicaSets[rs.UID] = rs
			continue
		}
		w.report("ReplicaSet", rs.Namespace, rs.Name, fmt.Sprintf("is named like the ReplicaSets of the waypoint's Deployment (%s-*) but is not one of them: "+
			"the pods it makes would pass as the waypoint's", w.wp), deleteAsBreakGlass)
		// Its owner would make it again: a Deployment named <waypoint>-<x> names its ReplicaSets
		// <waypoint>-<x>-<hash> (the final review of Dec 5).
		if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && (ref.Kind != "Deployment" || ref.Name != w.wp) {
			w.report(ref.Kind, rs.Namespace, ref.Name, fmt.Sprintf("owns the ReplicaSet %s, named like the waypoint's, and would make it again", rs.Name), deleteAsBreakGlass)
		}
	}
	return nil
}

// notIstiods says why d is not istiod's own waypoint Deployment, or "".
func (w *identityWalk) notIstiods(ctx context.Context, d *appsv1.Deployment) string {
	if _, ok := d.Labels[label.GatewayManaged.Name]; !ok {
		return "it lacks istiod's label " + label.GatewayManaged.Name
	}
	gw := &gatewayv1.Gateway{}
	if err := w.r.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: w.wp}, gw); err != nil || !ownedBy(d.OwnerReferences, "Gateway", gw.Name, gw.UID) {
		return "no Gateway " + w.wp + " of this namespace owns it"
	}
	if others := foreignWriters(d.ManagedFields, ownsSpec); len(others) > 0 {
		return fmt.Sprintf("fields of its spec were set by %s, not by istiod's apply alone", strings.Join(others, ", "))
	}
	return ""
}

// foreignWriters names the field managers, other than istiod's apply, of the fields writes
// selects in a field set (subresources such as status and scale aside; a field set that cannot be
// read is taken to write them). istiod's field manager is its configuration's to name
// (PILOT_GATEWAY_API_CONTROLLER_NAME), so istiod's apply is recognised by what it does: it is the
// only writer, an Apply, and it owns istiod's label gateway.istio.io/managed. Only an apply
// counts, since a name is any client's to choose: a later apply drops every field the same
// manager's earlier applies set and this one does not.
func foreignWriters(entries []metav1.ManagedFieldsEntry, writes func(fieldSet) bool) []string {
	var writers, others []string
	for _, e := range entries {
		set, err := readFieldSet(e.FieldsV1)
		if e.Subresource != "" || (err == nil && !writes(set)) {
			continue
		}
		name := fmt.Sprintf("%s (%s)", e.Manager, e.Operation)
		writers = append(writers, name)
		if err != nil || e.Operation != metav1.ManagedFieldsOperationApply || !set.has(managedLabel) {
			others = append(others, name)
		}
	}
	switch {
	case len(writers) == 1 && len(others) == 0:
		return nil
	case len(writers) == 0:
		return []string{"no field manager (none is istiod's apply)"}
	case len(others) == 0:
		others = writers // several applies that own istiod's label: which is istiod's is unknown
	}
	slices.Sort(others)
	return slices.Compact(others)
}

// fieldSet is a managedFields entry's field set (FieldsV1) as a tree.
type fieldSet map[string]any

func readFieldSet(f *metav1.FieldsV1) (fieldSet, error) {
	var set fieldSet
	if f == nil {
		return set, nil
	}
	return set, json.Unmarshal(f.GetRawBytes(), &set)
}

// has is whether the set holds the field at path.
func (s fieldSet) has(path []string) bool {
	if len(path) == 0 {
		return true
	}
	child, ok := s[path[0]].(map[string]any)
	return ok && fieldSet(child).has(path[1:])
}

// holdsBesides is whether the set holds a field other than the one at path, not counting the
// markers "." of the sets on the way to it.
func (s fieldSet) holdsBesides(path []string) bool {
	for k, v := range s {
		switch child, _ := v.(map[string]any); {
		case k == ".":
		case len(path) > 0 && k == path[0]:
			if fieldSet(child).holdsBesides(path[1:]) {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// ownsSpec is whether a field set holds a field under spec other than restartedAt.
func ownsSpec(s fieldSet) bool {
	spec, ok := s["f:spec"].(map[string]any)
	return ok && fieldSet(spec).holdsBesides(restartedAt)
}

// ownsAny is whether a field set holds anything.
func ownsAny(s fieldSet) bool { return len(s) > 0 }

// pods judges every pod of a managed namespace that runs as the waypoint's ServiceAccount or
// carries its gateway-name label (two selected Lists). A terminating pod too: it runs, and its
// bound token stays valid, until its grace period ends, which whoever deletes it chooses.
func (w *identityWalk) pods(ctx context.Context) error {
	seen := map[types.UID]bool{}
	for _, opt := range []client.ListOption{
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.serviceAccountName", w.wp)},
		client.MatchingLabels{label.IoK8sNetworkingGatewayGatewayName.Name: w.wp},
	} {
		list := &corev1.PodList{}
		if err := w.r.List(ctx, list, opt); err != nil {
			return fmt.Errorf("listing the pods that run as, or are labelled like, the waypoint %s: %w", w.wp, err)
		}
		for i := range list.Items {
			p := &list.Items[i]
			if !w.managed[p.Namespace] || seen[p.UID] {
				continue
			}
			seen[p.UID] = true
			if why := w.podNotIstiods(p); why != "" {
				w.report("Pod", p.Namespace, p.Name, "runs as the waypoint's ServiceAccount or carries its gateway-name label, but "+why+
					": it holds the identity the namespace's policies admit, or takes the waypoint's traffic", podFix(p))
			}
		}
	}
	return nil
}

// podFix is how to be rid of an impostor pod p. A terminating one runs until its grace period
// ends; a delete with a shorter one shortens it.
func podFix(p *corev1.Pod) string {
	fix := deleteAsBreakGlass + ", with whatever made it"
	if p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil {
		fix += fmt.Sprintf("; it is being deleted but may run %ds more from %s: delete it again with --grace-period=1",
			*p.DeletionGracePeriodSeconds, p.DeletionTimestamp.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return fix
}

// podNotIstiods says why p is not a pod of istiod's waypoint, or "".
func (w *identityWalk) podNotIstiods(p *corev1.Pod) string {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return "no ReplicaSet controls it"
	}
	rs := w.replicaSets[ref.UID]
	if rs == nil {
		return "its ReplicaSet " + ref.Name + " is not one of istiod's waypoint Deployment"
	}
	if p.Spec.ServiceAccountName != w.wp || p.Labels[label.IoK8sNetworkingGatewayGatewayName.Name] != w.wp {
		return "it does not run as istiod's template says"
	}
	if diff := templateDiff(p.Spec, rs.Spec.Template.Spec); diff != "" {
		return "it does not run what its ReplicaSet's template says (" + diff + ")"
	}
	return ""
}

// serviceAccounts judges the ServiceAccount named like the waypoint in each managed namespace.
func (w *identityWalk) serviceAccounts(ctx context.Context) error {
	for _, ns := range sortedKeys(w.managed) {
		sa := &corev1.ServiceAccount{}
		if err := w.r.Get(ctx, client.ObjectKey{Namespace: ns, Name: w.wp}, sa); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("reading ServiceAccount %s/%s: %w", ns, w.wp, err)
		}
		if _, ok := sa.Labels[label.GatewayManaged.Name]; ok && len(foreignWriters(sa.ManagedFields, ownsAny)) == 0 {
			continue
		}
		w.report("ServiceAccount", ns, sa.Name, "is the waypoint's ServiceAccount, but istiod did not make it (or not alone): "+
			"tokens issued for it before the guard can still be exchanged for the waypoint's certificate",
			"delete it as a member of guard.breakGlassGroup: istiod makes it again, and every token bound to the old one stops working")
	}
	return nil
}

// tokenSecrets reports the token Secrets, read as metadata only, for the waypoint's ServiceAccount.
func (w *identityWalk) tokenSecrets(ctx context.Context) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := w.r.List(ctx, list, client.MatchingFields{"type": string(corev1.SecretTypeServiceAccountToken)}); err != nil {
		return fmt.Errorf("listing token Secrets: %w", err)
	}
	for _, s := range list.Items {
		if w.managed[s.Namespace] && s.Annotations[corev1.ServiceAccountNameKey] == w.wp {
			w.report("Secret", s.Namespace, s.Name, "holds a token of the waypoint's ServiceAccount, which istiod exchanges for the waypoint's certificate",
				"delete it as a member of guard.breakGlassGroup, and the waypoint's ServiceAccount with it (istiod makes that again)")
		}
	}
	return nil
}

// podDefaults reports Kubeflow's PodDefaults that would give pods the waypoint's ServiceAccount or
// Gateway labels, or whose selector matches the labels of the waypoint's pods: those of istiod's
// Deployment's template where there is one, else the labels istiod always gives them.
func (w *identityWalk) podDefaults(ctx context.Context) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(podDefaults)
	if err := w.r.List(ctx, list); meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("listing PodDefaults: %w", err)
	}
	for _, pd := range list.Items {
		if !w.managed[pd.GetNamespace()] {
			continue
		}
		if why := w.podDefaultReaches(pd); why != "" {
			w.report("PodDefault", pd.GetNamespace(), pd.GetName(), why+": Kubeflow's webhook would put the waypoint's identity on a member's pods, "+
				"or its environment and volumes into the waypoint's proxy", deleteAsBreakGlass)
		}
	}
	return nil
}

// podDefaultReaches says how the PodDefault pd reaches the waypoint, or "".
func (w *identityWalk) podDefaultReaches(pd unstructured.Unstructured) string {
	if sa, _, _ := unstructured.NestedString(pd.Object, "spec", "serviceAccountName"); sa == w.wp {
		return "it sets the ServiceAccount " + w.wp
	}
	podLabels, _, _ := unstructured.NestedStringMap(pd.Object, "spec", "labels")
	for k := range podLabels {
		if strings.HasPrefix(k, "gateway.networking.k8s.io/") {
			return "it sets the label " + k
		}
	}
	raw, found, _ := unstructured.NestedMap(pd.Object, "spec", "selector")
	sel := &metav1.LabelSelector{}
	if found {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, sel); err != nil {
			return "its selector does not parse"
		}
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return "its selector does not parse"
	}
	if s.Matches(labels.Set(w.waypointPodLabels(pd.GetNamespace()))) {
		return "its selector matches the waypoint's pods"
	}
	return ""
}

// waypointPodLabels are the labels of the waypoint's pods in namespace ns.
func (w *identityWalk) waypointPodLabels(ns string) map[string]string {
	if d := w.deployments[ns]; d != nil {
		return d.Spec.Template.Labels
	}
	return map[string]string{label.IoK8sNetworkingGatewayGatewayName.Name: w.wp, label.GatewayManaged.Name: "istio.io-mesh-controller"}
}

// named lists the objects of a kind cluster-wide as metadata, keeping those in managed namespaces.
func (w *identityWalk) named(ctx context.Context, gvk schema.GroupVersionKind) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk)
	if err := w.r.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing %s as metadata: %w", strings.TrimSuffix(gvk.Kind, "List"), err)
	}
	return slices.DeleteFunc(list.Items, func(m metav1.PartialObjectMetadata) bool { return !w.managed[m.Namespace] }), nil
}

// controlledBy is whether refs name kind/name with uid as controller.
func controlledBy(refs []metav1.OwnerReference, kind, name string, uid types.UID) bool {
	return slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool {
		return r.Kind == kind && r.Name == name && r.UID == uid && r.Controller != nil && *r.Controller
	})
}

// ownedBy is whether refs name kind/name with uid.
func ownedBy(refs []metav1.OwnerReference, kind, name string, uid types.UID) bool {
	return slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.Kind == kind && r.Name == name && r.UID == uid })
}

// ignoreGone is nil for an object deleted since it was listed, else err wrapped with what was read.
func ignoreGone(err error, format string, args ...any) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
