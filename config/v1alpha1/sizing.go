package v1alpha1

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// WaypointSizing is how large every waypoint is and how many pods it runs. The waypoint plugin
// writes it into the waypoint class defaults ConfigMap (`render -cluster`, waypoint.ClassDefaults),
// whose "deployment", "horizontalPodAutoscaler" and "podDisruptionBudget" keys istiod applies, as
// strategic merge patches, to what it generates for every Gateway of the class (istio/istio
// pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go: render, supportedOverlays,
// requiredOverlays, applyOverlay). docs/configuration.md justifies each default.
type WaypointSizing struct {
	// Resources of the waypoint's istio-proxy container. Each of requests.cpu, requests.memory,
	// limits.cpu and limits.memory left out is Istio's own chart default (istio/istio 1.30.3
	// manifests/charts/istio-control/istio-discovery/values.yaml, global.waypoint.resources:
	// requests 100m CPU and 128Mi, limits 2 CPU and 1Gi), so a stock install sees no change when
	// the class defaults are applied. A request above its limit is refused.
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Replicas of each waypoint Deployment without autoscaling. Left out with autoscaling set (the
	// HorizontalPodAutoscaler owns the count then, and istiod would reset it on every render).
	// Default: 1.
	Replicas *int32 `json:"replicas,omitempty"`
	// PodDisruptionBudget of each waypoint: minAvailable or maxUnavailable, never both. One that
	// would block every eviction (and so every node drain) at the smallest replica count is
	// refused. Default: none with one replica (a budget can only block or do nothing there);
	// maxUnavailable 1 from two replicas (or autoscaling.minReplicas 2) on.
	PodDisruptionBudget *WaypointDisruptionBudget `json:"podDisruptionBudget,omitempty"`
	// Autoscaling gives each waypoint a HorizontalPodAutoscaler on CPU. Default: none.
	Autoscaling *WaypointAutoscaling `json:"autoscaling,omitempty"`
	// SizingOverrides let the Profiles whose namespace's labels match a selector ask for more
	// (resources, replicas, autoscaling bounds) through a Waypoint entry in spec.plugins, up to
	// the maximum the admin sets: the pattern of podSecurity.overrides. Default: none, so no
	// Profile can ask for more.
	SizingOverrides []WaypointSizingOverride `json:"sizingOverrides,omitempty"`
}

// WaypointDisruptionBudget is a PodDisruptionBudget's one bound. Set exactly one.
type WaypointDisruptionBudget struct {
	MinAvailable   *intstr.IntOrString `json:"minAvailable,omitempty"`
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// WaypointAutoscaling is a HorizontalPodAutoscaler's bounds and target.
type WaypointAutoscaling struct {
	// MinReplicas is at least 1 (the class defaults apply to waypoints in use; an idle one is
	// removed whole by mesh.waypoint.provision onDemand, not scaled to zero).
	MinReplicas int32 `json:"minReplicas"`
	// MaxReplicas is at least MinReplicas.
	MaxReplicas int32 `json:"maxReplicas"`
	// TargetCPUUtilizationPercentage of the CPU request. Default: 80.
	TargetCPUUtilizationPercentage int32 `json:"targetCPUUtilizationPercentage,omitempty"`
}

// WaypointSizingOverride allows the Profiles whose namespace's labels match NamespaceSelector a
// larger waypoint, up to Maximum. As with podSecurity.overrides, only labels the admin controls
// may grant it (validation refuses the keys whose value follows the Profile).
type WaypointSizingOverride struct {
	// NamespaceSelector matches the labels of the Profile's namespace. Required.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// Maximum is the most a matching Profile may ask for.
	Maximum WaypointMaximum `json:"maximum"`
}

// WaypointMaximum bounds what a Profile asks for.
type WaypointMaximum struct {
	// Resources caps the requests and the limits a Profile asks for (cpu, memory); a resource not
	// named here may not be raised.
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// Replicas caps replicas and autoscaling.maxReplicas. Zero: may not be raised.
	Replicas int32 `json:"replicas,omitempty"`
}

// DefaultTargetCPUUtilization is the autoscaler's default target, a share of the CPU request.
const DefaultTargetCPUUtilization = 80

// IstioWaypointResources are Istio's chart defaults for the waypoint container (istio/istio 1.30.3
// manifests/charts/istio-control/istio-discovery/values.yaml, global.waypoint.resources), which
// files/waypoint.yaml renders into every waypoint Deployment. Each call returns a new value.
func IstioWaypointResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
}

// IstioSidecarResources are Istio's chart defaults for an injected sidecar (the same values file,
// global.proxy.resources: requests 100m CPU and 128Mi, limits 2000m and 1024Mi), for comparing
// what ambient and sidecar mode reserve.
func IstioSidecarResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2000m"), corev1.ResourceMemory: resource.MustParse("1024Mi")},
	}
}

