package guard_test

// Istio's capture of a pod's inbound traffic on the real API server: every per-pod switch that
// makes istio-cni (ambient or sidecar) leave a pod's inbound traffic uncaptured, or its sidecar
// unable to enforce policy, is refused for a kubeflow-edit member, on pods and on pod templates,
// and the pod Istio's injector makes is admitted.

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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
)

// deploymentRules are kubeflow-edit's rules on Deployments (kubeflow-kubernetes-edit).
var deploymentRules = []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "update", "patch"}}}

// The inbound opt-outs Istio reads beyond the two (ambient) and one (sidecar) the pods policy
// first knew (review R6-1, docs/security/reviews.md):
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
func TestInboundCaptureOptOutsRefused(t *testing.T) {
	t.Parallel()
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
	known := map[config.MeshMode]*corev1.Pod{
		config.ModeAmbient: {ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"istio.io/dataplane-mode": "none"}}},
		config.ModeSidecar: {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"sidecar.istio.io/inject": "false"}}},
	}
	for _, mode := range []config.MeshMode{config.ModeAmbient, config.ModeSidecar} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			knownPod := known[mode].DeepCopy()
			knownPod.Spec = podWith(nil).Spec
			refusesInboundOptOuts(t, mode, "inbound-opt-outs", knownPod, optOuts[mode], nil)
		})
	}
}

// refusesInboundOptOuts creates, as a kubeflow-edit member of a namespace of its own on the guard
// of mode, known (an opt-out the guard refuses, to wait for the guard) and then each pod of
// optOuts, and wants the pods policy to refuse each; then admitted, which it must admit.
func refusesInboundOptOuts(t *testing.T, mode config.MeshMode, prefix string, known *corev1.Pod, optOuts map[string]*corev1.Pod, admitted *corev1.Pod) {
	t.Helper()
	s := guardedIn(t, mode)
	ctx := context.Background()
	ns := profileNamespace(t, s, prefix+"-"+string(mode))
	c := member(t, s, ns, "guard-test-kubeflow-edit-pods", contributorPodRules)
	known.Name, known.Namespace = "known", ns
	awaitRefusal(t, func() error { return c.Create(ctx, known.DeepCopy(), client.DryRunAll) }, guard.PodsPolicy,
		"the guard takes effect and refuses the opt-out it knows")
	for name, p := range optOuts {
		p = p.DeepCopy()
		p.Name, p.Namespace = objectName(name), ns
		refusedByPolicy(t, c.Create(ctx, p, client.DryRunAll), guard.PodsPolicy, name+": a pod that Istio leaves uncaptured on inbound, from a kubeflow-edit member")
	}
	if admitted != nil {
		p := admitted.DeepCopy()
		p.Name, p.Namespace = "injected", ns
		err := c.Create(ctx, p, client.DryRunAll)
		t.Logf("injected pod: %v", err)
		assert.NoError(t, err, "a pod as the injector leaves it with istio-cni is refused")
	}
}

// knownOptOut is the opt-out of mode the pods policy has always refused.
func knownOptOut(mode config.MeshMode) *corev1.Pod {
	if mode == config.ModeSidecar {
		return podWith(map[string]string{"sidecar.istio.io/inject": "false"})
	}
	return podWith(map[string]string{"ambient.istio.io/bypass-inbound-capture": "true"})
}

