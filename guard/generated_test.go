package guard_test

// Generated pods against the guard on the real API server, each judged also by a model of what
// Istio does with it, written from Istio's source (istio/istio 86c9f01), not from the guard:
//
//   - ambient: istio-cni captures a pod of an ambient namespace unless it runs on the host's
//     network or carries sidecar.istio.io/status (cni/pkg/util/enablement_selector.go Matches), or
//     the default enablement selectors leave it out, which only istio.io/dataplane-mode=none does
//     (manifests/charts/istio-cni/values.yaml ambient.enablementSelectors); once captured, inbound
//     capture is off with ambient.istio.io/bypass-inbound-capture read by strconv.ParseBool, and
//     istio.io/reroute-virtual-interfaces sends an interface's traffic out as the pod's own
//     (cni/pkg/nodeagent/net.go getPodLevelTrafficOverrides).
//   - sidecar (with istio-cni): the redirect is programmed unless the pod has an istio-init
//     container, istio-proxy has DISABLE_ENVOY true or a proxy type other than sidecar (or, on a
//     dual-stack cluster, ISTIO_DUAL_STACK other than true: no IPv6 redirect), there is no
//     istio-proxy, sidecar.istio.io/inject (label first) parses false, or sidecar.istio.io/status is
//     missing (cni/pkg/plugin/plugin.go doAddRun, kubernetes.go getK8sPodInfo); an invalid traffic
//     annotation fails the pod's start (sidecar_redirect.go getAnnotationOrDefault); inbound ports
//     left out of includeInboundPorts (default *) or put in excludeInboundPorts beyond Istio's own
//     15020, 15021 and 15090, excluded interfaces and rerouted interfaces pass the sidecar by.
//
// The invariant: the guard admits no pod the model leaves open to callers past the namespace's
// policies. The guard may refuse more than the model (it refuses switches it need not read, such
// as status.sidecar.istio.io/port, which only the injector reads): that direction is the tests'
// of each check, not this one's.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

func TestGeneratedPodsIstioLeavesOpenRefused(t *testing.T) {
	t.Parallel()
	for _, mode := range []config.MeshMode{config.ModeAmbient, config.ModeSidecar} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			s := guardedIn(t, mode)
			ctx := context.Background()
			ns := profileNamespace(t, s, "generated-"+string(mode))
			// The namespace as the runner leaves it (with Pod Security baseline, which refuses
			// host-network pods whoever creates them).
			labels := map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}
			if mode == config.ModeAmbient {
				labels["istio.io/dataplane-mode"] = "ambient"
			} else {
				labels["istio-injection"] = "enabled"
			}
			n := labelNamespace(t, s, ns, labels)
			member := member(t, s, ns, "guard-test-kubeflow-edit-pods", contributorPodRules)
			// The ReplicaSet controller creates the pods of a member's workloads, after the
			// mutating webhooks (a PodDefault's merge among them) changed them.
			rsController := replicaSetController(t, s, ns)

			var admitted, refused int
			byController := map[bool]int{}
			rapid.Check(t, func(rt *rapid.T) {
				pod := generatedPod(rt, mode)
				pod.Name, pod.Namespace = "generated", ns
				creator := member
				if viaController := rapid.Bool().Draw(rt, "made by the ReplicaSet controller after a webhook"); viaController {
					mergePodDefault(rt, pod)
					creator = rsController
					byController[true]++
				} else {
					if rapid.IntRange(0, 9).Draw(rt, "runs as the waypoint") == 0 {
						pod.Spec.ServiceAccountName = "waypoint"
					}
					byController[false]++
				}
				err := creator.Create(ctx, pod.DeepCopy(), client.DryRunAll)
				if err != nil {
					if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
						rt.Fatalf("neither admitted nor refused by admission: %v", err)
					}
					if !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") && !strings.Contains(err.Error(), "violates PodSecurity") {
						rt.Fatalf("refused, but not by the guard or Pod Security: %v", err)
					}
					refused++
					return
				}
				admitted++
				if creator == member && pod.Spec.ServiceAccountName == "waypoint" {
					rt.Fatalf("the guard admitted a member's pod that runs as the waypoint")
				}
				if why := openUnder(mode, n.Labels, pod); why != "" {
					y, _ := yaml.Marshal(pod)
					rt.Fatalf("the guard admitted a pod Istio leaves open (%s):\n%s", why, y)
				}
			})
			t.Logf("%s: %d generated pods admitted, %d refused (%d made by a member, %d by the ReplicaSet controller after a webhook)",
				mode, admitted, refused, byController[false], byController[true])
			require.Positive(t, admitted, "no generated pod was admitted: the generator makes nothing the guard lets through")
			require.Positive(t, refused, "no generated pod was refused: the generator makes nothing the guard refuses")
		})
	}
}

