package integration

// The tenth review (review10) of the guard at befcf84.
//
// Finding R10-1: Kubeflow's PodDefault webhook applies a PodDefault to every pod created in a
// Profile's namespace whose labels its selector matches (kubeflow/kubeflow
// components/admission-webhook/main.go filterPodDefaults, applyPodDefaultsOnPod; an empty selector
// matches every pod), and the namespace's waypoint runs there: istiod creates its Deployment (the
// guard exempts guard.meshServiceAccounts), kube-controller-manager its pods (trusted). The
// webhook merges the PodDefault's env, envFrom, volumes and volumeMounts into every container of
// the pod, the waypoint's istio-proxy included, and may set its serviceAccountName. istio-proxy's
// pilot-agent reads ISTIO_BOOTSTRAP_OVERRIDE (pkg/envoy/proxy.go: the named file is passed to
// Envoy as --config-yaml, merged over the bootstrap) and ISTIO_BOOTSTRAP (pkg/bootstrap/instance.go:
// the bootstrap template itself) from its environment, neither of which the waypoint template sets
// (manifests/charts/istio-control/istio-discovery/files/waypoint.yaml), so a PodDefault that adds
// one, with a ConfigMap the member writes mounted as a volume, runs the member's Envoy
// configuration in the waypoint: a pod outside ztunnel's capture (istio.io/dataplane-mode=none in
// that template) holding the waypoint's identity, the one identity every pod's ztunnel policy in
// the namespace admits. A static listener there is open to every caller in the cluster and can
// tunnel to any pod of the namespace as the waypoint, past the owner's policy. kubeflow-edit may
// write PodDefaults (kubeflow-poddefaults-edit) and ConfigMaps (kubeflow-kubernetes-edit).

import (
	"context"
	"strings"
	"testing"
	"time"

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
)

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

func TestReview10PodDefaultsMayNotSelectTheWaypointsPods(t *testing.T) {
	env := envtest.StartFresh(t, 0)
	ctx := context.Background()
	cfg := installGuard(t, env.Client, config.ModeAmbient)
	wp := cfg.Mesh.Waypoint.Name
	ns := "r10-waypoint-poddefaults"
	profileIn(t, env.Client, ns)
	member := crdMember(t, env, ns, podDefaultCRD(), "kubeflow.org/v1alpha1", "PodDefaultList", "r10-kubeflow-edit-poddefaults", []rbacv1.PolicyRule{
		{APIGroups: []string{"kubeflow.org"}, Resources: []string{"poddefaults"}, Verbs: []string{"create", "update", "patch", "delete"}}})
	rsController := bound(t, env, userBinding(ns, "replicaset-controller", "system:serviceaccount:kube-system:replicaset-controller", nil),
		"r10-replicaset-controller-pods", contributorPodRules)
	require.Eventually(t, func() bool {
		err := member.Create(ctx, podDefault(ns, "probe", map[string]any{"labels": map[string]any{"istio.io/dataplane-mode": "none"}}), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.KubeflowPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the Kubeflow policy takes effect")

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
		err := member.Create(ctx, podDefaultSelecting(ns, objectName(name), selector, bootstrapOverride()), client.DryRunAll)
		t.Logf("%s: %v", name, err)
		if assert.Error(t, err, "%s: a PodDefault that selects the waypoint's pods is admitted for a kubeflow-edit member", name) {
			assert.Contains(t, err.Error(), guard.KubeflowPolicy, "%s: refused, but not by the guard", name)
		}
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
		assert.NoError(t, member.Create(ctx, podDefaultSelecting(ns, objectName(name), selector, bootstrapOverride()), client.DryRunAll), "%s: refused", name)
	}
}