// Per-pod switches Istio reads on the inbound path (review R7-1, R7-2, docs/security/reviews.md):
//   - ambient: istio.io/reroute-virtual-interfaces: eth0 makes istio-cni REDIRECT every TCP
//     connection arriving on eth0 to ztunnel's OUTBOUND port and RETURN before the inbound
//     redirect (cni/pkg/nodeagent/net.go getPodLevelTrafficOverrides, VirtualInterfaces;
//     cni/pkg/iptables/iptables.go), so no caller meets ztunnel's inbound policy as itself;
//   - sidecar: traffic.sidecar.istio.io/excludeInterfaces: eth0 (PREROUTING -i eth0 -j RETURN,
//     tools/istio-iptables/pkg/capture/run.go shortCircuitExcludeInterfaces, which istio-cni reads
//     in cni/pkg/plugin/sidecar_redirect.go); an init container named istio-init, an istio-proxy
//     container with DISABLE_ENVOY=true or args "proxy router" (cni/pkg/plugin/plugin.go doAddRun
//     skips the redirect on each; the injector keeps the pod's own istio-init and merges the pod's
//     istio-proxy over its template, pkg/kube/inject/inject.go).
//
// And the injected pod is admitted (review R7-3): with istio-cni (the default, mesh.istioCNI) the
// injector writes traffic.sidecar.istio.io/excludeInboundPorts: "15020" (the status port) on
// every pod it injects (manifests/charts/istio-control/istio-discovery/files/injection-template.yaml,
// pkg/kube/inject/template.go excludeInboundPort).
func TestInboundSwitchesRefusedInjectedAdmitted(t *testing.T) {
	t.Parallel()
	optOuts := map[config.MeshMode]map[string]*corev1.Pod{
		config.ModeAmbient: {
			"reroute-virtual-interfaces": podWith(map[string]string{"istio.io/reroute-virtual-interfaces": "eth0"}),
		},
		config.ModeSidecar: {
			"excludeInterfaces": injectedWith(func(p *corev1.Pod) {
				p.Annotations["traffic.sidecar.istio.io/excludeInterfaces"] = "eth0"
			}),
			"istio-proxy with DISABLE_ENVOY": injectedWith(func(p *corev1.Pod) {
				p.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "DISABLE_ENVOY", Value: "true"}}
			}),
			"istio-proxy with proxy type router": injectedWith(func(p *corev1.Pod) {
				p.Spec.Containers[1].Args = []string{"proxy", "router"}
			}),
			// R7-2b: with istio-cni (mesh.istioCNI, the default) the injector adds no istio-init.
			"an init container named istio-init": injectedWith(func(p *corev1.Pod) {
				p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "istio-init", Image: "registry.example.com/noop:1"})
			}),
		},
	}
	admitted := map[config.MeshMode]*corev1.Pod{config.ModeSidecar: injectedPod()}
	for _, mode := range []config.MeshMode{config.ModeAmbient, config.ModeSidecar} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			refusesInboundOptOuts(t, mode, "inbound-switches", knownOptOut(mode), optOuts[mode], admitted[mode])
		})
	}
}