// maybe draws, one time in four, one of values or, as often as any one of them, nothing (ok
// false); the other times nothing. So most draws change a few things of the pod, which some of
// them leave admitted.
func maybe(t *rapid.T, name string, values ...string) (string, bool) {
	if rapid.IntRange(0, 3).Draw(t, name+" changed") != 0 {
		return "", false
	}
	i := rapid.IntRange(-1, len(values)-1).Draw(t, name)
	if i < 0 {
		return "", false
	}
	return values[i], true
}

// setMaybe, one time in four, sets m[key] to one of values or deletes it.
func setMaybe(t *rapid.T, m map[string]string, key string, values ...string) {
	if rapid.IntRange(0, 3).Draw(t, key+" changed") != 0 {
		return
	}
	if i := rapid.IntRange(-1, len(values)-1).Draw(t, key); i >= 0 {
		m[key] = values[i]
	} else {
		delete(m, key)
	}
}

// generatedPod is a pod with a drawn mix of what Istio reads in mode: in ambient mode a plain pod,
// in sidecar mode (mostly) a pod as the injector leaves it, changed.
func generatedPod(t *rapid.T, mode config.MeshMode) *corev1.Pod {
	var p *corev1.Pod
	if mode == config.ModeSidecar && rapid.IntRange(0, 9).Draw(t, "injected") > 0 {
		p = injectedPod()
	} else {
		p = podWith(map[string]string{})
	}
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Spec.HostNetwork = rapid.IntRange(0, 9).Draw(t, "hostNetwork") == 0
	bools := []string{"true", "false", "1", "0", "True", "FALSE", "t", "yes", ""}
	setMaybe(t, p.Labels, "istio.io/dataplane-mode", "ambient", "none", "None", "NONE", "", "false")
	setMaybe(t, p.Annotations, "ambient.istio.io/bypass-inbound-capture", bools...)
	setMaybe(t, p.Annotations, "istio.io/reroute-virtual-interfaces", "eth1", "", "eth0,eth1")
	setMaybe(t, p.Annotations, "traffic.sidecar.istio.io/kubevirtInterfaces", "eth1", "")
	setMaybe(t, p.Annotations, "ambient.istio.io/redirection", "enabled", "disabled")
	setMaybe(t, p.Labels, "sidecar.istio.io/inject", bools...)
	setMaybe(t, p.Annotations, "sidecar.istio.io/inject", bools...)
	setMaybe(t, p.Annotations, "sidecar.istio.io/status", "{}")
	if mode == config.ModeSidecar {
		setMaybe(t, p.Annotations, "traffic.sidecar.istio.io/includeInboundPorts", "*", "", "8080", "8080,9090", "x")
		setMaybe(t, p.Annotations, "traffic.sidecar.istio.io/excludeInboundPorts", "15020", "", "15021,15090", "8080", "15020,8080", "*")
		setMaybe(t, p.Annotations, "sidecar.istio.io/interceptionMode", "REDIRECT", "TPROXY", "NONE")
		setMaybe(t, p.Annotations, "traffic.sidecar.istio.io/excludeInterfaces", "eth0", "")
		setMaybe(t, p.Annotations, "status.sidecar.istio.io/port", "15020", "0", "8080")
		changeContainers(t, p)
	}
	return p
}

