package guard_test

// Services, Endpoints and EndpointSlices on the real API server: what a member may point at.

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

	"github.com/kubeflow-ambient/profile-plugins/guard"
)

// endpointRules are kubeflow-edit's rules on Services and Endpoints
// (kubeflow-kubernetes-edit), and EndpointSlices, which no Kubeflow role grants, to show that a
// role that does is judged the same.
var endpointRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"services", "endpoints"}, Verbs: []string{"create", "update", "patch", "delete"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"create", "update", "patch", "delete"}},
}

// An Endpoints (or EndpointSlice) address whose targetRef names a pod of another
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
// mirroring copies an Endpoints' targetRefs into the slice istiod reads (review R9-1,
// docs/security/reviews.md).
func TestEndpointsNamingForeignPodsRefused(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	env := s.env
	ctx := context.Background()
	victim, attacker := profileNamespace(t, s, "endpoints-victim"), profileNamespace(t, s, "endpoints-attacker")
	member := member(t, s, attacker, "guard-test-kubeflow-edit-endpoints", endpointRules)

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
	knative := bound(t, s, userBinding(attacker, "knative-controller", "system:serviceaccount:knative-serving:controller"),
		"guard-test-knative-endpoints", endpointRules)
	assert.NoError(t, knative.Create(ctx, endpoints([]corev1.EndpointAddress{at(activator)}, nil), client.DryRunAll),
		"Knative's controller naming its activator is refused")
	guardDenied(t, member.Create(ctx, endpoints([]corev1.EndpointAddress{at(activator)}, nil), client.DryRunAll), guard.ServicesPolicy,
		"an address whose targetRef names a pod of another namespace")
}

// Istio 1.32's canary waypoint labels send a share of a Service's traffic to another waypoint
// (pilot/pkg/serviceregistry/ambient/waypoints.go getUseWaypointCanary). Another namespace's would
// fail closed at the ztunnel policy, yet take that share from the owner's waypoint: only the
// namespace's own is admitted.
func TestCanaryWaypointOnlyOwn(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	cfg := s.cfg
	ctx := context.Background()
	ns := profileNamespace(t, s, "canary")
	member := member(t, s, ns, "guard-test-kubeflow-edit-services",
		[]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"create", "update", "patch"}}})
	service := func(name string, labels map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	elsewhere := map[string]string{"istio.io/use-waypoint-canary": "waypoint", "istio.io/use-waypoint-canary-namespace": "attacker"}
	require.Eventually(t, func() bool {
		err := member.Create(ctx, service("probe", elsewhere), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.ServicesPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the guard takes effect and refuses another namespace's canary waypoint")
	guardDenied(t, member.Create(ctx, service("other-name", map[string]string{"istio.io/use-waypoint-canary": "canary"}), client.DryRunAll),
		guard.ServicesPolicy, "istio.io/use-waypoint-canary=canary sends a share of the traffic past this namespace's waypoint")
	require.NoError(t, member.Create(ctx, service("own", map[string]string{
		"istio.io/use-waypoint-canary": cfg.Mesh.Waypoint.Name, "istio.io/use-waypoint-canary-namespace": ns,
	}), client.DryRunAll), "the namespace's own waypoint as canary is refused")
	require.NoError(t, member.Create(ctx, service("none", map[string]string{"istio.io/use-waypoint-canary": "none"}), client.DryRunAll),
		"no canary is refused")
}
