package waypoint

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"istio.io/api/annotation"
	"istio.io/api/label"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	psaapi "k8s.io/pod-security-admission/api"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

const (
	// PluginName is the plugin's name: its field manager and the value of plugin.PluginLabel.
	PluginName = "waypoint"
	// InjectionLabel turns sidecar injection on or off for a namespace; istio.io/api has no constant.
	InjectionLabel = "istio-injection"
	// listenerName, listenerPort and listenerProtocol are the one listener istiod accepts on a waypoint.
	listenerName     = "mesh"
	listenerPort     = 15008
	listenerProtocol = "HBONE"
	// SeccompPatchSuffix names the ConfigMap with the waypoint's Pod Security patch: <waypoint>-seccomp.
	SeccompPatchSuffix = "-seccomp"
	// ClassDefaultsLabel marks the ConfigMap whose keys istiod applies to every Gateway of the
	// class named by the label's value, before the Gateway's own parametersRef. istiod reads it
	// only in its own namespace (mesh.istiodNamespace); it arrived in Istio 1.26.0 (istio/istio
	// PR #55283, pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go in 1.30). istio.io/api
	// has no constant for it.
	ClassDefaultsLabel = "gateway.istio.io/defaults-for-class"
	// SidecarContainer is the name of Istio's injected proxy container.
	SidecarContainer = "istio-proxy"
	// WaitingForWaypoint starts the Result's waiting message while the waypoint is not ready, so
	// controllers can count such namespaces.
	WaitingForWaypoint = "waiting for waypoint"
)

// seccompPatch is the strategic merge patch istiod applies to the waypoint Deployment it generates.
const seccompPatch = `spec:
  template:
    spec:
      securityContext:
        seccompProfile:
          type: RuntimeDefault
`

// Plugin is the mesh plugin. Create it with New.
type Plugin struct{ cfg *config.Config }

var (
	_ plugin.Plugin        = (*Plugin)(nil)
	_ plugin.PodObserver   = (*Plugin)(nil)
	_ plugin.PodDemand     = (*Plugin)(nil)
	_ plugin.DataPlane     = (*Plugin)(nil)
	_ plugin.PodProtector  = (*Plugin)(nil)
	_ plugin.CacheDeclarer = (*Plugin)(nil)
)

// New returns the plugin for a validated configuration.
func New(cfg *config.Config) *Plugin { return &Plugin{cfg: cfg} }

// Name implements plugin.Plugin.
func (p *Plugin) Name() string { return PluginName }

// Kinds implements plugin.Plugin.
func (p *Plugin) Kinds() []client.ObjectList {
	return []client.ObjectList{&gatewayv1.GatewayList{}, &corev1.ConfigMapList{}}
}

// CacheByObject implements plugin.CacheDeclarer: the plugin reads no other writer's ConfigMap,
// so a controller's cache holds only the plugins' own, trimmed (plugin.OwnedConfigMaps), and not
// every ConfigMap of every user namespace. The runner reads a wanted one in full past the cache
// (the waypoint's seccomp patch, with mesh.waypoint.seccompPatch on). Gateways could be selected
// as well, but a ByObject entry makes the manager fail to start where the Gateway API CRDs are not
// installed, and a namespace holds few.
func (p *Plugin) CacheByObject() map[client.Object]cache.ByObject { return plugin.OwnedConfigMaps() }

// NeedsPods implements plugin.PodObserver: in ambient mode it looks for pods left with a sidecar.
func (p *Plugin) NeedsPods() bool { return p.cfg.Mesh.Mode == config.ModeAmbient }

// NeedsPodsFor implements plugin.PodDemand: the pods only feed warnings (pods still running a
// sidecar, pods outside every data plane), given while the namespace is on its way into ambient
// from a mesh: the plugin is about to change one of its labels (enrolment, injection off,
// routing). A namespace at rest lists no pods, nor does one that only waits for its waypoint to be
// Programmed, nor one without any label of Istio's data planes (a new namespace): no pod of it was
// injected through its labels, and the plugin decides nothing on pods. The decisions pods weigh
// in are the runner's (a data-plane label of the plugin's own that may go, a sidecar-form owner
// policy that may be pruned), and it lists them for those itself.
func (p *Plugin) NeedsPodsFor(t plugin.Target, d plugin.Desired) bool {
	if p.cfg.Mesh.Mode != config.ModeAmbient || !meshLabelled(t.Observed.Labels) {
		return false
	}
	for k, v := range d.Labels {
		if have, ok := t.Observed.Labels[k]; !ok || have != v {
			return true
		}
	}
	return false
}

