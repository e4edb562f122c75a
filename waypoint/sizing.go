package waypoint

import (
	"fmt"

	"istio.io/api/label"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// The ConfigMap keys istiod applies to the HorizontalPodAutoscaler and the PodDisruptionBudget of
// a Gateway. Its waypoint template (istio/istio manifests/charts/istio-control/istio-discovery/
// files/waypoint.yaml) renders both for every waypoint, and istiod keeps them only when some
// overlay has the key (requiredOverlays in pilot/pkg/config/kube/gatewaycommon/
// deploymentcontroller.go), so leaving a key out means "no autoscaler" or "no budget".
const (
	hpaOverlay = "horizontalPodAutoscaler"
	pdbOverlay = "podDisruptionBudget"
)

// spreadKey is the node label the waypoint's pods spread over.
const spreadKey = corev1.LabelHostname

// layer is where istiod applies an overlay: the class defaults first, then the Gateway's
// parametersRef ConfigMap (deploymentcontroller.go, render).
type layer int

const (
	classLayer layer = iota
	gatewayLayer
)

// sizingOverlays are the overlays for s at layer l: the "deployment" patch with the seccomp
// profile, the container's resources, the replica count (without autoscaling, when not the
// Deployment's own default of 1) and, when a waypoint may run more than one pod, a topology
// spread over nodes; a "horizontalPodAutoscaler" patch with autoscaling; a "podDisruptionBudget"
// patch with a budget. Each is a strategic merge patch onto what istiod's template renders
// (applyOverlay in deploymentcontroller.go), so it names only what it changes: a null or an
// empty field there would delete the template's. The one null is the budget's other bound at the
// Gateway's layer (budgetPatch).
func sizingOverlays(s config.WaypointSizing, class string, l layer) (map[string]string, error) {
	podSpec := map[string]any{
		"securityContext": map[string]any{"seccompProfile": map[string]any{"type": string(corev1.SeccompProfileTypeRuntimeDefault)}},
	}
	if s.Resources != nil && (len(s.Resources.Requests) > 0 || len(s.Resources.Limits) > 0) {
		// Containers merge by name: this changes the proxy's resources and nothing else of it.
		podSpec["containers"] = []any{map[string]any{"name": SidecarContainer, "resources": *s.Resources}}
	}
	if s.MaxReplicas() > 1 {
		podSpec["topologySpreadConstraints"] = []corev1.TopologySpreadConstraint{spreadOverNodes(class)}
	}
	spec := map[string]any{"template": map[string]any{"spec": podSpec}}
	if s.Autoscaling == nil && s.Replicas != nil && *s.Replicas != 1 {
		spec["replicas"] = *s.Replicas
	}
	overlays := map[string]any{deploymentOverlay: map[string]any{"spec": spec}}
	if a := s.Autoscaling; a != nil {
		overlays[hpaOverlay] = map[string]any{"spec": map[string]any{
			"minReplicas": a.MinReplicas,
			"maxReplicas": a.MaxReplicas,
			"metrics": []any{map[string]any{"type": "Resource", "resource": map[string]any{
				"name":   string(corev1.ResourceCPU),
				"target": map[string]any{"type": "Utilization", "averageUtilization": a.TargetCPUUtilizationPercentage},
			}}},
		}}
	}
	if b := s.PodDisruptionBudget; b != nil {
		overlays[pdbOverlay] = map[string]any{"spec": budgetPatch(*b, l)}
	}
	data := make(map[string]string, len(overlays))
	for key, o := range overlays {
		out, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("mesh.waypoint: overlay %s: %w", key, err)
		}
		data[key] = string(out)
	}
	return data, nil
}

// spreadOverNodes asks the scheduler to put a waypoint's pods on different nodes, so that one
// node going away leaves the namespace a waypoint pod. It is a preference (ScheduleAnyway): on a
// cluster with fewer nodes than pods, or with nodes full, the pods still start, because a
// waypoint that cannot schedule keeps its namespace unrouted. The class defaults apply to every
// waypoint of the class whatever its name: the selector names the class (istiod labels every
// waypoint pod with both, files/waypoint.yaml) and takes the Gateway's name from the pod's own label
// (matchLabelKeys; beta and on by default since Kubernetes 1.27, and the API server refuses a key
// that is in both). A scheduler without matchLabelKeys counts every waypoint pod of the namespace,
// which in a Profile namespace, with its one waypoint, is the same.
func spreadOverNodes(class string) corev1.TopologySpreadConstraint {
	return corev1.TopologySpreadConstraint{
		MaxSkew:           1,
		TopologyKey:       spreadKey,
		WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{label.IoK8sNetworkingGatewayGatewayClassName.Name: class}},
		MatchLabelKeys:    []string{label.IoK8sNetworkingGatewayGatewayName.Name},
	}
}

// budgetPatch is the budget's spec patch. At the Gateway's layer it sets the other bound to null,
// which deletes it from what the class defaults merged in (a strategic merge patch deletes a key
// whose patch value is null: k8s.io/apimachinery/pkg/util/strategicpatch, mergeMap): class
// defaults with the other bound (rendered from another sizing, or switched from minAvailable to
// maxUnavailable) would otherwise give istiod a budget with both, which the API server refuses
// ("minAvailable and maxUnavailable cannot be both set", k8s.io/kubernetes
// pkg/apis/policy/validation), and the waypoint would have no budget at all. The class defaults
// apply onto the template's budget, which has neither bound, and keep their one key.
func budgetPatch(b config.WaypointDisruptionBudget, l layer) map[string]any {
	pdb := map[string]any{}
	if b.MinAvailable != nil {
		pdb["minAvailable"] = *b.MinAvailable
	} else if l == gatewayLayer {
		pdb["minAvailable"] = nil
	}
	if b.MaxUnavailable != nil {
		pdb["maxUnavailable"] = *b.MaxUnavailable
	} else if l == gatewayLayer {
		pdb["maxUnavailable"] = nil
	}
	return pdb
}