// sidecarSwitches are the sidecar-mode changes, each to an injected pod (or, in a template, to one
// with the user's own istio-proxy container, which the injector merges over its own), that make
// Istio leave the pod's inbound traffic uncaptured or its sidecar unable to enforce policy
// (review "Eighth look", docs/security/reviews.md): switches istio-cni reads among a pod's init
// containers, values of DISABLE_ENVOY and proxy types, the two annotations that reshape the
// injected sidecar (cni/pkg/plugin/plugin.go doAddRun, cni/pkg/plugin/kubernetes.go
// ExtractPodInfo and containers, pkg/kube/inject: proxy.istio.io/config becomes the sidecar's
// proxy config, its proxyMetadata the istio-proxy environment; inject.istio.io/templates picks
// grpc-agent, which runs no Envoy).
func sidecarSwitches() map[string]func(p *corev1.Pod) {
	proxyEnv := func(name, value string) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			for i := range p.Spec.Containers {
				if p.Spec.Containers[i].Name == "istio-proxy" {
					p.Spec.Containers[i].Env = append(p.Spec.Containers[i].Env, corev1.EnvVar{Name: name, Value: value})
				}
			}
		}
	}
	return map[string]func(p *corev1.Pod){
		// Native sidecars: the injector moves istio-proxy, the pod's own merged in, to the init containers.
		"a native istio-proxy with DISABLE_ENVOY": func(p *corev1.Pod) {
			always := corev1.ContainerRestartPolicyAlways
			p.Spec.Containers = p.Spec.Containers[:1]
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "istio-proxy", Image: "registry.example.com/proxyv2:1",
				RestartPolicy: &always, Args: []string{"proxy", "sidecar"}, Env: []corev1.EnvVar{{Name: "DISABLE_ENVOY", Value: "true"}}})
		},
		"DISABLE_ENVOY=1 (strconv.ParseBool)": proxyEnv("DISABLE_ENVOY", "1"),
		"DISABLE_ENVOY=True":                  proxyEnv("DISABLE_ENVOY", "True"),
		"istio-proxy with proxy type ingress": func(p *corev1.Pod) {
			for i := range p.Spec.Containers {
				if p.Spec.Containers[i].Name == "istio-proxy" {
					p.Spec.Containers[i].Args = []string{"proxy", "ingress"}
				}
			}
		},
		"proxy.istio.io/config with proxyMetadata": func(p *corev1.Pod) {
			p.Annotations["proxy.istio.io/config"] = `{"proxyMetadata":{"DISABLE\u005fENVOY":"true"}}`
		},
		// The injector excludes whatever port the annotation names from the sidecar's capture.
		"status.sidecar.istio.io/port on an application port": func(p *corev1.Pod) {
			p.Annotations["status.sidecar.istio.io/port"] = "8080"
			if _, injected := p.Annotations["traffic.sidecar.istio.io/excludeInboundPorts"]; injected {
				p.Annotations["traffic.sidecar.istio.io/excludeInboundPorts"] = "8080"
			}
		},
		"inject.istio.io/templates grpc-agent": func(p *corev1.Pod) {
			p.Annotations["inject.istio.io/templates"] = "grpc-agent"
		},
	}
}

func TestSidecarSwitchesOnPodsRefused(t *testing.T) {
	t.Parallel()
	pods := map[string]*corev1.Pod{
		"a pod Istio never injected": podWith(map[string]string{"app.example.com/tier": "web"}),
		// Found by TestGeneratedPodsIstioLeavesOpenRefused: istio-cni programs no redirect for a
		// pod without sidecar.istio.io/status, whatever its istio-proxy runs.
		"a pod with its own istio-proxy and no sidecar.istio.io/status": injectedWith(func(p *corev1.Pod) {
			delete(p.Annotations, "sidecar.istio.io/status")
		}),
		"a pod with its own native istio-proxy and no sidecar.istio.io/status": injectedWith(func(p *corev1.Pod) {
			delete(p.Annotations, "sidecar.istio.io/status")
			proxy := p.Spec.Containers[1]
			proxy.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			p.Spec.Containers = p.Spec.Containers[:1]
			p.Spec.InitContainers = append(p.Spec.InitContainers, proxy)
		}),
	}
	for name, change := range sidecarSwitches() {
		pods[name] = injectedWith(func(p *corev1.Pod) {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			change(p)
		})
	}
	refusesInboundOptOuts(t, config.ModeSidecar, "sidecar-switches", knownOptOut(config.ModeSidecar), pods, injectedPod())
}

// Pods of workloads are created by Kubernetes' controllers, which the guard trusts, before the
// injector: their templates are where these switches must be refused. A plain template with the
// user's own istio-proxy container (resources, say), which the injector will inject, is admitted.
func TestSidecarSwitchesOnTemplatesRefused(t *testing.T) {
	t.Parallel()
	s := sidecarGuarded(t)
	ns := profileNamespace(t, s, "sidecar-templates")
	c := member(t, s, ns, "guard-test-kubeflow-edit-deployments", deploymentRules)
	ctx := context.Background()
	deployment := func(name string, change func(p *corev1.Pod)) *appsv1.Deployment {
		p := podWith(map[string]string{}, "istio-proxy")
		if change != nil {
			change(p)
		}
		return deploymentOf(ns, name, p)
	}
	istioInit := func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: "registry.example.com/noop:1"}}
	}
	awaitRefusal(t, func() error { return c.Create(ctx, deployment("probe", istioInit), client.DryRunAll) }, guard.WorkloadsPolicy,
		"the guard takes effect and refuses an istio-init container in a template")

	switches := sidecarSwitches()
	switches["an init container named istio-init"] = istioInit
	for name, change := range switches {
		refusedByPolicy(t, c.Create(ctx, deployment(objectName(name), change), client.DryRunAll), guard.WorkloadsPolicy,
			name+": a template whose pods Istio would leave uncaptured, from a kubeflow-edit member")
	}
	assert.NoError(t, c.Create(ctx, deployment("plain", nil), client.DryRunAll), "a plain template is refused")
}

