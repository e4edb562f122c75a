// The findings of the thirteenth review (review13) of the guard at 61052a1, fixed in
// sidecarContainerChecks; each test failed at 61052a1.
//
// R13-1 (sidecar mode): Istio's injector reads a pod's proxy.istio.io/overrides annotation (JSON of
// containers and initContainers) and merges each container named there over the one it injects,
// before and in preference to an istio-proxy container of the pod's own (istio/istio
// pkg/kube/inject/webhook.go reapplyOverwrittenContainers: existingOverrides from
// annotation.ProxyOverrides, FindContainer(c.Name, existingOverrides.Containers) first, then
// applyContainer / applyInitContainer, a strategic merge). So a pod template's annotation can give
// the injected istio-proxy DISABLE_ENVOY=true, or args "proxy router", which make istio-cni skip the
// pod's redirect (cni/pkg/plugin/plugin.go doAddRun). The workloads policy judges templates before
// injection and refuses those switches on a template's own istio-proxy (sidecarContainerChecks),
// not in the annotation; the template's pods are created by kube-controller-manager, which the
// guard trusts, so the injected pod is never judged.
//
// R13-2 (sidecar mode on a dual-stack cluster): istio-cni reads ISTIO_DUAL_STACK from the
// istio-proxy container's env (cni/pkg/plugin/kubernetes.go ExtractPodInfo ProxyEnvironments,
// sidecar_redirect.go NewRedirect redir.dualStack), hands it to the iptables config
// (sidecar_iptables_linux.go Program cfg.DualStack), and with it false picks the pod's first
// address only (tools/common/config/config.go FillConfigFromEnvironment, getLocalIP(dualStack)
// returns the first non-loopback address when !dualStack) and sets EnableIPv6 from it: an IPv4 first
// address means no ip6tables rule at all (tools/istio-iptables/pkg/builder/iptables_builder_impl.go
// AppendRuleV6/InsertRuleV6 return early when !EnableIPv6), so the pod's IPv6 address takes
// callers past the sidecar. A dual-stack Istio sets ISTIO_DUAL_STACK=true through
// meshConfig.defaultConfig.proxyMetadata (pkg/test/framework/components/istio/kube.go), which the
// injector writes as istio-proxy's env, and a pod's own istio-proxy env overrides it (the merge
// above). The guard reads no env of istio-proxy but DISABLE_ENVOY.

package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
)

// review13Deployment is a Deployment in ns whose pod template is p's metadata and spec.
func review13Deployment(ns, name string, p *corev1.Pod) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: sel},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: p.Annotations}, Spec: p.Spec},
	}}
}

func TestReview13ProxyOverridesAnnotationOnATemplateIsRefused(t *testing.T) {
	ns := "r13-overrides"
	_, member := guardedMember(t, config.ModeSidecar, ns, "member-edit", "r13-kubeflow-edit-deployments",
		[]rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "update", "patch"}}})
	ctx := context.Background()

	// What the guard means to refuse: the same switch on the template's own istio-proxy.
	own := podWith(map[string]string{}, "istio-proxy")
	own.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "DISABLE_ENVOY", Value: "true"}}
	err := member.Create(ctx, review13Deployment(ns, "own-proxy", own), client.DryRunAll)
	require.Error(t, err, "the template's own istio-proxy with DISABLE_ENVOY is refused")
	require.Contains(t, err.Error(), guard.WorkloadsPolicy)

	// The same switches through the injector's overrides annotation: regular sidecar, native
	// sidecar (Kubeflow's install, ENABLE_NATIVE_SIDECARS=true), and a proxy type.
	for name, overrides := range map[string]string{
		"DISABLE_ENVOY":                  `{"containers":[{"name":"istio-proxy","env":[{"name":"DISABLE_ENVOY","value":"true"}]}]}`,
		"DISABLE_ENVOY, native sidecar":  `{"initContainers":[{"name":"istio-proxy","env":[{"name":"DISABLE_ENVOY","value":"true"}]}]}`,
		"proxy router":                   `{"containers":[{"name":"istio-proxy","args":["proxy","router"]}]}`,
		"ISTIO_DUAL_STACK false (R13-2)": `{"initContainers":[{"name":"istio-proxy","env":[{"name":"ISTIO_DUAL_STACK","value":"false"}]}]}`,
	} {
		p := podWith(map[string]string{"proxy.istio.io/overrides": overrides})
		err := member.Create(ctx, review13Deployment(ns, objectName(name), p), client.DryRunAll)
		t.Logf("%s: %v", name, err)
		if assert.Error(t, err, "%s: a template whose injected istio-proxy Istio's injector reshapes from proxy.istio.io/overrides is admitted", name) {
			assert.Contains(t, err.Error(), guard.WorkloadsPolicy)
		}
	}
}

