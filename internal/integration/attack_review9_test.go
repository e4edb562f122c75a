package integration

// The ninth review (review9) of the guard at e0c48c8.
//
// Finding R9-1: an Endpoints (or EndpointSlice) address whose targetRef names a pod of another
// namespace makes istiod count that pod as a member of the writer's Service
// (pilot/pkg/serviceregistry/ambient/workloads.go podWorkloadBuilder, matchingServicesWithoutSelectors,
// endpointSliceAddressIndex: the index is keyed by the targetRef's kind, namespace, name and UID,
// and nothing compares the targetRef's namespace with the slice's). The pod's workload then lists
// the writer's Service, and with istiod's PILOT_AUTO_ALLOW_WAYPOINT_POLICY
// (pilot/pkg/features/ambient.go DefaultAllowFromWaypoint) implicitWaypointPolicies gives the pod
// an ALLOW policy for the waypoint of every Service it is a member of: the writer's namespace's
// waypoint, which ztunnel ORs with the namespace's own ztunnel policy (ztunnel assert_rbac joins
// namespace, global and workload policies, whatever their namespace). kubeflow-edit may write
// Services and Endpoints (kubeflow-kubernetes-edit), and kube-controller-manager's EndpointSlice
// mirroring copies an Endpoints' targetRefs into the slice istiod reads.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

// review9EndpointRules are kubeflow-edit's rules on Services and Endpoints
// (kubeflow-kubernetes-edit), and EndpointSlices, which no Kubeflow role grants, to show that a
// role that does is judged the same.
var review9EndpointRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"services", "endpoints"}, Verbs: []string{"create", "update", "patch", "delete"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"create", "update", "patch", "delete"}},
}