// meshLabelled says whether the namespace carries a label of Istio's data planes (sidecar
// injection, a revision, ambient enrolment), set by this plugin or anyone: it is or was in a mesh.
func meshLabelled(labels map[string]string) bool {
	for _, k := range []string{InjectionLabel, label.IoIstioRev.Name, label.IoIstioDataplaneMode.Name} {
		if _, ok := labels[k]; ok {
			return true
		}
	}
	return false
}

// Generate implements plugin.Plugin.
func (p *Plugin) Generate(t plugin.Target) (plugin.Desired, error) {
	m := p.cfg.Mesh
	var d plugin.Desired
	switch m.Mode {
	case config.ModeNone:
	case config.ModeSidecar:
		d = plugin.Desired{Labels: sidecarLabels(m.Revision)}
	case config.ModeAmbient:
		d = p.ambient(t)
	default:
		return plugin.Desired{}, fmt.Errorf("mesh.mode %q is not supported", m.Mode)
	}
	d.Enrolment = EnrolmentLabels()
	return d, nil
}

// EnrolmentLabels are the labels that route a namespace's traffic: when they go away or change,
// the runner withdraws them before the policies change (see plugin.Desired.Enrolment). Each call
// returns a new slice, so no caller can change what the plugin declares.
func EnrolmentLabels() []string {
	return []string{
		label.IoIstioUseWaypoint.Name,
		label.IoIstioIngressUseWaypoint.Name,
		label.IoIstioDataplaneMode.Name,
	}
}

// sidecarLabels turns on injection. With a revision, istio.io/rev selects the injector, and
// istio-injection must be absent because it would take precedence.
func sidecarLabels(revision string) map[string]string {
	if revision != "" {
		return map[string]string{label.IoIstioRev.Name: revision}
	}
	return map[string]string{InjectionLabel: "enabled"}
}

