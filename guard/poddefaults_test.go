package guard_test

// Kubeflow's PodDefaults on the real API server. Kubeflow's admission webhook applies a PodDefault
// to every pod created in a Profile's namespace whose labels its selector matches, whoever creates
// it (kubeflow/kubeflow components/admission-webhook/main.go filterPodDefaults,
// applyPodDefaultsOnPod: spec.labels and spec.annotations merged into the pod's, spec.env,
// envFrom, volumes and volumeMounts into every container's; an empty selector matches every pod).
// The pods of workloads are created by kube-controller-manager, whose requests the guard trusts,
// after their templates were judged: what a PodDefault may add is judged on the PodDefault.
// kubeflow-edit may write PodDefaults (kubeflow-poddefaults-edit).

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

// podDefaultRules are kubeflow-edit's rules on PodDefaults.
var podDefaultRules = []rbacv1.PolicyRule{{APIGroups: []string{"kubeflow.org"}, Resources: []string{"poddefaults"}, Verbs: []string{"get", "create", "update", "patch", "delete"}}}

// podDefaultMember installs the PodDefault CRD and returns a member of ns bound, through role, to
// the PodDefault rules, the pod rules and extra.
func podDefaultMember(t *testing.T, s *server, ns, role string, extra ...rbacv1.PolicyRule) client.Client {
	t.Helper()
	return crdMember(t, s, ns, fixture.PodDefaultCRD(), "kubeflow.org/v1alpha1", "PodDefaultList", role, append(append([]rbacv1.PolicyRule{}, podDefaultRules...), extra...))
}

// podDefault is a PodDefault selecting app=web with spec.
func podDefault(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return podDefaultSelecting(ns, name, map[string]any{"matchLabels": map[string]any{"app": "web"}}, spec)
}

// podDefaultSelecting is a PodDefault with the given selector (nil: none, which matches every pod).
func podDefaultSelecting(ns, name string, selector map[string]any, spec map[string]any) *unstructured.Unstructured {
	if selector != nil {
		spec["selector"] = selector
	}
	spec["desc"] = "added by a member"
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1alpha1", "kind": "PodDefault",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}
}

// awaitPodDefaultRefusal waits until the kubeflow policy refuses a PodDefault that opts pods out.
func awaitPodDefaultRefusal(t *testing.T, c client.Client, ns string) {
	t.Helper()
	awaitRefusal(t, func() error {
		return c.Create(context.Background(), podDefault(ns, "probe", map[string]any{"labels": map[string]any{"istio.io/dataplane-mode": "none"}}), client.DryRunAll)
	}, guard.KubeflowPolicy, "the Kubeflow policy takes effect")
}

// A PodDefault selecting a clean template's pods puts istio.io/dataplane-mode=none (istio-cni's
// enablement selector, cni/pkg/util/enablement_selector.go) or
// ambient.istio.io/bypass-inbound-capture (cni/pkg/nodeagent/net.go getPodLevelTrafficOverrides)
// on pods no policy judges (review R9-2, docs/security/reviews.md).
func TestPodDefaultOptOutsRefused(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := profileNamespace(t, s, "poddefault-opt-outs")
	c := podDefaultMember(t, s, ns, "guard-test-kubeflow-edit-poddefaults")
	rsController := replicaSetController(t, s, ns)

	optedOut := podWith(nil)
	optedOut.Name, optedOut.Namespace, optedOut.Labels = "web-1", ns, map[string]string{"app": "web", "istio.io/dataplane-mode": "none"}
	awaitRefusal(t, func() error { return c.Create(ctx, optedOut.DeepCopy(), client.DryRunAll) }, guard.PodsPolicy,
		"the guard takes effect and refuses the member's own opted-out pod")
	// The guard judges the pod whoever creates it, after the PodDefault webhook (R9-2 stays refused
	// without the PodDefault check).
	refusedWhoeverCreatesIt(t, rsController, c, optedOut)
	awaitPodDefaultRefusal(t, c, ns)

	for name, spec := range map[string]map[string]any{
		"labels istio.io/dataplane-mode=none":                         {"labels": map[string]any{"istio.io/dataplane-mode": "none"}},
		"annotation ambient.istio.io/bypass-inbound-capture":          {"annotations": map[string]any{"ambient.istio.io/bypass-inbound-capture": "true"}},
		"annotation istio.io/reroute-virtual-interfaces":              {"annotations": map[string]any{"istio.io/reroute-virtual-interfaces": "eth0"}},
		"label istio.io/use-waypoint of another waypoint":             {"labels": map[string]any{"istio.io/use-waypoint": "elsewhere"}},
		"env DISABLE_ENVOY, merged into a template's own istio-proxy": {"env": []any{map[string]any{"name": "DISABLE_ENVOY", "value": "true"}}},
		"an init container named istio-init":                          {"initContainers": []any{map[string]any{"name": "istio-init", "image": "registry.example.com/noop:1"}}},
	} {
		refusedByPolicy(t, c.Create(ctx, podDefault(ns, objectName(name), spec), client.DryRunAll), guard.KubeflowPolicy,
			name+": a PodDefault that the webhook copies onto pods the guard trusts, from a kubeflow-edit member")
	}
	assert.NoError(t, c.Create(ctx, podDefault(ns, "plain", map[string]any{
		"labels": map[string]any{"team": "ml"}, "env": []any{map[string]any{"name": "HF_HOME", "value": "/data"}},
	}), client.DryRunAll), "a PodDefault without Istio's switches is refused")
}