// mergePodDefault changes p as Kubeflow's PodDefault webhook merges a drawn PodDefault into it
// (kubeflow components/admission-webhook/main.go applyPodDefaultsOnPod): its labels and
// annotations into the pod's, its env into every container, Istio's switches among them.
func mergePodDefault(t *rapid.T, p *corev1.Pod) {
	bools := []string{"true", "false", "0", "1"}
	setMaybe(t, p.Labels, "istio.io/dataplane-mode", "none")
	setMaybe(t, p.Labels, "sidecar.istio.io/inject", bools...)
	setMaybe(t, p.Annotations, "ambient.istio.io/bypass-inbound-capture", bools...)
	setMaybe(t, p.Annotations, "sidecar.istio.io/inject", bools...)
	setMaybe(t, p.Annotations, "traffic.sidecar.istio.io/excludeInboundPorts", "8080", "15020")
	var env []corev1.EnvVar
	if v, ok := maybe(t, "PodDefault DISABLE_ENVOY", "true", "false"); ok {
		env = append(env, corev1.EnvVar{Name: "DISABLE_ENVOY", Value: v})
	}
	if v, ok := maybe(t, "PodDefault ISTIO_DUAL_STACK", "false", "true"); ok {
		env = append(env, corev1.EnvVar{Name: "ISTIO_DUAL_STACK", Value: v})
	}
	for _, list := range [][]corev1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range list {
			list[i].Env = append(list[i].Env, env...)
		}
	}
}

// changeContainers draws the containers Istio reads by name: istio-proxy kept, moved among the
// init containers (a native sidecar) or removed, its DISABLE_ENVOY and proxy type, and an
// istio-init container among either list.
func changeContainers(t *rapid.T, p *corev1.Pod) {
	i := slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == "istio-proxy" })
	if i < 0 {
		if rapid.IntRange(0, 3).Draw(t, "add istio-proxy") > 0 {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "registry.example.com/proxyv2:1", Args: []string{"proxy", "sidecar"}})
			i = len(p.Spec.Containers) - 1
		}
	}
	if i >= 0 {
		proxy := &p.Spec.Containers[i]
		if v, ok := maybe(t, "DISABLE_ENVOY", "true", "1", "True", "false", "0", "yes"); ok {
			proxy.Env = append(proxy.Env, corev1.EnvVar{Name: "DISABLE_ENVOY", Value: v})
		}
		if v, ok := maybe(t, "ISTIO_DUAL_STACK", "true", "false", "0", "1", "x"); ok {
			proxy.Env = append(proxy.Env, corev1.EnvVar{Name: "ISTIO_DUAL_STACK", Value: v})
		}
		if v, ok := maybe(t, "proxy type", "router", "ingress", "Sidecar", "waypoint"); ok {
			proxy.Args[1] = v
		}
		switch rapid.IntRange(0, 7).Draw(t, "istio-proxy placement") {
		case 0:
			p.Spec.Containers = slices.Delete(p.Spec.Containers, i, i+1)
		case 1:
			native := *proxy
			native.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			p.Spec.Containers = slices.Delete(p.Spec.Containers, i, i+1)
			p.Spec.InitContainers = append(p.Spec.InitContainers, native)
		}
	}
	init := corev1.Container{Name: "istio-init", Image: "registry.example.com/proxyv2:1"}
	switch rapid.IntRange(0, 7).Draw(t, "istio-init") {
	case 0:
		p.Spec.InitContainers = append(p.Spec.InitContainers, init)
	case 1:
		p.Spec.Containers = append(p.Spec.Containers, init)
	}
}

// openUnder says why Istio, in mode, leaves the pod open to callers past the namespace's
// policies (see the file's comment for the source of each reason), or "" when it does not.
func openUnder(mode config.MeshMode, nsLabels map[string]string, p *corev1.Pod) string {
	if p.Spec.HostNetwork {
		return "on the host's network, which no redirect reaches"
	}
	if mode == config.ModeAmbient {
		return openInAmbient(nsLabels, p)
	}
	return openWithSidecar(p)
}

func openInAmbient(nsLabels map[string]string, p *corev1.Pod) string {
	if _, ok := p.Annotations["sidecar.istio.io/status"]; ok {
		return "sidecar.istio.io/status: istio-cni leaves the pod to a sidecar"
	}
	// The chart's two selectors: the pod labelled ambient, or the namespace labelled ambient and
	// the pod's label NotIn [none] (which an absent label is).
	mode, has := p.Labels["istio.io/dataplane-mode"]
	enabled := mode == "ambient" || (nsLabels["istio.io/dataplane-mode"] == "ambient" && (!has || mode != "none"))
	if !enabled {
		return "outside the enablement selectors"
	}
	if v, ok := p.Annotations["ambient.istio.io/bypass-inbound-capture"]; ok {
		if b, err := strconv.ParseBool(v); err == nil && b {
			return "inbound capture bypassed"
		}
	}
	if v, ok := p.Annotations["istio.io/reroute-virtual-interfaces"]; ok && nonEmptyItem(v) {
		return "an interface rerouted past ztunnel"
	}
	return ""
}