// Istio's injector reads a pod's proxy.istio.io/overrides annotation (JSON of containers and
// initContainers) and merges each container named there over the one it injects, before and in
// preference to an istio-proxy container of the pod's own (istio/istio
// pkg/kube/inject/webhook.go reapplyOverwrittenContainers: existingOverrides from
// annotation.ProxyOverrides, FindContainer(c.Name, existingOverrides.Containers) first, then
// applyContainer / applyInitContainer, a strategic merge). So a pod template's annotation can give
// the injected istio-proxy DISABLE_ENVOY=true, or args "proxy router", which make istio-cni skip the
// pod's redirect (cni/pkg/plugin/plugin.go doAddRun); the template's pods are created by
// kube-controller-manager, which the guard trusts, so the injected pod is never judged (review
// R13-1, docs/security/reviews.md; sidecarContainerChecks).
func TestProxyOverridesOnTemplatesRefused(t *testing.T) {
	t.Parallel()
	s := sidecarGuarded(t)
	ns := profileNamespace(t, s, "proxy-overrides")
	c := member(t, s, ns, "guard-test-kubeflow-edit-deployments", deploymentRules)
	ctx := context.Background()

	// What the guard means to refuse: the same switch on the template's own istio-proxy.
	own := podWith(map[string]string{}, "istio-proxy")
	own.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "DISABLE_ENVOY", Value: "true"}}
	err := c.Create(ctx, deploymentOf(ns, "own-proxy", own), client.DryRunAll)
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
		refusedByPolicy(t, c.Create(ctx, deploymentOf(ns, objectName(name), p), client.DryRunAll), guard.WorkloadsPolicy,
			name+": a template whose injected istio-proxy Istio's injector reshapes from proxy.istio.io/overrides")
	}
}

// On a dual-stack cluster istio-cni reads ISTIO_DUAL_STACK from the istio-proxy container's env
// (cni/pkg/plugin/kubernetes.go ExtractPodInfo ProxyEnvironments, sidecar_redirect.go NewRedirect
// redir.dualStack), and with it false picks the pod's first address only
// (tools/common/config/config.go FillConfigFromEnvironment, getLocalIP(dualStack)): an IPv4 first
// address means no ip6tables rule at all (tools/istio-iptables/pkg/builder/iptables_builder_impl.go
// AppendRuleV6/InsertRuleV6 return early when !EnableIPv6), so the pod's IPv6 address takes
// callers past the sidecar. A pod's own istio-proxy env overrides the mesh's ISTIO_DUAL_STACK=true
// (review R13-2, docs/security/reviews.md).
func TestDualStackOffOnTheProxyRefused(t *testing.T) {
	t.Parallel()
	s := sidecarGuarded(t)
	ns := profileNamespace(t, s, "dual-stack")
	c := member(t, s, ns, "guard-test-kubeflow-edit-pods-deployments", append(append([]rbacv1.PolicyRule{}, deploymentRules...), contributorPodRules...))
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, injectedWith(func(p *corev1.Pod) { p.Name, p.Namespace = "plain", ns }), client.DryRunAll),
		"an injected pod is admitted")

	for _, v := range []string{"false", "0", "f", "FALSE"} {
		pod := injectedWith(func(p *corev1.Pod) {
			p.Name, p.Namespace = "dual-"+strings.ToLower(v), ns
			p.Spec.Containers[1].Env = append(p.Spec.Containers[1].Env, corev1.EnvVar{Name: "ISTIO_DUAL_STACK", Value: v})
		})
		refusedByPolicy(t, c.Create(ctx, pod, client.DryRunAll), guard.PodsPolicy, "a pod whose istio-proxy has ISTIO_DUAL_STACK="+v+" (no IPv6 capture)")
	}
	tmpl := podWith(map[string]string{}, "istio-proxy")
	tmpl.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "ISTIO_DUAL_STACK", Value: "false"}}
	refusedByPolicy(t, c.Create(ctx, deploymentOf(ns, "dual", tmpl), client.DryRunAll), guard.WorkloadsPolicy,
		"a template whose istio-proxy has ISTIO_DUAL_STACK=false")
}

