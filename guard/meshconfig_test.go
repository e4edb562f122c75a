package guard_test

// Mesh configuration in a managed namespace (checks mesh-config/*) on the API server: a member
// given write on Istio's and the Gateway API's objects (Kubeflow's roles grant none) cannot add
// what would widen the namespace or skip its waypoint; what the admin allows by name, kfam's
// contributor policies and policies that only narrow stay possible.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

func meshObject(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}
	return u
}

func TestMeshConfigurationThatCouldWidenANamespaceIsRefused(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := s.namespace(t, "meshconfig")
	c := s.as(t, widened)
	targetWaypoint := []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": wp}}
	for id, objs := range map[string][]*unstructured.Unstructured{
		"mesh-config/proxy-configuration": {
			meshObject("networking.istio.io/v1alpha3", "EnvoyFilter", ns, "drop-rbac", map[string]any{"targetRefs": targetWaypoint,
				"configPatches": []any{map[string]any{"applyTo": "HTTP_FILTER", "patch": map[string]any{"operation": "REMOVE"}}}}),
			meshObject("extensions.istio.io/v1alpha1", "WasmPlugin", ns, "mine", map[string]any{"targetRefs": targetWaypoint, "url": "oci://example.com/mine"}),
			meshObject("networking.istio.io/v1beta1", "ProxyConfig", ns, "env", map[string]any{"environmentVariables": map[string]any{"ISTIO_BOOTSTRAP_OVERRIDE": "/tmp/x"}}),
			meshObject("networking.istio.io/v1", "Sidecar", ns, "sc", map[string]any{"egress": []any{map[string]any{"hosts": []any{"./*"}}}}),
		},
		"mesh-config/peer-authentication": {meshObject("security.istio.io/v1", "PeerAuthentication", ns, "plain", map[string]any{"mtls": map[string]any{"mode": "DISABLE"}})},
		"mesh-config/workload-registry": {
			meshObject("networking.istio.io/v1", "WorkloadEntry", ns, "as-waypoint", map[string]any{"address": "10.0.0.9", "serviceAccount": wp}),
			meshObject("networking.istio.io/v1", "WorkloadGroup", ns, "group", map[string]any{"template": map[string]any{"serviceAccount": wp}}),
			meshObject("networking.istio.io/v1", "ServiceEntry", ns, "entry", map[string]any{"hosts": []any{"x.example.com"}, "resolution": "STATIC",
				"ports": []any{map[string]any{"number": int64(80), "name": "http", "protocol": "HTTP"}}}),
		},
		"mesh-config/gateways": {meshObject("gateway.networking.k8s.io/v1", "Gateway", ns, "side-door", map[string]any{"gatewayClassName": "istio",
			"listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}})},
		"mesh-config/allow-policies": {meshObject("security.istio.io/v1", "AuthorizationPolicy", ns, "let-bob-in", map[string]any{"targetRefs": targetWaypoint,
			"rules": []any{map[string]any{"when": []any{map[string]any{"key": "request.headers[kubeflow-userid]", "values": []any{"bob@example.com"}}}}}})},
	} {
		for _, o := range objs {
			refusedBy(t, c.Create(ctx, o.DeepCopy(), client.DryRunAll), id, "%s %s", o.GetKind(), o.GetName())
		}
	}
	// What the admin allows by name, what only narrows, and kfam's contributor policies pass.
	allowed := meshObject("networking.istio.io/v1alpha3", "EnvoyFilter", ns, "allowed-by-the-admin", map[string]any{"targetRefs": targetWaypoint})
	require.NoError(t, c.Create(ctx, allowed, client.DryRunAll), "an EnvoyFilter guard.meshConfigAllowed names")
	deny := meshObject("security.istio.io/v1", "AuthorizationPolicy", ns, "deny-bob", map[string]any{"action": "DENY", "targetRefs": targetWaypoint,
		"rules": []any{map[string]any{"when": []any{map[string]any{"key": "request.headers[kubeflow-userid]", "values": []any{"bob@example.com"}}}}}})
	require.NoError(t, c.Create(ctx, deny, client.DryRunAll), "a DENY policy only narrows")
	contributor := meshObject("security.istio.io/v1beta1", "AuthorizationPolicy", ns, "user-bob-example-com-clusterrole-edit", map[string]any{
		"rules": []any{map[string]any{"when": []any{map[string]any{"key": "request.headers[kubeflow-userid]", "values": []any{"bob@example.com"}}}}}})
	require.NoError(t, s.as(t, kfam).Create(ctx, contributor, client.DryRunAll), "kfam writes a contributor's policy")
	refusedBy(t, c.Create(ctx, meshObject("gateway.networking.k8s.io/v1", "Gateway", ns, wp, map[string]any{"gatewayClassName": "istio-waypoint",
		"listeners": []any{map[string]any{"name": "mesh", "port": int64(15008), "protocol": "HBONE"}}}), client.DryRunAll), "managed-objects/reserved-names", "the waypoint Gateway is the plugins'")
}

// Kubeflow's own writers keep working with the guard in force: the notebook controller culls a
// notebook (scales its StatefulSet to 0) and writes its VirtualService; the stock profiles
// controller writes its owner policy beside the plugins' (no-fork install); kfam writes a
// contributor's; istiod's re-deploy is in TestWaypointObjectsAreIstiodsAlone.
func TestKubeflowsWritersKeepWorkingUnderTheGuard(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := s.namespace(t, "kf-writers")
	const notebookController = "system:serviceaccount:kubeflow:notebook-controller-service-account"
	fixture.ClusterAdmin(t, s.env.Client, "guard-test-notebook-controller", rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: notebookController})
	nb := s.as(t, notebookController)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "nb", Namespace: ns}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(1)),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"statefulset": "nb"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"statefulset": "nb", "notebook-name": "nb"}}, Spec: plainPod("", "").Spec}}}
	require.NoError(t, nb.Create(ctx, sts), "the notebook controller makes the notebook's StatefulSet")
	sts.Spec.Replicas = ptr.To(int32(0))
	require.NoError(t, nb.Update(ctx, sts, client.DryRunAll), "and culls it")
	vs := meshObject("networking.istio.io/v1", "VirtualService", ns, "notebook-"+ns+"-nb", map[string]any{"hosts": []any{"*"},
		"gateways": []any{"kubeflow/kubeflow-gateway"}, "http": []any{map[string]any{"route": []any{map[string]any{"destination": map[string]any{"host": "nb." + ns + ".svc.cluster.local"}}}}}})
	require.NoError(t, nb.Create(ctx, vs, client.DryRunAll), "and routes to it")
	owner := meshObject("security.istio.io/v1beta1", "AuthorizationPolicy", ns, "ns-owner-access-istio", map[string]any{
		"rules": []any{map[string]any{"when": []any{map[string]any{"key": "source.namespace", "values": []any{ns}}}}}})
	require.NoError(t, s.as(t, kfam).Create(ctx, owner, client.DryRunAll), "the stock profiles controller writes its owner policy")
}