func openWithSidecar(p *corev1.Pod) string {
	all := append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...)
	named := func(name string) *corev1.Container {
		if i := slices.IndexFunc(all, func(c corev1.Container) bool { return c.Name == name }); i >= 0 {
			return &all[i]
		}
		return nil
	}
	if named("istio-init") != nil {
		return "an istio-init container: istio-cni skips the pod"
	}
	proxy := named("istio-proxy")
	if proxy == nil {
		return "no istio-proxy: istio-cni skips the pod"
	}
	for _, e := range proxy.Env {
		if b, err := strconv.ParseBool(e.Value); e.Name == "DISABLE_ENVOY" && err == nil && b {
			return "DISABLE_ENVOY on istio-proxy"
		}
	}
	// On a dual-stack cluster the mesh sets ISTIO_DUAL_STACK=true on istio-proxy; istio-cni takes
	// the last entry (kubernetes.go ExtractPodInfo), anything but true (unparsable too) as false
	// (sidecar_redirect.go NewRedirect), and then writes no IPv6 rule when the pod's first address
	// is IPv4 (tools/common/config/config.go FillConfigFromEnvironment). The model takes the
	// cluster to be dual-stack.
	dual, set := "", false
	for _, e := range proxy.Env {
		if e.Name == "ISTIO_DUAL_STACK" {
			dual, set = e.Value, true
		}
	}
	if b, err := strconv.ParseBool(dual); set && (err != nil || !b) {
		return "ISTIO_DUAL_STACK=" + dual + " on istio-proxy: no IPv6 redirect"
	}
	if len(proxy.Args) >= 2 && proxy.Args[0] == "proxy" && proxy.Args[1] != "sidecar" {
		return "proxy type " + proxy.Args[1]
	}
	inject, ok := p.Labels["sidecar.istio.io/inject"]
	if !ok {
		inject = p.Annotations["sidecar.istio.io/inject"]
	}
	if b, err := strconv.ParseBool(inject); inject != "" && err == nil && !b {
		return "sidecar.istio.io/inject false"
	}
	if _, ok := p.Annotations["sidecar.istio.io/status"]; !ok {
		return "no sidecar.istio.io/status: istio-cni skips the pod"
	}
	return openRedirect(p.Annotations)
}

// openRedirect reads the traffic annotations as istio-cni's redirect does; an invalid one fails
// the pod's start, which leaves nothing open.
func openRedirect(a map[string]string) string {
	include, hasInclude := a["traffic.sidecar.istio.io/includeInboundPorts"]
	exclude := a["traffic.sidecar.istio.io/excludeInboundPorts"]
	for _, ports := range []string{include, exclude} {
		if ports != "*" && !validPorts(ports) {
			return ""
		}
	}
	if m, ok := a["sidecar.istio.io/interceptionMode"]; ok && m != "REDIRECT" && m != "TPROXY" {
		return ""
	}
	if hasInclude && include != "*" {
		return fmt.Sprintf("includeInboundPorts %q leaves other ports uncaptured", include)
	}
	for _, port := range strings.Split(exclude, ",") {
		if port = strings.TrimSpace(port); port != "" && !slices.Contains([]string{"15020", "15021", "15090"}, port) {
			return fmt.Sprintf("excludeInboundPorts %q", exclude)
		}
	}
	for _, key := range []string{"traffic.sidecar.istio.io/excludeInterfaces", "istio.io/reroute-virtual-interfaces", "traffic.sidecar.istio.io/kubevirtInterfaces"} {
		if nonEmptyItem(a[key]) {
			return key + " " + a[key]
		}
	}
	return ""
}

func validPorts(ports string) bool {
	if strings.TrimSpace(ports) == "" {
		return true
	}
	for _, p := range strings.Split(strings.TrimSpace(ports), ",") {
		if _, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16); err != nil {
			return false
		}
	}
	return true
}

func nonEmptyItem(list string) bool {
	for _, item := range strings.Split(list, ",") {
		if strings.TrimSpace(item) != "" {
			return true
		}
	}
	return false
}
