// The finding of the fourteenth review (review14) of the guard at 9b9fa40, fixed in podDefaultCheck;
// the test failed at 9b9fa40.
//
// R14-1 (sidecar mode on a dual-stack cluster): R13-2 refused ISTIO_DUAL_STACK other than true on a
// pod's or a template's own istio-proxy, but not in a PodDefault. Kubeflow's admission webhook
// merges a PodDefault's spec.env into every container of the pods it selects, istio-proxy included
// (kubeflow/kubeflow components/admission-webhook/main.go applyPodDefaultsOnPod,
// applyPodDefaultsOnContainer, mergeEnv), whoever creates the pod. So a member's Deployment whose
// template has an istio-proxy of its own without env (admitted: the guard judges the switches of
// that container, and there are none) gets ISTIO_DUAL_STACK=false on it from a PodDefault that
// selects the template; Istio's injector then merges that container over the one it injects
// (pkg/kube/inject/webhook.go reapplyOverwrittenContainers), replacing the mesh's
// ISTIO_DUAL_STACK=true, and istio-cni writes no IPv6 rule (see attack_review13_sidecar_test.go).
// The pod comes from kube-controller-manager, which the guard trusts, so nothing judges it.

package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
)

func TestReview14PodDefaultsMayNotSetTheProxysSwitches(t *testing.T) {
	ns := "r14-poddefault-env"
	env := envtest.StartFresh(t, 0)
	ctx := context.Background()
	installGuard(t, env.Client, config.ModeSidecar)
	profileIn(t, env.Client, ns)
	member := crdMember(t, env, ns, podDefaultCRD(), "kubeflow.org/v1alpha1", "PodDefaultList", "r14-kubeflow-edit-poddefaults", []rbacv1.PolicyRule{
		{APIGroups: []string{"kubeflow.org"}, Resources: []string{"poddefaults"}, Verbs: []string{"get", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "update", "patch"}}})
	rsController := bound(t, env, userBinding(ns, "replicaset-controller", "system:serviceaccount:kube-system:replicaset-controller", nil),
		"r14-replicaset-controller-pods", contributorPodRules)

	// The path: the template's own istio-proxy without env is admitted; the pod the webhook and
	// the injector make of it, with ISTIO_DUAL_STACK=false merged in, is admitted from the
	// replicaset controller (trusted) and refused from the member.
	own := podWith(map[string]string{}, "istio-proxy")
	require.NoError(t, member.Create(ctx, review13Deployment(ns, "web", own), client.DryRunAll),
		"a template with an istio-proxy of its own and no switches is admitted")
	merged := injectedWith(func(p *corev1.Pod) {
		p.Name, p.Namespace, p.Labels = "web-1", ns, map[string]string{"app": "web"}
		p.Spec.Containers[1].Env = append(p.Spec.Containers[1].Env, corev1.EnvVar{Name: "ISTIO_DUAL_STACK", Value: "false"})
	})
	refusedWhoeverCreatesIt(t, rsController, member, merged)

	// The fix: no PodDefault in a managed namespace sets either switch istio-cni reads on
	// istio-proxy, whatever the value.
	const want = "Kubeflow's webhook copies its labels, annotations and environment onto the pods it selects"
	for _, e := range []map[string]any{
		{"name": "ISTIO_DUAL_STACK", "value": "false"},
		{"name": "ISTIO_DUAL_STACK", "value": "0"},
		{"name": "ISTIO_DUAL_STACK", "value": "true"},
		{"name": "ISTIO_DUAL_STACK", "valueFrom": map[string]any{"configMapKeyRef": map[string]any{"name": "net", "key": "dual"}}},
		{"name": "DISABLE_ENVOY", "value": "true"},
	} {
		name := objectName("env " + e["name"].(string) + " " + toString(e["value"]))
		guardDenied(t, member.Create(ctx, podDefault(ns, name, map[string]any{"env": []any{
			map[string]any{"name": "HF_HOME", "value": "/data"}, e}}), client.DryRunAll), guard.KubeflowPolicy, "PodDefault "+ns+"/"+name+": "+want)
	}

	// An update that adds it is refused like a create; a PodDefault of other env stays admitted.
	plain := podDefault(ns, "plain", map[string]any{"env": []any{map[string]any{"name": "HF_HOME", "value": "/data"}}})
	require.NoError(t, member.Create(ctx, plain), "a PodDefault of other env is admitted")
	require.NoError(t, member.Get(ctx, client.ObjectKeyFromObject(plain), plain))
	plain.Object["spec"].(map[string]any)["env"] = []any{map[string]any{"name": "ISTIO_DUAL_STACK", "value": "false"}}
	guardDenied(t, member.Update(ctx, plain, client.DryRunAll), guard.KubeflowPolicy, "PodDefault "+ns+"/plain: "+want)
	assert.NoError(t, member.Delete(ctx, plain))
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return "from"
}