func (p *Plugin) ambient(t plugin.Target) plugin.Desired {
	m := p.cfg.Mesh
	gw := Gateway(p.cfg, t.Namespace)
	gwRef := plugin.Ref{GroupKind: gatewayGK, Name: gw.Name}
	owner := plugin.Ref{GroupKind: istioPolicyGK, Name: p.cfg.Authorization.OwnerPolicyName}
	// Every list of Refs below is cut from refs with its capacity ending where it ends, so that
	// each stays independent of the others and one allocation serves them all.
	refs := make([]plugin.Ref, 0, 10)
	d := plugin.Desired{Objects: make([]client.Object, 0, 2)}
	// The patch ConfigMap comes before the Gateway: the runner writes objects in this order, and
	// istiod refuses to render a waypoint whose parametersRef names a missing ConfigMap.
	params := p.parameters(t, gw)
	d.Errors = append(d.Errors, params.errs...)
	patch, patchWaits := p.patchConfigMap(t, gw, params)
	d.Waiting = append(d.Waiting, patchWaits...)
	if patch != nil {
		d.Objects = append(d.Objects, patch)
	}
	if *m.Waypoint.SeccompPatch {
		d.Warnings = append(d.Warnings, p.patchWarning(t.Namespace))
	} else if params.wanted {
		d.Warnings = append(d.Warnings, p.sizingWarning(t.Namespace))
	}
	// With the opt-in on, traffic goes only through a waypoint built with the plugin's own patch: while
	// the Gateway cannot reference it (another writer's ConfigMap holds its name, or it is not made
	// yet), the routing labels are not wanted, so the runner takes them off before the Gateway
	// changes, and sets them once istiod has programmed the Gateway that references it.
	unpatched := params.wanted && !referencesPatch(gw)
	serve, whyNot := p.waypointMayServe(t.Observed, gw)
	dm := p.demand(t, gw.Name)
	if serve && !dm.gateway {
		// Idle (provision onDemand): no Gateway and no routing labels; what stands is removed,
		// the routing labels first (plugin.Desired.Enrolment).
		serve = false
	} else if serve {
		d.Objects = append(d.Objects, gw)
		d.CreateRequires = map[plugin.Ref][]plugin.Ref{gwRef: cut(&refs, owner)}
		if referencesPatch(gw) {
			// A new waypoint never starts from a ConfigMap the plugin did not make.
			d.CreateRequires[gwRef] = append(d.CreateRequires[gwRef], patchRef(gw))
		}
	} else {
		d.Waiting = append(d.Waiting, fmt.Sprintf("%s: Gateway %s/%s is not made until %s, so that it never serves without its owner policy",
			WaitingForWaypoint, t.Namespace, gw.Name, whyNot))
	}

	ztunnel := plugin.Ref{GroupKind: istioPolicyGK, Name: p.cfg.Authorization.ZtunnelPolicyName}
	d.Labels = map[string]string{
		label.IoIstioDataplaneMode.Name: ambientMode,
		InjectionLabel:                  "disabled",
	}
	d.LabelRequires = map[string][]plugin.Ref{label.IoIstioDataplaneMode.Name: cut(&refs, ztunnel)}
	p.recordDemand(&d, dm)
	if m.Revision != "" {
		d.Labels[label.IoIstioRev.Name] = m.Revision
	}
	if injecting(t.Observed.Labels) && t.Observed.Labels[label.IoIstioDataplaneMode.Name] != ambientMode {
		p.keepInjection(t, &d)
	}

	detached := p.ownerPolicyDetached(t.Observed, gw)
	if detached != "" {
		d.Waiting = append(d.Waiting, detached)
	}
	elsewhere := waypointElsewhere(t, gw.Name)
	if elsewhere != nil {
		d.Errors = append(d.Errors, elsewhere)
	}
	if ready, why := Ready(t.Observed, gw); ready && serve && dm.route && detached == "" && elsewhere == nil && !unpatched {
		d.Labels[label.IoIstioUseWaypoint.Name] = gw.Name
		// Ready judged the Gateway by its observed status: a change written to it in this call
		// makes that status the previous generation's.
		d.ReadyFromStatus = cut(&refs, gwRef)
		// Traffic routed to the waypoint is checked there by the owner policy only; the ztunnel
		// policy admits the waypoint, so without the owner policy the waypoint would pass anyone.
		routed := append(make([]plugin.Ref, 0, 4), owner, ztunnel, gwRef) // and room for the ConfigMap
		if patch != nil {
			// istiod patches the waypoint Deployment with whatever the Gateway's parametersRef
			// ConfigMap holds; only the plugin's own, intact one may shape the pod traffic goes
			// through, also while a Gateway that still references it is being updated.
			routed = append(routed, patchRef(gw))
		}
		d.LabelRequires[label.IoIstioUseWaypoint.Name] = cut(&refs, routed...)
		if *m.IngressUseWaypoint {
			d.Labels[label.IoIstioIngressUseWaypoint.Name] = "true"
			d.LabelRequires[label.IoIstioIngressUseWaypoint.Name] = cut(&refs, routed...)
		}
	} else if serve && dm.route && !ready {
		d.Waiting = append(d.Waiting, fmt.Sprintf(
			WaitingForWaypoint+": %sGateway %s/%s %s; istio.io/use-waypoint stays unset until it is Programmed with an address, "+
				"and the ztunnel policy keeps the namespace closed meanwhile (check `kubectl -n %s describe gateway %s` and the events of deployment %s, "+
				"where a pod refused by Pod Security shows)%s", dm.starting(), t.Namespace, gw.Name, why, t.Namespace, gw.Name, gw.Name, p.restrictedHint(t)))
	}
	if pods := optedOut(t.Observed.Pods, gw.Name); len(pods) > 0 {
		d.Warnings = append(d.Warnings, fmt.Sprintf(
			"%d pod(s) run outside every data plane, reachable in plaintext by anyone and under no policy: Istio's CNI agent skips a pod labelled %s=%s "+
				"or annotated %s without an %s container (forbid both in user namespaces with an admission policy): %s",
			len(pods), label.IoIstioDataplaneMode.Name, noneMode, annotation.SidecarStatus.Name, SidecarContainer, strings.Join(pods, ", ")))
	}
	if pods := restartable(t.Observed.Pods, gw.Name); len(pods) > 0 {
		d.Warnings = append(d.Warnings, fmt.Sprintf(
			"%d pod(s) still run an %s sidecar and join ambient only when restarted (for example `kubectl -n %s rollout restart deployment`): %s",
			len(pods), SidecarContainer, t.Namespace, strings.Join(pods, ", ")))
	}
	return d
}

