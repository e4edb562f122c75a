package waypoint_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

func policyRef(name string) plugin.Ref {
	return plugin.Ref{GroupKind: schema.GroupKind{Group: "security.istio.io", Kind: "AuthorizationPolicy"}, Name: name}
}

// Routing to the waypoint requires the owner policy (the only check there), the ztunnel policy
// and the waypoint, and with the opt-in per-namespace seccomp patch its ConfigMap too; ambient
// enrolment requires the ztunnel policy.
func TestLabelRequirements(t *testing.T) {
	cfg := config.Default()
	d, err := waypoint.New(cfg).Generate(plugin.Target{Namespace: ns, Observed: plugin.Observed{Objects: []client.Object{programmed(cfg)}}})
	require.NoError(t, err)
	gw := plugin.Ref{GroupKind: schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "Gateway"}, Name: "waypoint"}
	routed := []plugin.Ref{policyRef(cfg.Authorization.OwnerPolicyName), policyRef(cfg.Authorization.ZtunnelPolicyName), gw}
	assert.Equal(t, map[string][]plugin.Ref{
		"istio.io/dataplane-mode":       {policyRef(cfg.Authorization.ZtunnelPolicyName)},
		"istio.io/use-waypoint":         routed,
		"istio.io/ingress-use-waypoint": routed,
	}, d.LabelRequires)
	assert.Equal(t, map[string][]plugin.Ref{"istio.io/dataplane-mode": {policyRef(cfg.Authorization.ZtunnelPolicyName)}},
		waypoint.New(cfg).DataPlaneLabels())

	// With the opt-in patch istiod patches the waypoint Deployment from the ConfigMap, so only
	// the plugin's own may shape the pod traffic is routed through.
	cfg.Mesh.Waypoint.SeccompPatch = ptr.To(true)
	d, err = waypoint.New(cfg).Generate(plugin.Target{Namespace: ns, Observed: plugin.Observed{Objects: []client.Object{programmed(cfg)}}})
	require.NoError(t, err)
	patch := plugin.Ref{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, Name: "waypoint" + waypoint.SeccompPatchSuffix}
	assert.Equal(t, append(routed, patch), d.LabelRequires["istio.io/use-waypoint"])
	assert.Equal(t, append(routed, patch), d.LabelRequires["istio.io/ingress-use-waypoint"])
}

// Captured follows Istio's CNI agent: with dataplane-mode=ambient every running pod is captured
// except pods with an injected sidecar, pods that opt out and host-network pods.
func TestCaptured(t *testing.T) {
	p := waypoint.New(config.Default())
	now := metav1.Now()
	pod := func(name string, f func(*corev1.Pod)) corev1.Pod {
		pd := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		f(&pd)
		return pd
	}
	pods := []corev1.Pod{
		pod("b-plain", func(*corev1.Pod) {}),
		pod("a-running", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }),
		pod("pending", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }),
		pod("sidecar", func(p *corev1.Pod) { p.Annotations = map[string]string{"sidecar.istio.io/status": "{}"} }),
		pod("proxy-container-only", func(p *corev1.Pod) { p.Spec.Containers = []corev1.Container{{Name: "istio-proxy"}} }),
		pod("terminating", func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
		pod("succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
		pod("host", func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
		pod("opted-out", func(p *corev1.Pod) { p.Labels = map[string]string{"istio.io/dataplane-mode": "none"} }),
		pod("pod-label-ambient", func(p *corev1.Pod) { p.Labels = map[string]string{"istio.io/dataplane-mode": "ambient"} }),
	}
	// A container named istio-proxy without the injector's annotation is not what Istio checks.
	assert.Equal(t, []string{"a-running", "b-plain", "pending", "pod-label-ambient", "proxy-container-only"},
		p.Captured("istio.io/dataplane-mode", "ambient", pods))
	assert.Empty(t, p.Captured("istio.io/dataplane-mode", "none", pods))
	assert.Empty(t, p.Captured("istio.io/use-waypoint", "ambient", pods))
	assert.Empty(t, p.Captured("istio.io/dataplane-mode", "ambient", nil))
}