func TestReview9EndpointsPointingAtAnotherNamespacesPodAreRefused(t *testing.T) {
	env := envtest.StartFresh(t, 0)
	ctx := context.Background()
	installGuard(t, env.Client, config.ModeAmbient)
	victim, attacker := "r9-victim", "r9-attacker"
	profileIn(t, env.Client, victim)
	profileIn(t, env.Client, attacker)
	member := bound(t, env, userBinding(attacker, "member-edit", editor, nil), "r9-kubeflow-edit-endpoints", review9EndpointRules)

	// The victim's pod, as the owner's workload made it: its name and UID are what the attacker needs.
	pod := podWith(nil)
	pod.Name, pod.Namespace = "model", victim
	require.NoError(t, env.Client.Create(ctx, pod))
	own := podWith(nil)
	own.Name, own.Namespace = "own", attacker
	require.NoError(t, env.Client.Create(ctx, own))

	require.Eventually(t, func() bool {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: attacker, Labels: map[string]string{"istio.io/use-waypoint": "elsewhere"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		err := member.Create(ctx, s, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.ServicesPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the guard takes effect and refuses a Service routed past the waypoint")

	// A Service without a selector, whose endpoints the member writes by hand: admitted.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "borrowed", Namespace: attacker},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	require.NoError(t, member.Create(ctx, svc), "a Service without a selector is refused")

	ref := func(p *corev1.Pod) *corev1.ObjectReference {
		return &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
	}
	// Endpoints, deprecated in Go since Kubernetes 1.33 but still served and mirrored into
	// EndpointSlices, written as an unstructured object.
	endpoints := func(ready, notReady []corev1.EndpointAddress) client.Object {
		subset := map[string]any{"ports": []any{map[string]any{"name": "http", "port": int64(8080), "protocol": "TCP"}}}
		for field, addresses := range map[string][]corev1.EndpointAddress{"addresses": ready, "notReadyAddresses": notReady} {
			var list []any
			for _, a := range addresses {
				m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&a)
				require.NoError(t, err)
				list = append(list, m)
			}
			if list != nil {
				subset[field] = list
			}
		}
		u := &unstructured.Unstructured{Object: map[string]any{"subsets": []any{subset}}}
		u.SetAPIVersion("v1")
		u.SetKind("Endpoints")
		u.SetName(svc.Name)
		u.SetNamespace(attacker)
		return u
	}
	slice := func(r *corev1.ObjectReference) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-manual", Namespace: attacker,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.7"}, TargetRef: r}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}}
	}
	at := func(r *corev1.ObjectReference) corev1.EndpointAddress {
		return corev1.EndpointAddress{IP: "10.244.1.7", TargetRef: r}
	}

	for name, obj := range map[string]client.Object{
		"Endpoints naming the other namespace's pod":                   endpoints([]corev1.EndpointAddress{at(ref(pod))}, nil),
		"Endpoints naming the other namespace's pod as not ready":      endpoints(nil, []corev1.EndpointAddress{at(ref(pod))}),
		"EndpointSlice naming the other namespace's pod":               slice(ref(pod)),
		"Endpoints naming the other namespace's pod after its own pod": endpoints([]corev1.EndpointAddress{at(ref(own)), at(ref(pod))}, nil),
	} {
		err := member.Create(ctx, obj, client.DryRunAll)
		t.Logf("%s: %v", name, err)
		if assert.Error(t, err, "%s: admitted for a kubeflow-edit member of another namespace", name) {
			assert.Contains(t, err.Error(), guard.ServicesPolicy, "%s: refused, but not by the guard", name)
		}
	}
	// What Services without a selector are for: addresses of their own namespace's pods, or of no
	// pod, and a reserved namespace's.
	platform := &corev1.ObjectReference{Kind: "Pod", Namespace: "istio-system", Name: "istiod-0"}
	for name, obj := range map[string]client.Object{
		"Endpoints naming its own namespace's pod":     endpoints([]corev1.EndpointAddress{at(ref(own))}, nil),
		"Endpoints naming no pod":                      endpoints([]corev1.EndpointAddress{at(nil)}, nil),
		"Endpoints naming a reserved namespace's pod":  endpoints([]corev1.EndpointAddress{at(platform)}, nil),
		"EndpointSlice naming its own namespace's pod": slice(ref(own)),
		"EndpointSlice naming no pod":                  slice(nil),
	} {
		assert.NoError(t, member.Create(ctx, obj, client.DryRunAll), "%s: refused", name)
	}
	// Knative's controller writes the Endpoints of a scaled-to-zero Service with its activator's
	// addresses, pods of its own namespace (knative-serving, reserved or not): a service account
	// may name its own namespace's pods. The same Endpoints from the member stay refused.
	activator := &corev1.ObjectReference{Kind: "Pod", Namespace: "knative-serving", Name: "activator-7d9c", UID: "5b0e"}
	knative := bound(t, env, userBinding(attacker, "knative-controller", "system:serviceaccount:knative-serving:controller", nil),
		"r9-knative-endpoints", review9EndpointRules)
	assert.NoError(t, knative.Create(ctx, endpoints([]corev1.EndpointAddress{at(activator)}, nil), client.DryRunAll),
		"Knative's controller naming its activator is refused")
	guardDenied(t, member.Create(ctx, endpoints([]corev1.EndpointAddress{at(activator)}, nil), client.DryRunAll), guard.ServicesPolicy,
		"an address whose targetRef names a pod of another namespace")
}

// Finding R9-2: Kubeflow's PodDefaults (kubeflow.org/v1alpha1, kubeflow-edit through
// kubeflow-poddefaults-edit, kubeflow/manifests applications/admission-webhook) are applied by a
// mutating webhook to every pod created in a Profile's namespace (namespaceSelector
// app.kubernetes.io/part-of=kubeflow-profile), whoever creates it: the webhook merges a PodDefault's
// spec.labels and spec.annotations into the pod's, and its spec.env into every container's
// (kubeflow/kubeflow components/admission-webhook/main.go applyPodDefaultsOnPod, mergeMap,
// applyPodDefaultsOnContainer). The pods of workloads are created by kube-controller-manager, whose
// requests the guard trusts, after their templates were judged: a PodDefault selecting a clean
// template's pods puts istio.io/dataplane-mode=none (istio-cni's enablement selector,
// cni/pkg/util/enablement_selector.go) or ambient.istio.io/bypass-inbound-capture
// (cni/pkg/nodeagent/net.go getPodLevelTrafficOverrides) on pods no policy judges.