// patchConfigMap is the per-namespace seccomp ConfigMap to keep, if any, and what the Gateway's
// parametersRef waits for. When it is wanted (the seccomp opt-in, or a sizing the Profile was
// granted: params) it is the plugin's ConfigMap with params' overlays, and gw references it
// only when that cannot patch the waypoint from a ConfigMap another writer made or from a missing
// one: never while another writer's ConfigMap has the name, and on an existing Gateway only once
// the ConfigMap is observed as the plugin's (or the Gateway already references it: the runner
// writes the ConfigMap before the Gateway). When it is not wanted, a ConfigMap of the plugin's that
// the observed Gateway still references (a namespace set up with it on, such as by releases
// before the opt-in) is kept until the Gateway no longer does, so the runner prunes it in a later
// call than the one that updates the Gateway, and istiod never renders the waypoint with a
// parametersRef that names a missing ConfigMap (istio/istio
// pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go, fetchParameters, fails the render).
func (p *Plugin) patchConfigMap(t plugin.Target, gw *gatewayv1.Gateway, params parameters) (*corev1.ConfigMap, []string) {
	want := SeccompConfigMap(p.cfg, t.Namespace)
	if params.wanted {
		want.Data = params.data
	}
	cur, exists := plugin.Lookup[*corev1.ConfigMap](t.Observed, want.Name)
	ours := exists && plugin.IsManagedBy(cur.Labels, PluginName)
	observedGW, gwExists := plugin.Lookup[*gatewayv1.Gateway](t.Observed, gw.Name)
	observedRefs := gwExists && referencesPatch(observedGW) && observedGW.Spec.Infrastructure.ParametersRef.Name == want.Name
	if !params.wanted {
		if ours && observedRefs {
			return want, []string{fmt.Sprintf("ConfigMap %s/%s (mesh.waypoint.seccompPatch is off) is pruned once Gateway %s no longer references it",
				t.Namespace, want.Name, gw.Name)}
		}
		return nil, nil
	}
	if (exists && !ours) || (!exists && gwExists && !observedRefs) {
		gw.Spec.Infrastructure.ParametersRef = nil
		if gw.Spec.Infrastructure.Labels == nil && gw.Spec.Infrastructure.Annotations == nil {
			gw.Spec.Infrastructure = nil
		}
		if exists {
			// Another writer's, whatever its labels say (the runner shows the plugins' objects
			// with their labels only when the Profile controls them): istiod would patch the
			// waypoint Deployment with whatever it holds.
			return want, []string{fmt.Sprintf("Gateway %s/%s does not reference ConfigMap %s (mesh.waypoint.seccompPatch) while another writer's holds its name, "+
				"and istio.io/use-waypoint waits: istiod would build the waypoint from it; delete that ConfigMap to let the plugin make its own",
				t.Namespace, gw.Name, want.Name)}
		}
		return want, []string{fmt.Sprintf("Gateway %s/%s references ConfigMap %s (mesh.waypoint.seccompPatch) only once that ConfigMap is the plugin's, "+
			"and istio.io/use-waypoint waits for that", t.Namespace, gw.Name, want.Name)}
	}
	return want, nil
}

// referencesPatch says whether the Gateway names a ConfigMap in spec.infrastructure.parametersRef.
func referencesPatch(gw *gatewayv1.Gateway) bool {
	i := gw.Spec.Infrastructure
	return i != nil && i.ParametersRef != nil && i.ParametersRef.Group == "" && i.ParametersRef.Kind == "ConfigMap"
}

func patchRef(gw *gatewayv1.Gateway) plugin.Ref {
	return plugin.Ref{GroupKind: configMapGK, Name: gw.Name + SeccompPatchSuffix}
}

// patchWarning says what the per-namespace opt-in costs.
func (p *Plugin) patchWarning(namespace string) string {
	name := p.cfg.Mesh.Waypoint.Name + SeccompPatchSuffix
	return fmt.Sprintf("mesh.waypoint.seccompPatch is on: namespace editors (Kubeflow contributors with edit) can write ConfigMap %s/%s, "+
		"which istiod applies to the waypoint Deployment (image, containers) and so could switch off the owner's L7 policy; "+
		"the runner restores any change and keeps istio.io/use-waypoint off until it has, but istiod may roll out their patch before that: "+
		"prefer the class defaults in %s (`render -cluster`, waypoint.ClassDefaults) with seccompPatch: false",
		namespace, name, p.cfg.Mesh.IstiodNamespace)
}

// restrictedHint adds, for a waypoint that is not Programmed under enforce "restricted" without
// the per-namespace patch, the likely reason and its fix. The enforce level is the namespace's
// label as observed, or the configured one when the label is not there yet (the pss plugin sets
// it in the same call).
func (p *Plugin) restrictedHint(t plugin.Target) string {
	level, set := t.Observed.Labels[psaapi.EnforceLevelLabel]
	if !set {
		level = string(p.cfg.PodSecurity.Enforce.Level)
	}
	if level != string(psaapi.LevelRestricted) || *p.cfg.Mesh.Waypoint.SeccompPatch {
		return ""
	}
	return fmt.Sprintf("; enforce is %q and mesh.waypoint.seccompPatch is off, so PodSecurity rejects the waypoint pods unless "+
		"the waypoint class defaults ConfigMap (label %s=%s, seccompProfile RuntimeDefault) exists in namespace %s (Istio 1.26+): "+
		"apply it with `go run ./cmd/profile-plugins render -cluster | kubectl apply -f -`, or set mesh.waypoint.seccompPatch: true",
		psaapi.LevelRestricted, ClassDefaultsLabel, p.cfg.Mesh.Waypoint.ClassName, p.cfg.Mesh.IstiodNamespace)
}