// bootstrapOverride is what a PodDefault adds to make istio-proxy run a member's Envoy
// configuration: the environment variable pilot-agent reads and the member's ConfigMap mounted
// where it points.
func bootstrapOverride() map[string]any {
	return map[string]any{
		"env":          []any{map[string]any{"name": "ISTIO_BOOTSTRAP_OVERRIDE", "value": "/etc/member/bootstrap.yaml"}},
		"volumes":      []any{map[string]any{"name": "member-bootstrap", "configMap": map[string]any{"name": "member-bootstrap"}}},
		"volumeMounts": []any{map[string]any{"name": "member-bootstrap", "mountPath": "/etc/member"}},
	}
}

// The namespace's waypoint runs in the Profile's namespace: istiod creates its Deployment,
// kube-controller-manager its pods (trusted), and the PodDefault webhook merges into its
// istio-proxy too. pilot-agent reads ISTIO_BOOTSTRAP_OVERRIDE (pkg/envoy/proxy.go: the named file
// is passed to Envoy as --config-yaml) and ISTIO_BOOTSTRAP (pkg/bootstrap/instance.go) from its
// environment, neither of which the waypoint template sets
// (manifests/charts/istio-control/istio-discovery/files/waypoint.yaml): a PodDefault that adds one,
// with a member's ConfigMap mounted, runs the member's Envoy configuration with the waypoint's
// identity, the one every ztunnel policy of the namespace admits. So no PodDefault may select the
// waypoint's pods (review R10-1, docs/security/reviews.md).
func TestPodDefaultsMayNotSelectTheWaypoint(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	wp := s.cfg.Mesh.Waypoint.Name
	ns := profileNamespace(t, s, "waypoint-poddefaults")
	c := podDefaultMember(t, s, ns, "guard-test-kubeflow-edit-poddefaults")
	rsController := replicaSetController(t, s, ns)
	awaitPodDefaultRefusal(t, c, ns)

	// The waypoint's pod as istiod's template and the webhook leave it, created by the ReplicaSet
	// controller: admitted, since the waypoint's pods opt out of the mesh and the pod check leaves
	// them to the waypoint policy, which admits the ReplicaSet controller; nothing judges what the
	// PodDefault added to it, which is why the PodDefault itself is refused.
	waypointPod := podWith(nil)
	waypointPod.Name, waypointPod.Namespace = wp+"-7c9d8-abcde", ns
	waypointPod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: wp + "-7c9d8", UID: "0b1c2d3e", Controller: ptr.To(true)}}
	waypointPod.Labels = map[string]string{"gateway.networking.k8s.io/gateway-name": wp, "gateway.istio.io/managed": "istio.io-mesh-controller", "istio.io/dataplane-mode": "none",
		"sidecar.istio.io/inject": "false", "service.istio.io/canonical-name": wp, "pod-template-hash": "7c9d8"}
	waypointPod.Spec.ServiceAccountName = wp
	waypointPod.Spec.Containers[0].Name = "istio-proxy"
	waypointPod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "ISTIO_BOOTSTRAP_OVERRIDE", Value: "/etc/member/bootstrap.yaml"}}
	waypointPod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "member-bootstrap", MountPath: "/etc/member"}}
	waypointPod.Spec.Volumes = []corev1.Volume{{Name: "member-bootstrap", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "member-bootstrap"}}}}}
	assert.NoError(t, rsController.Create(ctx, waypointPod, client.DryRunAll), "the waypoint's pod from the ReplicaSet controller is admitted, the PodDefault's env and volume with it")

	for name, selector := range map[string]map[string]any{
		"the waypoint's gateway-name label":        {"matchLabels": map[string]any{"gateway.networking.k8s.io/gateway-name": wp}},
		"no selector, which matches every pod":     nil,
		"an empty selector":                        {},
		"the waypoint's canonical name":            {"matchLabels": map[string]any{"service.istio.io/canonical-name": wp}},
		"pod-template-hash exists":                 {"matchExpressions": []any{map[string]any{"key": "pod-template-hash", "operator": "Exists"}}},
		"a label the waypoint lacks, NotIn":        {"matchExpressions": []any{map[string]any{"key": "team", "operator": "NotIn", "values": []any{"ml"}}}},
		"a label the waypoint lacks, DoesNotExist": {"matchExpressions": []any{map[string]any{"key": "team", "operator": "DoesNotExist"}}},
		"the plugins' label":                       {"matchLabels": map[string]any{"profile-plugins.kubeflow-ambient.io/plugin": "waypoint"}},
		"the managed-by label":                     {"matchLabels": map[string]any{"app.kubernetes.io/managed-by": "profile-plugins"}},
		"the gateway-name label In the waypoint":   {"matchExpressions": []any{map[string]any{"key": "gateway.networking.k8s.io/gateway-name", "operator": "In", "values": []any{"other", wp}}}},
	} {
		refusedByPolicy(t, c.Create(ctx, podDefaultSelecting(ns, objectName(name), selector, bootstrapOverride()), client.DryRunAll), guard.KubeflowPolicy,
			name+": a PodDefault that selects the waypoint's pods, from a kubeflow-edit member")
	}
	// What Kubeflow's PodDefaults look like (the Jupyter web app lists them by such a label), and
	// selectors that exclude the waypoint.
	for name, selector := range map[string]map[string]any{
		"a label of the notebook's choice":              {"matchLabels": map[string]any{"access-ml-pipeline": "true"}},
		"a label the waypoint lacks, In":                {"matchExpressions": []any{map[string]any{"key": "team", "operator": "In", "values": []any{"ml"}}}},
		"a label the waypoint lacks, Exists":            {"matchExpressions": []any{map[string]any{"key": "team", "operator": "Exists"}}},
		"every pod but the waypoint's, DoesNotExist":    {"matchExpressions": []any{map[string]any{"key": "gateway.networking.k8s.io/gateway-name", "operator": "DoesNotExist"}}},
		"every pod but the waypoint's, NotIn":           {"matchExpressions": []any{map[string]any{"key": "gateway.networking.k8s.io/gateway-name", "operator": "NotIn", "values": []any{wp}}}},
		"another gateway-name than the waypoint's":      {"matchLabels": map[string]any{"gateway.networking.k8s.io/gateway-name": "other"}},
		"a label the waypoint lacks, beside one it has": {"matchLabels": map[string]any{"access-ml-pipeline": "true", "pod-template-hash": "7c9d8"}},
	} {
		assert.NoError(t, c.Create(ctx, podDefaultSelecting(ns, objectName(name), selector, bootstrapOverride()), client.DryRunAll), "%s: refused", name)
	}
}

