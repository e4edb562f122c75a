package waypoint

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// ProfileKind is the spec.plugins kind a Profile uses to ask for a larger waypoint.
const ProfileKind = "Waypoint"

// ProfileSpec is what a Profile may ask for; every field is optional. It is granted only where a
// mesh.waypoint.sizingOverrides entry matches the namespace's labels, only for more than the
// admin's class defaults and only up to the entry's maximum; anything else refuses the whole
// entry (reported on the Profile) and the namespace keeps the admin's sizing.
type ProfileSpec struct {
	// Resources of the waypoint container, each at least the admin's.
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Replicas, at least the admin's; only where the admin set no autoscaling.
	Replicas *int32 `json:"replicas,omitempty"`
	// Autoscaling bounds, each at least the admin's; only where the admin set autoscaling.
	Autoscaling *ProfileAutoscaling `json:"autoscaling,omitempty"`
}

// ProfileAutoscaling are the autoscaler bounds a Profile may raise.
type ProfileAutoscaling struct {
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`
}

// parameters is what the Gateway's parametersRef ConfigMap holds for a namespace, if it is wanted.
type parameters struct {
	// wanted: the seccomp opt-in is on, or the namespace's sizing differs from the class defaults.
	wanted bool
	data   map[string]string
	errs   []error
}

// parameters decides the namespace's parametersRef ConfigMap and points gw at it when wanted.
// istiod applies the class defaults first and the Gateway's parametersRef ConfigMap after them,
// key by key (deploymentcontroller.go, render: templateOverlays), so the per-namespace overlay holds
// the namespace's whole effective sizing: it wins where it differs and repeats the class where not.
func (p *Plugin) parameters(t plugin.Target, gw *gatewayv1.Gateway) parameters {
	w := p.cfg.Mesh.Waypoint
	sizing, sized, errs := p.namespaceSizing(t)
	out := parameters{wanted: *w.SeccompPatch || sized, errs: errs}
	if out.wanted && !sized {
		out.data = map[string]string{deploymentOverlay: seccompPatch}
	}
	if sized {
		data, err := sizingOverlays(sizing, w.ClassName, gatewayLayer)
		if err != nil {
			out.errs = append(out.errs, err)
			out.wanted = *w.SeccompPatch
			if out.wanted {
				out.data = map[string]string{deploymentOverlay: seccompPatch}
			}
			return out
		}
		out.data = data
		if gw.Spec.Infrastructure == nil {
			gw.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{}
		}
		gw.Spec.Infrastructure.ParametersRef = &gatewayv1.LocalParametersReference{Group: "", Kind: "ConfigMap", Name: w.Name + SeccompPatchSuffix}
	}
	return out
}

// namespaceSizing is the namespace's effective sizing: the admin's, or with what the Profile's
// Waypoint entry asks for when all of it is allowed. It reports whether that differs from the
// admin's, and one error per refused field.
func (p *Plugin) namespaceSizing(t plugin.Target) (config.WaypointSizing, bool, []error) {
	admin := p.cfg.Mesh.Waypoint.WaypointSizing
	if t.Profile == nil || len(t.Profile.Spec.Plugins) == 0 {
		return admin, false, nil
	}
	var spec ProfileSpec
	found, err := profilev1.DecodePluginSpec(t.Profile, ProfileKind, &spec)
	if err != nil {
		return admin, false, []error{fmt.Errorf("%w; the admin's waypoint sizing applies", err)}
	}
	if !found {
		return admin, false, nil
	}
	base := field.NewPath("spec", "plugins").Index(slices.IndexFunc(t.Profile.Spec.Plugins, func(pl profilev1.Plugin) bool { return pl.Kind == ProfileKind })).Child("spec")
	most, matched := p.sizingMaximum(t)
	g := grant{admin: admin, max: most, base: base}
	eff := g.apply(spec)
	if len(g.refused) > 0 && !matched {
		g.refused = []string{fmt.Sprintf("%s: no mesh.waypoint.sizingOverrides entry matches the labels of namespace %s, so it may not ask for more than the admin's sizing", base, t.Namespace)}
	}
	if len(g.refused) == 0 {
		for _, e := range config.ValidateResources(base.Child("resources"), *eff.Resources) {
			g.refused = append(g.refused, e.Error())
		}
	}
	if len(g.refused) > 0 {
		errs := make([]error, 0, len(g.refused))
		for _, r := range g.refused {
			errs = append(errs, fmt.Errorf("profile %q: %s; the admin's waypoint sizing applies", t.Profile.Name, r))
		}
		return admin, false, errs
	}
	eff.SetSizingDefaults()
	return eff, !equality.Semantic.DeepEqual(eff, admin), nil
}

// grant applies a Profile's request to the admin's sizing within max, collecting refusals.
type grant struct {
	admin   config.WaypointSizing
	max     config.WaypointMaximum
	base    *field.Path
	refused []string
}

func (g *grant) refuse(path *field.Path, value any, why string) {
	g.refused = append(g.refused, fmt.Sprintf("%s: %v refused: %s", path, value, why))
}

// apply returns a copy of the admin's sizing with what spec asks for, where allowed.
func (g *grant) apply(spec ProfileSpec) config.WaypointSizing {
	eff := g.admin
	eff.Resources = g.admin.Resources.DeepCopy()
	if eff.Resources == nil {
		eff.Resources = &corev1.ResourceRequirements{}
	}
	if g.admin.Autoscaling != nil {
		a := *g.admin.Autoscaling
		eff.Autoscaling = &a
	}
	if r := spec.Resources; r != nil {
		eff.Resources.Requests = g.resources(g.base.Child("resources", "requests"), r.Requests, eff.Resources.Requests)
		eff.Resources.Limits = g.resources(g.base.Child("resources", "limits"), r.Limits, eff.Resources.Limits)
	}
	if spec.Replicas != nil {
		path := g.base.Child("replicas")
		switch {
		case g.admin.Autoscaling != nil:
			g.refuse(path, *spec.Replicas, "the admin's waypoints autoscale (mesh.waypoint.autoscaling): ask for autoscaling.minReplicas instead")
		default:
			if g.replicas(path, *spec.Replicas, *g.admin.Replicas) {
				n := *spec.Replicas
				eff.Replicas = &n
			}
		}
	}
	if a := spec.Autoscaling; a != nil {
		path := g.base.Child("autoscaling")
		if g.admin.Autoscaling == nil {
			g.refuse(path, "autoscaling", "the admin's waypoints do not autoscale (mesh.waypoint.autoscaling is not set): ask for replicas instead")
			return eff
		}
		if a.MinReplicas != nil && g.replicas(path.Child("minReplicas"), *a.MinReplicas, g.admin.Autoscaling.MinReplicas) {
			eff.Autoscaling.MinReplicas = *a.MinReplicas
		}
		if a.MaxReplicas != nil && g.replicas(path.Child("maxReplicas"), *a.MaxReplicas, g.admin.Autoscaling.MaxReplicas) {
			eff.Autoscaling.MaxReplicas = *a.MaxReplicas
		}
		if eff.Autoscaling.MinReplicas > eff.Autoscaling.MaxReplicas {
			g.refuse(path.Child("maxReplicas"), eff.Autoscaling.MaxReplicas, fmt.Sprintf("below minReplicas %d", eff.Autoscaling.MinReplicas))
		}
	}
	return eff
}

// resources merges asked into have (a copy), each value at least have's and at most the maximum.
func (g *grant) resources(path *field.Path, asked, have corev1.ResourceList) corev1.ResourceList {
	out := have.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	names := make([]string, 0, len(asked))
	for name := range asked {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, n := range names {
		name := corev1.ResourceName(n)
		q := asked[name]
		limit, capped := g.max.Resources[name]
		switch cur, ok := have[name]; {
		case ok && q.Cmp(cur) == 0:
		case ok && q.Cmp(cur) < 0:
			g.refuse(path.Key(n), q.String(), fmt.Sprintf("below the admin's %s: a Profile may ask for more only", cur.String()))
		case !capped:
			g.refuse(path.Key(n), q.String(), "no matching mesh.waypoint.sizingOverrides entry lets it be raised (maximum.resources names no "+n+")")
		case q.Cmp(limit) > 0:
			g.refuse(path.Key(n), q.String(), fmt.Sprintf("above the maximum %s that mesh.waypoint.sizingOverrides allows this namespace", limit.String()))
		default:
			out[name] = q
		}
	}
	return out
}

// replicas says whether asked is allowed: at least the admin's, at most the maximum.
func (g *grant) replicas(path *field.Path, asked, admin int32) bool {
	switch {
	case asked < admin:
		g.refuse(path, asked, fmt.Sprintf("below the admin's %d: a Profile may ask for more only", admin))
	case asked > g.max.Replicas && asked != admin:
		g.refuse(path, asked, fmt.Sprintf("above the maximum %d that mesh.waypoint.sizingOverrides allows this namespace", g.max.Replicas))
	default:
		return true
	}
	return false
}

// sizingMaximum is the most any matching sizingOverrides entry allows the namespace: per resource
// and for replicas, the largest. It reads the namespace's labels only, as podSecurity.overrides do:
// the Profile's name is the user's choice.
func (p *Plugin) sizingMaximum(t plugin.Target) (config.WaypointMaximum, bool) {
	most := config.WaypointMaximum{Resources: corev1.ResourceList{}}
	matched := false
	for _, o := range p.cfg.Mesh.Waypoint.SizingOverrides {
		if !selects(o.NamespaceSelector, t.Observed.Labels) {
			continue
		}
		matched = true
		for name, q := range o.Maximum.Resources {
			if cur, ok := most.Resources[name]; !ok || q.Cmp(cur) > 0 {
				most.Resources[name] = q
			}
		}
		most.Replicas = max(most.Replicas, o.Maximum.Replicas)
	}
	return most, matched
}

func selects(sel *metav1.LabelSelector, have map[string]string) bool {
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(have))
}

// sizingWarning says what a granted per-namespace sizing costs: the same exposure as the seccomp
// opt-in, since the sizing reaches istiod through a ConfigMap in the user namespace.
func (p *Plugin) sizingWarning(namespace string) string {
	return fmt.Sprintf("this Profile's waypoint sizing (spec.plugins kind %s, granted by mesh.waypoint.sizingOverrides) is ConfigMap %s/%s, "+
		"which namespace editors can write and istiod applies to the waypoint Deployment; the runner restores any change and keeps "+
		"istio.io/use-waypoint off until it has, but istiod may roll out their patch before that",
		ProfileKind, namespace, p.cfg.Mesh.Waypoint.Name+SeccompPatchSuffix)
}