// cut appends rs to refs and returns them as a list of their own: its capacity ends with it, so
// appending to it never writes into the next list cut from refs.
func cut(refs *[]plugin.Ref, rs ...plugin.Ref) []plugin.Ref {
	start := len(*refs)
	*refs = append(*refs, rs...)
	return (*refs)[start:len(*refs):len(*refs)]
}

// waypointMayServe says whether the waypoint Gateway is wanted now, and otherwise what it waits
// for. Istio programs a waypoint as soon as its Gateway exists, and any namespace editor may label
// a Service (or pod) istio.io/use-waypoint to send traffic through it; the ztunnel policy admits
// the waypoint, so a waypoint without the owner policy attached would pass every request unless the
// cluster-wide default-deny exists. So the Gateway is made only when the owner policy is already
// attached to it, or missing (the authz plugin then makes it in that form, and the runner creates
// the Gateway only after it, see plugin.Desired.CreateRequires). A Gateway of the plugin's own is
// kept while the owner policy is the library's (or one authorization.adoptOwnerPolicy takes over),
// whatever its form (a switch in progress). While another writer holds the owner policy's name
// and it is not adopted, the Gateway is not wanted at all: it is removed, after the routing labels.
func (p *Plugin) waypointMayServe(obs plugin.Observed, gw *gatewayv1.Gateway) (bool, string) {
	name := p.cfg.Authorization.OwnerPolicyName
	owner, ok := plugin.Lookup[*istiosecurityv1.AuthorizationPolicy](obs, name)
	if !ok {
		return true, ""
	}
	if owner.Labels[plugin.ManagedByLabel] != plugin.ManagedByValue && !p.cfg.Authorization.AdoptOwnerPolicy {
		return false, fmt.Sprintf("AuthorizationPolicy %s, which another writer made, is replaced by the plugin's", name)
	}
	if cur, ok := plugin.Lookup[*gatewayv1.Gateway](obs, gw.Name); ok && plugin.IsManagedBy(cur.Labels, PluginName) {
		return true, ""
	}
	if attached(owner, gw.Name) {
		return true, ""
	}
	return false, fmt.Sprintf("AuthorizationPolicy %s is attached to it", name)
}

// ownerPolicyDetached says why traffic must not be routed to the waypoint although its
// requirements may count as intact ("" when it may): the plugins' observed owner policy is not
// attached to it. The requirement check compares the policy with what the access plugin wants
// now, and that may be its sidecar form for a while (a switch from sidecar mode, or another
// writer that took its targetRefs while the ztunnel policy was damaged): only attachment tells
// whether the waypoint would check anyone. Another writer's detached policy counts too while the
// namespace is not routed yet: with authorization.adoptOwnerPolicy the access plugin takes it over
// in this very call, in its sidecar form unless the ztunnel policy is intact, so the requirement
// check after the call cannot tell (property test: a foreign detached owner policy adopted while
// the ztunnel policy was drifted was routed to). In a namespace already routed the access plugin
// attaches it at once, so routing stays. A missing one is a missing requirement.
func (p *Plugin) ownerPolicyDetached(obs plugin.Observed, gw *gatewayv1.Gateway) string {
	owner, ok := plugin.Lookup[*istiosecurityv1.AuthorizationPolicy](obs, p.cfg.Authorization.OwnerPolicyName)
	managed := ok && owner.Labels[plugin.ManagedByLabel] == plugin.ManagedByValue
	routed := obs.Labels[label.IoIstioUseWaypoint.Name] != "" || obs.Labels[label.IoIstioIngressUseWaypoint.Name] != ""
	if !ok || attached(owner, gw.Name) || (!managed && routed) {
		return ""
	}
	return fmt.Sprintf("label %s withheld: AuthorizationPolicy %s is not attached to Gateway %s yet", label.IoIstioUseWaypoint.Name, owner.Name, gw.Name)
}