// istio-cni reads the pod when its sandbox is set up (cni/pkg/plugin/plugin.go doAddRun calls
// getK8sPodInfo, a GET of the pod at CNI ADD), not as it was created, and skips the redirect of a
// pod without sidecar.istio.io/status. So a member who creates an injected pod held by a
// scheduling gate, removes the annotation, then the gate, runs the pod with its sidecar but without
// the redirect: the update that removes the annotation is refused (review R13-3,
// docs/security/reviews.md).
func TestSidecarStatusRemovalRefused(t *testing.T) {
	t.Parallel()
	s := sidecarGuarded(t)
	ns := profileNamespace(t, s, "status-removed")
	c := member(t, s, ns, "guard-test-kubeflow-edit-pods", contributorPodRules)
	ctx := context.Background()

	pod := injectedWith(func(p *corev1.Pod) {
		p.Name, p.Namespace = "gated", ns
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/later"}}
	})
	require.NoError(t, c.Create(ctx, pod), "the injected pod, gated, is admitted")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(pod), pod))
	delete(pod.Annotations, "sidecar.istio.io/status")
	err := c.Update(ctx, pod)
	t.Logf("removing sidecar.istio.io/status: %v", err)
	if !assert.Error(t, err, "a member removes sidecar.istio.io/status from a pod istio-cni has not yet set up") {
		// What follows the finding: the gate goes, and the pod is scheduled without the annotation.
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(pod), pod))
		pod.Spec.SchedulingGates = nil
		require.NoError(t, c.Update(ctx, pod), "the member removes the scheduling gate")
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(pod), pod))
		_, has := pod.Annotations["sidecar.istio.io/status"]
		assert.False(t, has, "the pod goes to a node without sidecar.istio.io/status")
		return
	}
	assert.Contains(t, err.Error(), guard.PodsPolicy)
}

// A pod as Istio's injector leaves it in Kubeflow's install (kubeflow/manifests
// common/istio/istio-install/base/install.yaml: istio-cni, ENABLE_NATIVE_SIDECARS=true; istio/istio
// manifests/charts/istio-control/istio-discovery/files/injection-template.yaml: istio-validation
// then istio-proxy as init containers, the latter restartPolicy Always; the metadata the template
// writes) is admitted when a member creates it: the sidecar-mode creation check (istio-proxy among
// the init containers and sidecar.istio.io/status) does not refuse injected pods. So is the
// regular-sidecar form (review "Thirteenth review", docs/security/reviews.md).
func TestInjectedPodsAdmitted(t *testing.T) {
	t.Parallel()
	s := sidecarGuarded(t)
	ns := profileNamespace(t, s, "injected")
	c := member(t, s, ns, "guard-test-kubeflow-edit-pods", contributorPodRules)
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
	assert.NoError(t, c.Create(ctx, native, client.DryRunAll), "the injected pod (native sidecar) is refused")

	regular := native.DeepCopy()
	regular.Name = "regular"
	regular.Annotations = annotations(`{"initContainers":["istio-validation"],"containers":["istio-proxy"],"revision":"default"}`)
	regular.Spec.InitContainers = []corev1.Container{validation}
	regular.Spec.Containers = append(regular.Spec.Containers, proxy)
	assert.NoError(t, c.Create(ctx, regular, client.DryRunAll), "the injected pod (regular sidecar) is refused")
}
