package integration

// The sixth review (review6) of the guard at 9d1d389. The subtests reproduced one finding on the
// real API server and failed while it stood; fixed (SECURITY.md, "Sixth review").

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
)

// Finding R6-1 (high: a namespace member with kubeflow-edit's pod create takes a pod out of the
// mesh's inbound enforcement, so every unmeshed client of the cluster reaches it in plaintext past
// the ztunnel and owner policies). The pods policy knows two ambient opt-outs (dataplane-mode=none,
// sidecar.istio.io/status without an istio-proxy container) and, in sidecar mode, one (inject
// "false"); Istio reads more:
//   - ambient.istio.io/bypass-inbound-capture: "true": istio-cni programs no inbound redirect to
//     ztunnel (istio/istio cni/pkg/nodeagent/net.go getPodLevelTrafficOverrides, IngressMode;
//     cni/pkg/iptables/iptables.go `if !podOverrides.IngressMode`);
//   - sidecar.istio.io/status with a container merely NAMED istio-proxy: istio-cni skips the pod for
//     ambient on the annotation alone (cni/pkg/util/enablement_selector.go Matches, podutil.go
//     podHasSidecar), and its sidecar path then skips it on sidecar.istio.io/inject "false"
//     (cni/pkg/plugin/plugin.go doAddRun), which ambient mode does not refuse: no capture at all;
//   - sidecar mode: traffic.sidecar.istio.io/includeInboundPorts "" or excludeInboundPorts, and
//     sidecar.istio.io/interceptionMode NONE, leave inbound traffic past Envoy (injection-template
//     istio-init args, cni/pkg/plugin/sidecar_redirect.go).
func TestThePodsPolicyRefusesEveryInboundCaptureOptOutOnTheAPIServer(t *testing.T) {
	optOuts := map[config.MeshMode]map[string]*corev1.Pod{
		config.ModeAmbient: {
			"bypass-inbound-capture": podWith(map[string]string{"ambient.istio.io/bypass-inbound-capture": "true"}),
			"a container named istio-proxy": podWith(map[string]string{"sidecar.istio.io/status": `{"containers":["istio-proxy"]}`,
				"sidecar.istio.io/inject": "false"}, "istio-proxy"),
		},
		config.ModeSidecar: {
			"includeInboundPorts empty": podWith(map[string]string{"traffic.sidecar.istio.io/includeInboundPorts": ""}),
			"excludeInboundPorts":       podWith(map[string]string{"traffic.sidecar.istio.io/excludeInboundPorts": "8888"}),
			"interceptionMode NONE":     podWith(map[string]string{"sidecar.istio.io/interceptionMode": "NONE"}),
		},
	}
	refused := map[config.MeshMode]*corev1.Pod{
		config.ModeAmbient: {ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"istio.io/dataplane-mode": "none"}}},
		config.ModeSidecar: {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"sidecar.istio.io/inject": "false"}}},
	}
	for _, mode := range []config.MeshMode{config.ModeAmbient, config.ModeSidecar} {
		t.Run(string(mode), func(t *testing.T) {
			env := envtest.StartFresh(t, 0)
			ctx := context.Background()
			installGuard(t, env.Client, mode)
			ns := "r6-" + string(mode)
			profileIn(t, env.Client, ns)
			member := bound(t, env, userBinding(ns, "member-edit", editor, nil), "r6-kubeflow-edit-pods", contributorPodRules)
			known := refused[mode].DeepCopy()
			known.Spec = podWith(nil).Spec
			known.Name, known.Namespace = "known", ns
			require.Eventually(t, func() bool {
				err := member.Create(ctx, known.DeepCopy(), client.DryRunAll)
				return err != nil && strings.Contains(err.Error(), guard.PodsPolicy)
			}, 30*time.Second, 200*time.Millisecond, "the guard takes effect and refuses the opt-out it knows")
			for name, p := range optOuts[mode] {
				p = p.DeepCopy()
				p.Name, p.Namespace = strings.ToLower(strings.ReplaceAll(name, " ", "-")), ns
				err := member.Create(ctx, p, client.DryRunAll)
				t.Logf("%s: %v", name, err)
				if assert.Error(t, err, "%s: a pod that Istio leaves uncaptured on inbound is admitted by a kubeflow-edit member", name) {
					assert.Contains(t, err.Error(), guard.PodsPolicy, "%s: refused, but not by the guard", name)
				}
			}
		})
	}
}

// podWith is a pod with annotations and containers named app and extra.
func podWith(annotations map[string]string, extra ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}}
	for _, c := range append([]string{"app"}, extra...) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "registry.example.com/" + c + ":1"})
	}
	return p
}