// waypointElsewhere refuses a namespace whose istio.io/use-waypoint-namespace label names another
// namespace (or none). With the namespace's istio.io/use-waypoint, Istio then looks for the
// waypoint in that namespace, not for this namespace's own (istio/istio
// pilot/pkg/serviceregistry/ambient/waypoints.go, GetUseWaypoint; in older releases under
// pilot/pkg/serviceregistry/kube/controller/ambient/), and attaches the
// namespace only if that waypoint's listener allows routes from it, which a listener without
// allowedRoutes, as istioctl and this plugin write it, does for its own namespace only
// (makeWaypointSelector: NamespacesFromSame; AllowsAttachmentFromNamespace). So the namespace
// gets no waypoint, ztunnel delivers straight to the pods, and the ztunnel policy, which admits
// only this namespace's waypoint, refuses every request. A waypoint elsewhere that allows the
// routes would get every request of the namespace without the owner's policy, and still not
// reach the pods. Neither is what the plugin guarantees, so routing is withheld and the label is
// reported; it is not the plugin's to remove (the profiles controller sets it from its
// -waypoint-namespace flag). A Service's own label affects only that Service, which the
// namespace's editors control anyway; the plugins do not read Services.
func waypointElsewhere(t plugin.Target, waypoint string) error {
	key := label.IoIstioUseWaypointNamespace.Name
	other, set := t.Observed.Labels[key]
	if !set || other == t.Namespace {
		return nil
	}
	return fmt.Errorf("namespace label %s=%q names another namespace than %s: Istio would look for waypoint %s in %q, and a waypoint listener "+
		"admits only its own namespace unless it sets allowedRoutes, so every request would go straight to the pods, where the ztunnel policy refuses it; "+
		"%s and %s are withheld until the label is removed or names %s (the profiles controller sets it from -waypoint-namespace: leave that flag empty)",
		key, other, t.Namespace, waypoint, other, label.IoIstioUseWaypoint.Name, label.IoIstioIngressUseWaypoint.Name, t.Namespace)
}

// attached says whether pol's targetRefs name the Gateway.
func attached(pol *istiosecurityv1.AuthorizationPolicy, gateway string) bool {
	for _, ref := range pol.Spec.TargetRefs {
		if ref.GetGroup() == gatewayv1.GroupName && ref.GetKind() == "Gateway" && ref.GetName() == gateway {
			return true
		}
	}
	return false
}

// injecting says whether the namespace labels turn sidecar injection on: istio-injection=enabled,
// or istio.io/rev without istio-injection (which would take precedence).
func injecting(labels map[string]string) bool {
	v, set := labels[InjectionLabel]
	return v == "enabled" || (!set && labels[label.IoIstioRev.Name] != "")
}

// keepInjection keeps sidecar injection on while a sidecar namespace is not yet enrolled in
// ambient: istio-injection=disabled without istio.io/dataplane-mode=ambient would start every new
// pod outside every data plane, and ambient enrolment may be withheld (the ztunnel policy is
// missing, broken or not the plugin's). This mirrors the runner's data-plane hold for the way back
// (plugin.DataPlane). It follows Istio's own migration order ("Enable ambient mode" on istio.io):
// dataplane-mode=ambient first while injection is still on (the sidecar takes precedence over
// ztunnel for pods that have both), injection off only once the namespace is observed in ambient.
func (p *Plugin) keepInjection(t plugin.Target, d *plugin.Desired) {
	if p.cfg.Mesh.Revision == "" {
		d.Labels[InjectionLabel] = "enabled"
	} else {
		delete(d.Labels, InjectionLabel)
	}
	d.Waiting = append(d.Waiting, fmt.Sprintf("keeps sidecar injection on until namespace %s is labelled %s=%s, so that no new pod starts outside every data plane",
		t.Namespace, label.IoIstioDataplaneMode.Name, ambientMode))
}

var (
	gatewayGK     = schema.GroupKind{Group: gatewayv1.GroupName, Kind: "Gateway"}
	istioPolicyGK = schema.GroupKind{Group: istiosecurityv1.SchemeGroupVersion.Group, Kind: "AuthorizationPolicy"}
	configMapGK   = schema.GroupKind{Kind: "ConfigMap"}
)

// gatewayAPIVersion is every Gateway's apiVersion, formatted once.
var gatewayAPIVersion = gatewayv1.GroupVersion.String()