// SetSizingDefaults fills what was left out, as documented on each field; Config.SetDefaults calls it.
func (s *WaypointSizing) SetSizingDefaults() {
	if s.Resources == nil {
		s.Resources = &corev1.ResourceRequirements{}
	}
	istio := IstioWaypointResources()
	s.Resources.Requests = fillMissing(s.Resources.Requests, istio.Requests)
	s.Resources.Limits = fillMissing(s.Resources.Limits, istio.Limits)
	if s.Autoscaling == nil {
		setIfNil(&s.Replicas, 1)
	} else if s.Autoscaling.TargetCPUUtilizationPercentage == 0 {
		s.Autoscaling.TargetCPUUtilizationPercentage = DefaultTargetCPUUtilization
	}
	if s.PodDisruptionBudget == nil && s.MinReplicas() >= 2 {
		one := intstr.FromInt32(1)
		s.PodDisruptionBudget = &WaypointDisruptionBudget{MaxUnavailable: &one}
	}
}

// fillMissing returns have with every resource of def it lacks.
func fillMissing(have, def corev1.ResourceList) corev1.ResourceList {
	if have == nil {
		have = corev1.ResourceList{}
	}
	for name, q := range def {
		if _, ok := have[name]; !ok {
			have[name] = q
		}
	}
	return have
}

// MinReplicas is the fewest pods a waypoint in use runs: autoscaling.minReplicas, or replicas.
func (s *WaypointSizing) MinReplicas() int32 {
	if s.Autoscaling != nil {
		return s.Autoscaling.MinReplicas
	}
	if s.Replicas == nil {
		return 1
	}
	return *s.Replicas
}

// MaxReplicas is the most pods a waypoint in use runs: autoscaling.maxReplicas, or replicas.
func (s *WaypointSizing) MaxReplicas() int32 {
	if s.Autoscaling != nil {
		return s.Autoscaling.MaxReplicas
	}
	return s.MinReplicas()
}

// validate checks a defaulted sizing; path is mesh.waypoint.
func (s *WaypointSizing) validateSizing(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Resources != nil {
		errs = append(errs, ValidateResources(path.Child("resources"), *s.Resources)...)
	}
	if s.Replicas != nil && s.Autoscaling != nil {
		errs = append(errs, field.Invalid(path.Child("replicas"), *s.Replicas,
			"autoscaling is set, so its HorizontalPodAutoscaler sets the replica count (and istiod would reset the autoscaler's choice on every render); "+
				"leave replicas out and set autoscaling.minReplicas"))
	}
	if s.Replicas != nil && *s.Replicas < 1 {
		errs = append(errs, field.Invalid(path.Child("replicas"), *s.Replicas,
			"must be at least 1: a waypoint without pods drops every request routed to it; an idle namespace loses its waypoint with provision: onDemand"))
	}
	if a := s.Autoscaling; a != nil {
		errs = append(errs, a.validate(path.Child("autoscaling"), s.Resources)...)
	}
	if b := s.PodDisruptionBudget; b != nil {
		errs = append(errs, b.validate(path.Child("podDisruptionBudget"), s.MinReplicas())...)
	}
	for i, o := range s.SizingOverrides {
		errs = append(errs, o.validate(path.Child("sizingOverrides").Index(i))...)
	}
	return errs
}

// ValidateResources refuses a request above its limit and a negative quantity, naming the field,
// such as mesh.waypoint.resources.requests.cpu.
func ValidateResources(path *field.Path, r corev1.ResourceRequirements) field.ErrorList {
	var errs field.ErrorList
	for _, kind := range []struct {
		name string
		list corev1.ResourceList
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		for name, q := range kind.list {
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(path.Child(kind.name, string(name)), q.String(), "must not be negative"))
			}
		}
	}
	for name, req := range r.Requests {
		limit, ok := r.Limits[name]
		if ok && req.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests", string(name)), req.String(),
				fmt.Sprintf("above its limit %s (%s): the API server refuses such a pod, so the waypoint would never start", limit.String(), path.Child("limits", string(name)))))
		}
	}
	sortByField(errs)
	return errs
}