// The rule above takes a PodDefault's selector to exclude the waypoint's pods when it requires a
// label outside the domains of Istio, the Gateway API and the plugins. But the admin's
// mesh.waypoint.labels go on the Gateway's spec.infrastructure.labels, which istiod copies onto the
// waypoint's pods (istio/istio pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go
// extractInfrastructureLabels, translateInfraMeta): a selector by such a label selects them too
// (review R11-2, docs/security/reviews.md). On a server of its own: no other test's guard has
// waypoint labels, and with them "team" is no longer a label the waypoint lacks.
func TestPodDefaultsMayNotUseWaypointLabels(t *testing.T) {
	t.Parallel()
	env := envtest.StartFresh(t, 0)
	ctx := context.Background()
	cfg := config.Default()
	cfg.Mesh.Waypoint.Labels = map[string]string{"team": "platform", "app.kubernetes.io/part-of": "kubeflow"}
	fixture.InstallGuard(t, env.Client, cfg)
	s := &server{env: env, cfg: cfg}
	ns := profileNamespace(t, s, "waypoint-labels")
	c := podDefaultMember(t, s, ns, "guard-test-kubeflow-edit-poddefaults")
	awaitPodDefaultRefusal(t, c, ns)

	for name, selector := range map[string]map[string]any{
		"the admin's waypoint label team":         {"matchLabels": map[string]any{"team": "platform"}},
		"the admin's waypoint label part-of":      {"matchLabels": map[string]any{"app.kubernetes.io/part-of": "kubeflow"}},
		"the admin's waypoint label team, Exists": {"matchExpressions": []any{map[string]any{"key": "team", "operator": "Exists"}}},
		"the admin's waypoint label team, In":     {"matchExpressions": []any{map[string]any{"key": "team", "operator": "In", "values": []any{"platform"}}}},
	} {
		refusedByPolicy(t, c.Create(ctx, podDefaultSelecting(ns, objectName(name), selector, bootstrapOverride()), client.DryRunAll), guard.KubeflowPolicy,
			name+": a PodDefault that selects the waypoint's pods by the admin's waypoint label, from a kubeflow-edit member")
	}
	assert.NoError(t, c.Create(ctx, podDefaultSelecting(ns, "notebooks", map[string]any{"matchLabels": map[string]any{"access-ml-pipeline": "true"}}, bootstrapOverride()), client.DryRunAll),
		"a selector by a label the waypoint lacks is refused")
}