// podDefaultCRD is Kubeflow's PodDefault CRD (fixture.PodDefaultCRD).
func podDefaultCRD() *unstructured.Unstructured { return fixture.PodDefaultCRD() }

func podDefault(ns, name string, spec map[string]any) *unstructured.Unstructured {
	spec["selector"] = map[string]any{"matchLabels": map[string]any{"app": "web"}}
	spec["desc"] = "added by a member"
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}
}

func TestReview9PodDefaultsCopyOptOutsOntoPodsTheGuardTrusts(t *testing.T) {
	env := envtest.StartFresh(t, 0)
	ctx := context.Background()
	installGuard(t, env.Client, config.ModeAmbient)
	ns := "r9-poddefaults"
	profileIn(t, env.Client, ns)
	member := crdMember(t, env, ns, podDefaultCRD(), "kubeflow.org/v1alpha1", "PodDefaultList", "r9-kubeflow-edit-poddefaults", []rbacv1.PolicyRule{
		{APIGroups: []string{"kubeflow.org"}, Resources: []string{"poddefaults"}, Verbs: []string{"create", "update", "patch", "delete"}}})
	// The pods of a workload are created by kube-controller-manager's ReplicaSet controller, and the
	// webhook has applied the PodDefault to them when the guard sees them.
	rsController := bound(t, env, userBinding(ns, "replicaset-controller", "system:serviceaccount:kube-system:replicaset-controller", nil),
		"r9-replicaset-controller-pods", contributorPodRules)

	optedOut := podWith(nil)
	optedOut.Name, optedOut.Namespace, optedOut.Labels = "web-1", ns, map[string]string{"app": "web", "istio.io/dataplane-mode": "none"}
	require.Eventually(t, func() bool {
		err := member.Create(ctx, optedOut.DeepCopy(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.PodsPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the guard takes effect and refuses the member's own opted-out pod")
	// The guard judges the pod whoever creates it, after the PodDefault webhook (R9-2 stays refused
	// without the PodDefault check).
	refusedWhoeverCreatesIt(t, rsController, member, optedOut)
	require.Eventually(t, func() bool {
		err := member.Create(ctx, podDefault(ns, "probe", map[string]any{"labels": map[string]any{"istio.io/dataplane-mode": "none"}}), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.KubeflowPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the Kubeflow policy takes effect")

	for name, spec := range map[string]map[string]any{
		"labels istio.io/dataplane-mode=none":                         {"labels": map[string]any{"istio.io/dataplane-mode": "none"}},
		"annotation ambient.istio.io/bypass-inbound-capture":          {"annotations": map[string]any{"ambient.istio.io/bypass-inbound-capture": "true"}},
		"annotation istio.io/reroute-virtual-interfaces":              {"annotations": map[string]any{"istio.io/reroute-virtual-interfaces": "eth0"}},
		"label istio.io/use-waypoint of another waypoint":             {"labels": map[string]any{"istio.io/use-waypoint": "elsewhere"}},
		"env DISABLE_ENVOY, merged into a template's own istio-proxy": {"env": []any{map[string]any{"name": "DISABLE_ENVOY", "value": "true"}}},
		"an init container named istio-init":                          {"initContainers": []any{map[string]any{"name": "istio-init", "image": "registry.example.com/noop:1"}}},
	} {
		err := member.Create(ctx, podDefault(ns, objectName(name), spec), client.DryRunAll)
		t.Logf("%s: %v", name, err)
		if assert.Error(t, err, "%s: a PodDefault that the webhook copies onto pods the guard trusts is admitted for a kubeflow-edit member", name) {
			assert.Contains(t, err.Error(), guard.KubeflowPolicy, "%s: refused, but not by the guard", name)
		}
	}
	assert.NoError(t, member.Create(ctx, podDefault(ns, "plain", map[string]any{
		"labels": map[string]any{"team": "ml"}, "env": []any{map[string]any{"name": "HF_HOME", "value": "/data"}},
	}), client.DryRunAll), "a PodDefault without Istio's switches is refused")
}

// Finding R9-3: Kubeflow's notebook controller copies a Notebook's annotation
// notebooks.kubeflow.org/http-headers-request-set, any JSON object of headers, into the
// headers.request.set of the VirtualService that routes the ingress gateway to the notebook
// (kubeflow/notebooks components/notebook-controller/controllers/notebook_controller.go
// generateVirtualServices), and Istio makes "set" overwrite the request's header
// (pilot/pkg/networking/core/route/route.go translateAppendHeaders: OVERWRITE_IF_EXISTS_OR_ADD).
// The owner policy admits the ingress gateway for the user its user-id header names: a Notebook
// that sets kubeflow-userid to the namespace's owner lets every user who can log in reach it as
// the owner. kubeflow-edit may create Notebooks (kubeflow-notebooks-edit).

func notebookCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "notebooks.kubeflow.org"},
		"spec": map[string]any{"group": "kubeflow.org", "scope": "Namespaced",
			"names": map[string]any{"kind": "Notebook", "listKind": "NotebookList", "plural": "notebooks", "singular": "notebook"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}},
	}}
}

func notebook(ns, name, headers string) *unstructured.Unstructured {
	nb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": name, "image": "registry.example.com/jupyter:1"}}}}},
	}}
	if headers != "" {
		nb.SetAnnotations(map[string]string{"notebooks.kubeflow.org/http-headers-request-set": headers})
	}
	return nb
}

func TestReview9NotebooksMayNotSetTheUserIDHeader(t *testing.T) {
	env := envtest.StartFresh(t, 0)
	ctx := context.Background()
	installGuard(t, env.Client, config.ModeAmbient)
	ns := "r9-notebooks"
	profileIn(t, env.Client, ns)
	member := crdMember(t, env, ns, notebookCRD(), "kubeflow.org/v1", "NotebookList", "r9-kubeflow-edit-notebooks", []rbacv1.PolicyRule{
		{APIGroups: []string{"kubeflow.org"}, Resources: []string{"notebooks"}, Verbs: []string{"create", "update", "patch", "delete"}}})
	require.Eventually(t, func() bool {
		err := member.Create(ctx, notebook(ns, "probe", `{"kubeflow-userid":"alice@example.com"}`), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.KubeflowPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the Kubeflow policy takes effect")

	for name, headers := range map[string]string{
		"the user-id header":                     `{"kubeflow-userid":"alice@example.com"}`,
		"the user-id header in capitals":         `{"Kubeflow-Userid":"alice@example.com"}`,
		"the user-id header with a JSON escape":  `{"kubeflow\u002duserid":"alice@example.com"}`,
		"the user-id header after RStudio's own": `{"X-RStudio-Root-Path":"/notebook/r9-notebooks/lab/","kubeflow-userid":"alice@example.com"}`,
	} {
		err := member.Create(ctx, notebook(ns, objectName(name), headers), client.DryRunAll)
		t.Logf("%s: %v", name, err)
		if assert.Error(t, err, "%s: a Notebook whose route sets the header the owner policy trusts is admitted for a kubeflow-edit member", name) {
			assert.Contains(t, err.Error(), guard.KubeflowPolicy, "%s: refused, but not by the guard", name)
		}
	}
	// What the Jupyter web app sets for RStudio (spawner_ui_config.yaml), and no header at all.
	assert.NoError(t, member.Create(ctx, notebook(ns, "rstudio", `{"X-RStudio-Root-Path":"/notebook/r9-notebooks/rstudio/"}`), client.DryRunAll))
	assert.NoError(t, member.Create(ctx, notebook(ns, "lab", ""), client.DryRunAll))
}

// crdMember installs crd, waits until the API server lists its objects (apiVersion, listKind) in
// ns, and returns a kubeflow-edit member of ns bound, through the ClusterRole role, to rules and
// the pod rules.
func crdMember(t *testing.T, env *envtest.Env, ns string, crd *unstructured.Unstructured, apiVersion, listKind, role string, rules []rbacv1.PolicyRule) client.Client {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, crd))
	require.Eventually(t, func() bool {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(apiVersion)
		l.SetKind(listKind)
		return env.Client.List(ctx, l, client.InNamespace(ns)) == nil
	}, 30*time.Second, 200*time.Millisecond, "the %s CRD is served", listKind)
	return bound(t, env, userBinding(ns, "member-edit", editor, nil), role, append(rules, contributorPodRules...))
}