func (a *WaypointAutoscaling) validate(path *field.Path, res *corev1.ResourceRequirements) field.ErrorList {
	var errs field.ErrorList
	if a.MinReplicas < 1 {
		errs = append(errs, field.Invalid(path.Child("minReplicas"), a.MinReplicas,
			"must be at least 1: a waypoint at zero pods drops every request routed to it; to remove idle waypoints use mesh.waypoint.provision: onDemand"))
	}
	if a.MaxReplicas < a.MinReplicas {
		errs = append(errs, field.Invalid(path.Child("maxReplicas"), a.MaxReplicas,
			fmt.Sprintf("below minReplicas %d", a.MinReplicas)))
	}
	if a.TargetCPUUtilizationPercentage < 1 {
		errs = append(errs, field.Invalid(path.Child("targetCPUUtilizationPercentage"), a.TargetCPUUtilizationPercentage, "must be at least 1"))
	}
	if res != nil {
		if q, ok := res.Requests[corev1.ResourceCPU]; !ok || q.IsZero() {
			errs = append(errs, field.Invalid(path.Child("targetCPUUtilizationPercentage"), a.TargetCPUUtilizationPercentage,
				"a CPU utilization target is a share of the CPU request, and resources.requests.cpu is zero"))
		}
	}
	return errs
}

// validate refuses a budget that blocks every eviction at the smallest replica count: the
// disruption controller allows (pods healthy - minAvailable) evictions, or maxUnavailable ones,
// rounding percentages up (k8s.io/kubernetes pkg/controller/disruption, getExpectedScale and
// intstr.GetScaledValueFromIntOrPercent with roundUp true), so a node drain would wait forever.
func (b *WaypointDisruptionBudget) validate(path *field.Path, minReplicas int32) field.ErrorList {
	switch {
	case b.MinAvailable != nil && b.MaxUnavailable != nil:
		return field.ErrorList{field.Invalid(path.Child("maxUnavailable"), b.MaxUnavailable.String(),
			"a PodDisruptionBudget takes minAvailable or maxUnavailable, not both")}
	case b.MinAvailable == nil && b.MaxUnavailable == nil:
		return field.ErrorList{field.Required(path, "set minAvailable or maxUnavailable, or leave podDisruptionBudget out")}
	case b.MinAvailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(b.MinAvailable, int(minReplicas), true)
		if err != nil || n < 0 {
			return field.ErrorList{field.Invalid(path.Child("minAvailable"), b.MinAvailable.String(), "must be a non-negative number or percentage")}
		}
		if n >= int(minReplicas) {
			return field.ErrorList{field.Invalid(path.Child("minAvailable"), b.MinAvailable.String(),
				fmt.Sprintf("keeps all %d pod(s) of a waypoint at its smallest size (replicas or autoscaling.minReplicas), so it blocks every eviction "+
					"and every node drain waits forever; raise the replicas or lower minAvailable", minReplicas))}
		}
	default:
		n, err := intstr.GetScaledValueFromIntOrPercent(b.MaxUnavailable, int(minReplicas), true)
		if err != nil || n < 0 {
			return field.ErrorList{field.Invalid(path.Child("maxUnavailable"), b.MaxUnavailable.String(), "must be a non-negative number or percentage")}
		}
		if n == 0 {
			return field.ErrorList{field.Invalid(path.Child("maxUnavailable"), b.MaxUnavailable.String(),
				"allows no eviction, so every node drain waits forever; use at least 1")}
		}
	}
	return nil
}

func (o *WaypointSizingOverride) validate(path *field.Path) field.ErrorList {
	// The same rule as for Pod Security overrides: only labels the admin controls may grant more.
	errs := PodSecurityOverride{NamespaceSelector: o.NamespaceSelector}.validateMatch(path)
	for name, q := range o.Maximum.Resources {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("maximum", "resources", string(name)), q.String(), "must not be negative"))
		}
	}
	if o.Maximum.Replicas < 0 {
		errs = append(errs, field.Invalid(path.Child("maximum", "replicas"), o.Maximum.Replicas, "must not be negative"))
	}
	return errs
}