// Gateway is the namespace's waypoint, as istioctl waypoint generate writes it, plus the
// configured infrastructure labels and annotations and, when enabled, the seccomp patch reference.
func Gateway(cfg *config.Config, namespace string) *gatewayv1.Gateway {
	w := cfg.Mesh.Waypoint
	// The Gateway and its one listener in one allocation.
	parts := &struct {
		gw        gatewayv1.Gateway
		listeners [1]gatewayv1.Listener
	}{listeners: [1]gatewayv1.Listener{{Name: listenerName, Port: listenerPort, Protocol: listenerProtocol}}}
	gw := &parts.gw
	gw.TypeMeta = metav1.TypeMeta{APIVersion: gatewayAPIVersion, Kind: "Gateway"}
	gw.ObjectMeta = metav1.ObjectMeta{Name: w.Name, Namespace: namespace, Labels: map[string]string{label.IoIstioWaypointFor.Name: w.For}}
	gw.Spec = gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(w.ClassName), Listeners: parts.listeners[:]}
	if cfg.Mesh.Revision != "" {
		gw.Labels[label.IoIstioRev.Name] = cfg.Mesh.Revision
	}
	infra := &gatewayv1.GatewayInfrastructure{}
	for k, v := range w.Labels {
		if infra.Labels == nil {
			infra.Labels = map[gatewayv1.LabelKey]gatewayv1.LabelValue{}
		}
		infra.Labels[gatewayv1.LabelKey(k)] = gatewayv1.LabelValue(v)
	}
	for k, v := range w.Annotations {
		if infra.Annotations == nil {
			infra.Annotations = map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{}
		}
		infra.Annotations[gatewayv1.AnnotationKey(k)] = gatewayv1.AnnotationValue(v)
	}
	if *w.SeccompPatch {
		infra.ParametersRef = &gatewayv1.LocalParametersReference{Group: "", Kind: "ConfigMap", Name: w.Name + SeccompPatchSuffix}
	}
	if infra.Labels != nil || infra.Annotations != nil || infra.ParametersRef != nil {
		gw.Spec.Infrastructure = infra
	}
	return gw
}

// SeccompConfigMap is the customization istiod merges into the waypoint Deployment.
func SeccompConfigMap(cfg *config.Config, namespace string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Mesh.Waypoint.Name + SeccompPatchSuffix, Namespace: namespace},
		Data:       map[string]string{deploymentOverlay: seccompPatch},
	}
}

// Ready reports whether the observed waypoint is the one wanted and istiod has programmed it: the
// Gateway exists, was made by this plugin, has the wanted class, reports Programmed=True for its
// current generation and has an address. Otherwise it says what is missing.
func Ready(obs plugin.Observed, want *gatewayv1.Gateway) (bool, string) {
	gw, ok := plugin.Lookup[*gatewayv1.Gateway](obs, want.Name)
	switch {
	case !ok:
		return false, "does not exist yet"
	case !plugin.IsManagedBy(gw.Labels, PluginName):
		return false, "exists but was not made by this plugin"
	case gw.Spec.GatewayClassName != want.Spec.GatewayClassName:
		return false, fmt.Sprintf("has class %q, not %q, and is being updated", gw.Spec.GatewayClassName, want.Spec.GatewayClassName)
	}
	c := meta.FindStatusCondition(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))
	switch {
	case c == nil:
		return false, "has no Programmed condition yet (is istiod running and does it own class " + string(want.Spec.GatewayClassName) + "?)"
	case c.Status != metav1.ConditionTrue:
		return false, fmt.Sprintf("is not Programmed (%s: %s)", c.Reason, c.Message)
	case c.ObservedGeneration != gw.Generation:
		return false, fmt.Sprintf("is Programmed for generation %d but its spec is at generation %d", c.ObservedGeneration, gw.Generation)
	case len(gw.Status.Addresses) == 0:
		return false, "is Programmed but has no address yet"
	}
	return true, ""
}

// DataPlaneLabels implements plugin.DataPlane: istio.io/dataplane-mode captures pods into ambient,
// where the ztunnel policy protects them.
func (p *Plugin) DataPlaneLabels() map[string][]plugin.Ref {
	return map[string][]plugin.Ref{
		label.IoIstioDataplaneMode.Name: {{GroupKind: istioPolicyGK, Name: p.cfg.Authorization.ZtunnelPolicyName}},
	}
}

// Captured implements plugin.DataPlane: with dataplane-mode=ambient, the running pods ztunnel
// captures. Istio's CNI agent leaves out pods that carry the injector's sidecar.istio.io/status
// annotation (they have their own proxy), pods labelled dataplane-mode=none and host-network pods
// (istio/istio cni/pkg/util/podutil.go, PodRedirectionEnabled and podHasSidecar); pods that are
// terminating or finished serve nothing and are not waited for.
func (p *Plugin) Captured(key, value string, pods []corev1.Pod) []string {
	if key != label.IoIstioDataplaneMode.Name || value != ambientMode {
		return nil
	}
	var names []string
	for _, pod := range pods {
		switch {
		case pod.DeletionTimestamp != nil, pod.Status.Phase == corev1.PodSucceeded, pod.Status.Phase == corev1.PodFailed:
		case pod.Spec.HostNetwork, pod.Labels[label.IoIstioDataplaneMode.Name] == noneMode:
		case hasSidecarStatus(pod):
		default:
			names = append(names, pod.Name)
		}
	}
	sort.Strings(names)
	return names
}