// No route in a user namespace writes the user-id header, in any case, anywhere a route can
// (a VirtualService's http or route headers; an HTTPRoute's or GRPCRoute's header modifier, on a
// rule or a backend); other headers, like the notebook controller's for RStudio, are left alone.
func TestRoutesLeaveTheUserIDHeaderAlone(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := s.namespace(t, "user-id-header")
	c := s.as(t, widened)
	dest := map[string]any{"destination": map[string]any{"host": "web." + ns + ".svc.cluster.local"}}
	vs := func(http map[string]any) client.Object {
		http["route"] = append([]any{dest}, anySlice(http["route"])...)
		return meshObject("networking.istio.io/v1", "VirtualService", ns, "routes", map[string]any{
			"hosts": []any{"*"}, "gateways": []any{"kubeflow/kubeflow-gateway"}, "http": []any{http}})
	}
	headers := func(op string, v any) map[string]any { return map[string]any{"request": map[string]any{op: v}} }
	modifier := func(op string, v any) []any {
		return []any{map[string]any{"type": "RequestHeaderModifier", "requestHeaderModifier": map[string]any{op: v}}}
	}
	backend := map[string]any{"name": "web", "port": int64(80)}
	route := func(kind string, rule map[string]any) client.Object {
		if rule["backendRefs"] == nil {
			rule["backendRefs"] = []any{backend}
		}
		return meshObject("gateway.networking.k8s.io/v1", kind, ns, "routes", map[string]any{
			"parentRefs": []any{map[string]any{"name": "ingress", "namespace": "kubeflow"}}, "rules": []any{rule}})
	}
	for name, obj := range map[string]client.Object{
		"VirtualService http set":    vs(map[string]any{"headers": headers("set", map[string]any{"kubeflow-userid": "alice@example.com"})}),
		"VirtualService http add":    vs(map[string]any{"headers": headers("add", map[string]any{"KUBEFLOW-USERID": "alice@example.com"})}),
		"VirtualService http remove": vs(map[string]any{"headers": headers("remove", []any{"Kubeflow-Userid"})}),
		"VirtualService route set":   vs(map[string]any{"route": []any{map[string]any{"destination": dest["destination"], "headers": headers("set", map[string]any{"kubeflow-userid": "a"})}}}),
		"HTTPRoute rule set":         route("HTTPRoute", map[string]any{"filters": modifier("set", []any{map[string]any{"name": "Kubeflow-UserId", "value": "alice@example.com"}})}),
		"HTTPRoute rule remove":      route("HTTPRoute", map[string]any{"filters": modifier("remove", []any{"kubeflow-userid"})}),
		"HTTPRoute backend add":      route("HTTPRoute", map[string]any{"backendRefs": []any{map[string]any{"name": "web", "port": int64(80), "filters": modifier("add", []any{map[string]any{"name": "kubeflow-userid", "value": "a"}})}}}),
		"GRPCRoute rule set":         route("GRPCRoute", map[string]any{"filters": modifier("set", []any{map[string]any{"name": "kubeflow-userid", "value": "a"}})}),
	} {
		refusedBy(t, c.Create(ctx, obj, client.DryRunAll), "mesh-config/user-id-header", name)
	}
	for name, obj := range map[string]client.Object{
		"VirtualService with another header": vs(map[string]any{"headers": headers("set", map[string]any{"X-RStudio-Root-Path": "/notebook/" + ns + "/rs/"})}),
		"HTTPRoute with another header":      route("HTTPRoute", map[string]any{"filters": modifier("set", []any{map[string]any{"name": "x-forwarded-prefix", "value": "/app"}})}),
		"HTTPRoute without filters":          route("HTTPRoute", map[string]any{}),
	} {
		notTheGuards(t, c.Create(ctx, obj, client.DryRunAll), name)
	}
}

func anySlice(v any) []any {
	s, _ := v.([]any)
	return s
}
