package integration

// The thirteenth review (review13) of the guard at 61052a1: the checks that held. The open findings
// are in attack_review13_open_test.go.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
)

// In ambient mode what the Spark operator's pod webhook copies that would take a pod past ztunnel
// is hostNetwork (addHostNetwork: pod.Spec.HostNetwork = true, dnsPolicy ClusterFirstWithHostNet;
// istio/istio cni/pkg/util/enablement_selector.go Matches excludes host-network pods) and an init
// container or sidecar with NET_ADMIN (addInitContainers, addSidecarContainers copy whole
// containers), which could rewrite the pod's own iptables. SECURITY.md's twelfth review says Pod
// Security baseline refuses both also for the pods kube-controller-manager creates, "not tested":
// here the webhook's output pod, created as the replicaset controller (which the guard trusts), is
// refused by Pod Security in a managed ambient namespace as the runner labels it.
func TestReview13SparkWebhookHostNetworkAndCapabilitiesAreRefusedByPodSecurityForTrustedPods(t *testing.T) {
	env := envtest.StartFresh(t, 0)
	ctx := context.Background()
	installGuard(t, env.Client, config.ModeAmbient)
	ns := "r13-spark-ambient"
	profileIn(t, env.Client, ns)
	n := &corev1.Namespace{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: ns}, n))
	n.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "baseline", "istio.io/dataplane-mode": "ambient"}
	require.NoError(t, env.Client.Update(ctx, n))
	rsController := bound(t, env, userBinding(ns, "replicaset-controller", "system:serviceaccount:kube-system:replicaset-controller", nil),
		"r13-replicaset-controller-pods", contributorPodRules)
	webhooked := func(name string, change func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{}
		p.Name, p.Namespace = name, ns
		p.Labels = map[string]string{sparkLaunchedLabel: "true", sparkAppNameLabel: "app", sparkRoleLabel: "driver"}
		p.Spec.Containers = []corev1.Container{{Name: "spark-kubernetes-driver", Image: "registry.example.com/server:1"}}
		change(p)
		return p
	}
	require.NoError(t, rsController.Create(ctx, webhooked("plain", func(*corev1.Pod) {}), client.DryRunAll),
		"the webhook's pod without them is admitted: the guard trusts the replicaset controller")
	for name, change := range map[string]func(p *corev1.Pod){
		"hostNetwork": func(p *corev1.Pod) { p.Spec.HostNetwork, p.Spec.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet },
		"init container with NET_ADMIN": func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "registry.example.com/setup:1",
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}}
		},
		"sidecar with NET_RAW and NET_ADMIN": func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "shipper", Image: "registry.example.com/shipper:1",
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_RAW", "NET_ADMIN"}}}})
		},
		"privileged sidecar": func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "shipper", Image: "registry.example.com/shipper:1",
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}})
		},
	} {
		err := rsController.Create(ctx, webhooked(objectName(name), change), client.DryRunAll)
		if assert.Error(t, err, "%s: the webhook's pod from the replicaset controller is admitted", name) {
			assert.Contains(t, err.Error(), "violates PodSecurity", "%s: refused, but not by Pod Security", name)
		}
	}
}

// A pod as Istio's injector leaves it in Kubeflow's install (kubeflow/manifests
// common/istio/istio-install/base/install.yaml: istio-cni, ENABLE_NATIVE_SIDECARS=true; istio/istio
// manifests/charts/istio-control/istio-discovery/files/injection-template.yaml: istio-validation
// then istio-proxy as init containers, the latter restartPolicy Always; the metadata the template
// writes) is admitted when a member creates it: the sidecar-mode creation check (istio-proxy among
// the init containers and sidecar.istio.io/status) does not refuse injected pods. So is the
// regular-sidecar form.
func TestReview13InjectedPodsAreAdmitted(t *testing.T) {
	ns := "r13-injected"
	_, member := guardedMember(t, config.ModeSidecar, ns, "member-pods", "r13-injected-pods", contributorPodRules)
	ctx := context.Background()
	annotations := func(status string) map[string]string {
		return map[string]string{
			"istio.io/rev": "default",
			"kubectl.kubernetes.io/default-container":          "app",
			"kubectl.kubernetes.io/default-logs-container":     "app",
			"prometheus.io/path":                               "/stats/prometheus",
			"prometheus.io/port":                               "15020",
			"prometheus.io/scrape":                             "true",
			"sidecar.istio.io/interceptionMode":                "REDIRECT",
			"sidecar.istio.io/status":                          status,
			"traffic.sidecar.istio.io/excludeInboundPorts":     "15020",
			"traffic.sidecar.istio.io/includeInboundPorts":     "*",
			"traffic.sidecar.istio.io/includeOutboundIPRanges": "*",
		}
	}
	labels := map[string]string{"app": "web", "security.istio.io/tlsMode": "istio",
		"service.istio.io/canonical-name": "web", "service.istio.io/canonical-revision": "latest"}
	proxy := corev1.Container{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.28.0",
		Args: []string{"proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local", "--proxyLogLevel=warning"},
		Env:  []corev1.EnvVar{{Name: "ISTIO_META_APP_CONTAINERS", Value: "app"}, {Name: "ISTIO_META_CLUSTER_ID", Value: "Kubernetes"}}}
	validation := corev1.Container{Name: "istio-validation", Image: "docker.io/istio/proxyv2:1.28.0",
		Args: []string{"istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT", "-i", "*", "-x", "", "-b", "*", "-d", "15090,15021,15020", "--log_output_level=default:info", "--run-validation", "--skip-rule-apply"}}

	native := &corev1.Pod{}
	native.Name, native.Namespace = "native", ns
	native.Labels = labels
	native.Annotations = annotations(`{"initContainers":["istio-validation","istio-proxy"],"containers":null,"volumes":["workload-socket","istio-envoy","istio-data","istio-podinfo","istio-token","istiod-ca-cert"],"imagePullSecrets":null,"revision":"default"}`)
	nativeProxy := proxy
	nativeProxy.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	native.Spec.InitContainers = []corev1.Container{validation, nativeProxy}
	native.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}
	assert.NoError(t, member.Create(ctx, native, client.DryRunAll), "the injected pod (native sidecar) is refused")

	regular := native.DeepCopy()
	regular.Name = "regular"
	regular.Annotations = annotations(`{"initContainers":["istio-validation"],"containers":["istio-proxy"],"revision":"default"}`)
	regular.Spec.InitContainers = []corev1.Container{validation}
	regular.Spec.Containers = append(regular.Spec.Containers, proxy)
	assert.NoError(t, member.Create(ctx, regular, client.DryRunAll), "the injected pod (regular sidecar) is refused")
}