// ISTIO_DUAL_STACK other than true on istio-proxy is refused on pods and templates
// (TestDualStackOffOnTheProxyRefused), and a PodDefault's spec.env is merged into every container
// of the pods it selects, istio-proxy included (main.go applyPodDefaultsOnContainer, mergeEnv),
// whose pods come from kube-controller-manager: so no PodDefault in a managed namespace sets either
// switch istio-cni reads on istio-proxy, whatever the value (review R14-1,
// docs/security/reviews.md; podDefaultCheck).
func TestPodDefaultProxySwitchesRefused(t *testing.T) {
	t.Parallel()
	s := sidecarGuarded(t)
	ctx := context.Background()
	ns := profileNamespace(t, s, "poddefault-env")
	c := podDefaultMember(t, s, ns, "guard-test-kubeflow-edit-poddefaults-deployments", deploymentRules...)
	rsController := replicaSetController(t, s, ns)

	// The path: the template's own istio-proxy without env is admitted; the pod the webhook and
	// the injector make of it, with ISTIO_DUAL_STACK=false merged in, is admitted from the
	// replicaset controller (trusted) and refused from the member.
	own := podWith(map[string]string{}, "istio-proxy")
	require.NoError(t, c.Create(ctx, deploymentOf(ns, "web", own), client.DryRunAll),
		"a template with an istio-proxy of its own and no switches is admitted")
	merged := injectedWith(func(p *corev1.Pod) {
		p.Name, p.Namespace, p.Labels = "web-1", ns, map[string]string{"app": "web"}
		p.Spec.Containers[1].Env = append(p.Spec.Containers[1].Env, corev1.EnvVar{Name: "ISTIO_DUAL_STACK", Value: "false"})
	})
	refusedWhoeverCreatesIt(t, rsController, c, merged)

	const want = "Kubeflow's webhook copies its labels, annotations and environment onto the pods it selects"
	for _, e := range []map[string]any{
		{"name": "ISTIO_DUAL_STACK", "value": "false"},
		{"name": "ISTIO_DUAL_STACK", "value": "0"},
		{"name": "ISTIO_DUAL_STACK", "value": "true"},
		{"name": "ISTIO_DUAL_STACK", "valueFrom": map[string]any{"configMapKeyRef": map[string]any{"name": "net", "key": "dual"}}},
		{"name": "DISABLE_ENVOY", "value": "true"},
	} {
		value, ok := e["value"].(string)
		if !ok {
			value = "from"
		}
		name := objectName("env " + e["name"].(string) + " " + value)
		guardDenied(t, c.Create(ctx, podDefault(ns, name, map[string]any{"env": []any{
			map[string]any{"name": "HF_HOME", "value": "/data"}, e}}), client.DryRunAll), guard.KubeflowPolicy, "PodDefault "+ns+"/"+name+": "+want)
	}

	// An update that adds it is refused like a create; a PodDefault of other env stays admitted.
	plain := podDefault(ns, "plain", map[string]any{"env": []any{map[string]any{"name": "HF_HOME", "value": "/data"}}})
	require.NoError(t, c.Create(ctx, plain), "a PodDefault of other env is admitted")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(plain), plain))
	plain.Object["spec"].(map[string]any)["env"] = []any{map[string]any{"name": "ISTIO_DUAL_STACK", "value": "false"}}
	guardDenied(t, c.Update(ctx, plain, client.DryRunAll), guard.KubeflowPolicy, "PodDefault "+ns+"/plain: "+want)
	assert.NoError(t, c.Delete(ctx, plain))
}