// optedOut names the running pods that Istio's CNI agent leaves out of ambient although they have
// no proxy of their own: labelled dataplane-mode=none, or carrying the injector's status annotation
// without an istio-proxy container (istio/istio cni/pkg/util/podutil.go, PodRedirectionEnabled
// and podHasSidecar). Namespace editors can set both on their pods. The waypoint's own pods run
// with dataplane-mode=none by design (IsWaypointPod).
func optedOut(pods []corev1.Pod, waypoint string) []string {
	var names []string
	for _, pod := range pods {
		switch {
		case pod.DeletionTimestamp != nil, pod.Status.Phase == corev1.PodSucceeded, pod.Status.Phase == corev1.PodFailed, pod.Spec.HostNetwork:
		case IsWaypointPod(pod, waypoint):
		case pod.Labels[label.IoIstioDataplaneMode.Name] == noneMode, hasSidecarStatus(pod) && !runsSidecar(pod):
			names = append(names, pod.Name)
		}
	}
	sort.Strings(names)
	return names
}

// ambientMode and noneMode are the values of istio.io/dataplane-mode that Istio's CNI agent reads.
const (
	ambientMode = "ambient"
	noneMode    = "none"
)

// hasSidecarStatus is Istio's own test for an injected pod: the injector's status annotation.
func hasSidecarStatus(pod corev1.Pod) bool {
	_, ok := pod.Annotations[annotation.SidecarStatus.Name]
	return ok
}

// IsWaypointPod says whether pod is one of the namespace's waypoint as istiod renders it for class
// istio-waypoint: labelled with the Gateway's name and gateway.istio.io/managed, running as the
// service account istiod names like the Gateway (istio/istio
// manifests/charts/istio-control/istio-discovery/files/waypoint.yaml). Namespace editors can give
// their own pods all three, so it may only spare a pod a warning or a finding, never decide
// anything that protects.
func IsWaypointPod(pod corev1.Pod, waypoint string) bool {
	_, managed := pod.Labels[label.GatewayManaged.Name]
	return managed && pod.Labels[label.IoK8sNetworkingGatewayGatewayName.Name] == waypoint && pod.Spec.ServiceAccountName == waypoint
}

// restartable names the running pods that still run a sidecar, for the warning to restart them:
// the waypoint's own pods run Istio's proxy in a container named istio-proxy too, but are no
// sidecar pods and nothing to restart.
func restartable(pods []corev1.Pod, waypoint string) []string {
	return podsWithSidecar(slices.DeleteFunc(slices.Clone(pods), func(p corev1.Pod) bool { return IsWaypointPod(p, waypoint) }))
}

// podsWithSidecar names the running pods that run Istio's proxy as a container or a native
// sidecar; pods that are terminating or finished serve nothing.
func podsWithSidecar(pods []corev1.Pod) []string {
	var names []string
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if runsSidecar(pod) {
			names = append(names, pod.Name)
		}
	}
	sort.Strings(names)
	return names
}

func runsSidecar(pod corev1.Pod) bool {
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name == SidecarContainer {
			return true
		}
	}
	return false
}

// ProtectedPods implements plugin.PodProtector: an owner policy without targetRefs (sidecar form)
// is what protects the pods that run a sidecar (sidecars ignore policies with targetRefs), so it
// stays while they run, whatever the mode: after a switch to mode none and on Revoke. The
// waypoint's own pods count too (see IsWaypointPod): a member could give a sidecar pod their marks,
// and counting them only delays the policy's removal until the waypoint's pods are gone.
func (p *Plugin) ProtectedPods(obs plugin.Observed) map[plugin.Ref][]string {
	owner, ok := plugin.Lookup[*istiosecurityv1.AuthorizationPolicy](obs, p.cfg.Authorization.OwnerPolicyName)
	if !ok || len(owner.Spec.TargetRefs) > 0 || owner.Spec.Selector != nil {
		return nil
	}
	pods := podsWithSidecar(obs.Pods)
	if len(pods) == 0 {
		return nil
	}
	return map[plugin.Ref][]string{{GroupKind: istioPolicyGK, Name: owner.Name}: pods}
}