func TestReview13IstioDualStackFalseOnTheProxyIsRefused(t *testing.T) {
	ns := "r13-dualstack"
	_, member := guardedMember(t, config.ModeSidecar, ns, "member-edit", "r13-kubeflow-edit-pods-deployments",
		append([]rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "update", "patch"}}},
			contributorPodRules...))
	ctx := context.Background()
	require.NoError(t, member.Create(ctx, injectedWith(func(p *corev1.Pod) { p.Name, p.Namespace = "plain", ns }), client.DryRunAll),
		"an injected pod is admitted")

	for _, v := range []string{"false", "0", "f", "FALSE"} {
		pod := injectedWith(func(p *corev1.Pod) {
			p.Name, p.Namespace = "dual-"+strings.ToLower(v), ns
			p.Spec.Containers[1].Env = append(p.Spec.Containers[1].Env, corev1.EnvVar{Name: "ISTIO_DUAL_STACK", Value: v})
		})
		err := member.Create(ctx, pod, client.DryRunAll)
		t.Logf("pod, ISTIO_DUAL_STACK=%s: %v", v, err)
		if assert.Error(t, err, "a pod whose istio-proxy has ISTIO_DUAL_STACK=%s (no IPv6 capture) is admitted", v) {
			assert.Contains(t, err.Error(), guard.PodsPolicy)
		}
	}
	tmpl := podWith(map[string]string{}, "istio-proxy")
	tmpl.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "ISTIO_DUAL_STACK", Value: "false"}}
	err := member.Create(ctx, review13Deployment(ns, "dual", tmpl), client.DryRunAll)
	t.Logf("template, ISTIO_DUAL_STACK=false: %v", err)
	if assert.Error(t, err, "a template whose istio-proxy has ISTIO_DUAL_STACK=false is admitted") {
		assert.Contains(t, err.Error(), guard.WorkloadsPolicy)
	}
}

// R13-3 (sidecar mode): istio-cni reads the pod when its sandbox is set up (cni/pkg/plugin/plugin.go
// doAddRun calls getK8sPodInfo, a GET of the pod from the API server at CNI ADD), not as it was
// created, and skips the redirect of a pod without sidecar.istio.io/status ("excluded due to not
// containing sidecar annotation"). The pods policy requires the annotation only on CREATE and no
// sidecar-mode check refuses an UPDATE that removes it, so a member creates an injected pod held by
// a scheduling gate (only the creator's later update removes it, and no node runs the pod
// meanwhile), removes the annotation, then the gate: the kubelet's CNI ADD then finds no status and
// the pod runs with its sidecar but without the redirect, every port open to callers. The same for
// the pods of a member's Deployment whose template carries a scheduling gate (kube-controller-manager
// creates them, injected; kubeflow-edit patches pods).
func TestReview13RemovingTheSidecarStatusOfAPodNotYetStartedIsRefused(t *testing.T) {
	ns := "r13-status-removed"
	_, member := guardedMember(t, config.ModeSidecar, ns, "member-pods", "r13-status-pods", contributorPodRules)
	ctx := context.Background()

	pod := injectedWith(func(p *corev1.Pod) {
		p.Name, p.Namespace = "gated", ns
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/later"}}
	})
	require.NoError(t, member.Create(ctx, pod), "the injected pod, gated, is admitted")
	require.NoError(t, member.Get(ctx, client.ObjectKeyFromObject(pod), pod))
	delete(pod.Annotations, "sidecar.istio.io/status")
	err := member.Update(ctx, pod)
	t.Logf("removing sidecar.istio.io/status: %v", err)
	if !assert.Error(t, err, "a member removes sidecar.istio.io/status from a pod istio-cni has not yet set up") {
		// What follows the finding: the gate goes, and the pod is scheduled without the annotation.
		require.NoError(t, member.Get(ctx, client.ObjectKeyFromObject(pod), pod))
		pod.Spec.SchedulingGates = nil
		require.NoError(t, member.Update(ctx, pod), "the member removes the scheduling gate")
		require.NoError(t, member.Get(ctx, client.ObjectKeyFromObject(pod), pod))
		_, has := pod.Annotations["sidecar.istio.io/status"]
		assert.False(t, has, "the pod goes to a node without sidecar.istio.io/status")
		return
	}
	assert.Contains(t, err.Error(), guard.PodsPolicy)
}
