package plan

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// Istio's injected containers (pkg/kube/inject, istio/istio): the proxy, and the init containers
// that set up or check the traffic redirection before anything else runs.
const (
	proxyContainer = "istio-proxy"
)

var istioInitContainers = []string{"istio-init", "istio-validation"}

// initContainerFindings lists, in a sidecar-mode namespace, the pods whose init containers run
// while the sidecar does not: with a classic sidecar (istio-proxy among the containers) every init
// container runs before the proxy starts, and with a native one (istio-proxy an init container
// with restartPolicy Always, ENABLE_NATIVE_SIDECARS) those listed before it do. Their outbound
// connections are already redirected to the proxy (by istio-init or istio-cni), which is not
// listening yet, so they fail; a step that fetches artifacts or dependencies breaks. Ambient mode
// has no such gap: istio-cni adds the pod to ztunnel in the CNI ADD, before any container starts
// (cni/pkg/plugin/plugin.go). Pods without a sidecar are not judged, nor the pods of the waypoint
// named waypointName, whose istio-proxy is no sidecar.
func initContainerFindings(pods []corev1.Pod, waypointName string) []ReadinessFinding {
	var out []ReadinessFinding
	for _, p := range pods {
		early, classic := beforeSidecar(p.Spec)
		if len(early) == 0 || waypoint.IsWaypointPod(p, waypointName) {
			continue
		}
		kind := "native sidecar, listed before it"
		if classic {
			kind = "classic (non-native) sidecar"
		}
		out = append(out, ReadinessFinding{Kind: "Pod", Name: p.Name, Severity: severityReview,
			Reason: fmt.Sprintf("init container(s) %s run before the %s istio-proxy starts: their connections go to a proxy that is not listening yet and fail",
				strings.Join(early, ", "), kind),
			Fix: `native sidecars (istiod ENABLE_NATIVE_SIDECARS, or the pod annotation sidecar.istio.io/nativeSidecar: "true"), ` +
				`or ambient mode, which captures init containers too; for a single step, run it as UID 1337 or exclude its destination with traffic.sidecar.istio.io/excludeOutboundIPRanges`})
	}
	return out
}

// beforeSidecar is the pod's own init containers that start before its sidecar runs, and
// whether the sidecar is a classic one. No sidecar: none.
func beforeSidecar(spec corev1.PodSpec) (early []string, classic bool) {
	native := slices.IndexFunc(spec.InitContainers, func(c corev1.Container) bool {
		return c.Name == proxyContainer && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
	})
	inits := spec.InitContainers
	switch {
	case native >= 0:
		inits = inits[:native]
	case slices.ContainsFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == proxyContainer }):
		classic = true
	default:
		return nil, false
	}
	for _, c := range inits {
		if !slices.Contains(istioInitContainers, c.Name) {
			early = append(early, c.Name)
		}
	}
	return early, classic
}
