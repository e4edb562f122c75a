package platform

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"istio.io/api/annotation"
	"istio.io/api/label"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// FindingKind says what a platform finding is about; controllers count findings by kind.
type FindingKind string

const (
	// FindingDataPlaneMismatch: a platform caller runs on another data plane than configured.
	FindingDataPlaneMismatch FindingKind = "DataPlaneMismatch"
	// FindingCallerNotInMesh: a platform caller's pods are in no mesh, so they carry no identity.
	FindingCallerNotInMesh FindingKind = "CallerNotInMesh"
	// FindingCallerNamespaceMissing: the namespace of a platform caller's principal does not exist.
	FindingCallerNamespaceMissing FindingKind = "CallerNamespaceMissing"
	// FindingIngressGatewayMissing: no pod runs as the configured ingress gateway principal.
	FindingIngressGatewayMissing FindingKind = "IngressGatewayMissing"
	// FindingWaypointCannotStart: istiod cannot make waypoint pods that the cluster admits.
	FindingWaypointCannotStart FindingKind = "WaypointCannotStart"
	// FindingWaypointCannotStartIfRestricted is the lower-severity form of WaypointCannotStart:
	// the configured enforce level admits the waypoint's pods, but a namespace whose Profile
	// chooses "restricted" (always allowed) would refuse them and wait forever.
	FindingWaypointCannotStartIfRestricted FindingKind = "WaypointCannotStartIfRestricted"
	// FindingTrustedNamespaceUserControlled: the namespace of a principal every user namespace
	// trusts (a platform caller, the ingress gateway, an L4 exception) is a user's: a Profile
	// controls it, it carries the owner annotation of one, or the plugins have labelled it.
	FindingTrustedNamespaceUserControlled FindingKind = "TrustedNamespaceUserControlled"
	// FindingIPBlockCoversForwarder: an L4 exception's ipBlocks entry holds a pod IP of the
	// ingress gateway or of an onBehalfOfUser platform caller, which then reaches user pods
	// without the user-id check.
	FindingIPBlockCoversForwarder FindingKind = "IPBlockCoversForwarder"
)

// FindingKinds returns every kind, so that a metric can report zero for the absent ones.
func FindingKinds() []FindingKind {
	return []FindingKind{FindingDataPlaneMismatch, FindingCallerNotInMesh, FindingCallerNamespaceMissing,
		FindingIngressGatewayMissing, FindingWaypointCannotStart, FindingWaypointCannotStartIfRestricted,
		FindingTrustedNamespaceUserControlled, FindingIPBlockCoversForwarder}
}

// What names the ingress gateway, the waypoint and an L4 exception in a Finding
// (callers go by their name).
const (
	WhatIngressGateway = "ingress-gateway"
	WhatWaypoint       = "waypoint"
	WhatL4Exception    = "l4-exception"
)

// Finding is one thing about the platform that breaks user namespaces, and its fix.
type Finding struct {
	Kind FindingKind `json:"kind"`
	// What is the platform caller's name, WhatIngressGateway or WhatWaypoint.
	What string `json:"what"`
	// Namespace is where the subject lives: the caller's or the gateway's namespace, or istiod's
	// for the waypoint's class defaults.
	Namespace string `json:"namespace"`
	// Principal is the caller's or the gateway's SPIFFE principal, when there is one.
	Principal string `json:"principal,omitempty"`
	// ConfigMap names the class-defaults ConfigMap (in Namespace) the finding is about, if any.
	ConfigMap string `json:"configMap,omitempty"`
	Problem   string `json:"problem"`
	Fix       string `json:"fix"`
}

// Subject says what the finding is about, in words.
func (f Finding) Subject() string {
	parts := []string{"namespace " + f.Namespace}
	if f.Principal != "" {
		parts = append(parts, "principal "+f.Principal)
	}
	if f.ConfigMap != "" {
		parts = append(parts, "ConfigMap "+f.ConfigMap)
	}
	return strings.Join(parts, ", ")
}

// String is the finding on one line, for a log or an event.
func (f Finding) String() string {
	return fmt.Sprintf("%s: %s (%s): %s; fix: %s", f.Kind, f.What, f.Subject(), f.Problem, f.Fix)
}

// Report is what Check found; no findings means nothing it checks is broken.
type Report struct {
	Findings []Finding `json:"findings"`
}

// String is the report, one finding a line.
func (r Report) String() string {
	if len(r.Findings) == 0 {
		return "platform check: no findings"
	}
	lines := []string{fmt.Sprintf("platform check: %d finding(s)", len(r.Findings))}
	for _, f := range r.Findings {
		lines = append(lines, "  "+f.String())
	}
	return strings.Join(lines, "\n")
}

// Check reads the cluster through r and reports what keeps the plugins' output from
// working, or from keeping user namespaces private, in the namespaces around them:
//
//   - each platform caller (authorization.platformCallers) whose pods run on another data plane
//     than its dataPlane says, or on none, or whose namespace does not exist;
//   - an ingress gateway principal that no pod runs as;
//   - the namespace of a platform caller, of the ingress gateway or of an L4 exception (by
//     namespace, principal or service account) that is a user's: a Profile controls it, it has the
//     Profile's "owner" annotation (when namespaces.ownership accepts that), or the plugins have
//     written its labels. The runner refuses such a Profile (the namespace is reserved), but the
//     Profile's owner keeps the namespace and can run pods as the trusted principal;
//   - in ambient mode, an L4 exception's ipBlocks entry that holds a pod IP of the ingress gateway
//     or of an onBehalfOfUser caller, and waypoint pods that Pod Security or istiod would refuse
//     (under the configured enforce level, or under "restricted", which any Profile may choose).
//
// Nothing is checked in mode none. It only reads, and only in those namespaces: a Get of each
// Namespace, and Lists of Pods (with the field selector spec.serviceAccountName) and of ConfigMaps
// (with the class-defaults label). r should read the API server directly (a manager's
// APIReader): a cache would need an index on spec.serviceAccountName and would hold every Pod of
// the cluster.
func Check(ctx context.Context, r client.Reader, cfg *config.Config) (Report, error) {
	var report Report
	if cfg.Mesh.Mode == config.ModeNone {
		return report, nil
	}
	trusted, err := readTrusted(ctx, r, cfg)
	if err != nil {
		return report, err
	}
	for _, s := range trusted {
		report.Findings = append(report.Findings, judgeTrusted(cfg.Mesh.Mode, s)...)
	}
	exceptions, err := readExceptionNamespaces(ctx, r, cfg.Authorization.L4Exceptions)
	if err != nil {
		return report, err
	}
	// Reserved names do not matter here: reserving a namespace does not take it from its user.
	rule := ownership.Policy{RequireOwnerReference: cfg.Namespaces.Ownership == config.OwnershipReference}
	report.Findings = append(report.Findings, userControlled(rule, trusted, exceptions)...)
	if cfg.Mesh.Mode == config.ModeAmbient {
		report.Findings = append(report.Findings, ipBlocksCoveringForwarders(cfg.Authorization.L4Exceptions, trusted)...)
		f, err := checkWaypoint(ctx, r, cfg)
		if err != nil {
			return report, err
		}
		report.Findings = append(report.Findings, f...)
	}
	return report, nil
}

// trustedPrincipal is a principal every user namespace admits (a platform caller or the ingress
// gateway), with what the cluster has of it.
type trustedPrincipal struct {
	// caller is nil for the ingress gateway.
	caller    *config.PlatformCaller
	path      string // the field path of the principal
	principal string
	namespace string
	sa        string
	// ns is nil when the namespace does not exist; pods are the live ones running as sa.
	ns   *corev1.Namespace
	pods []corev1.Pod
}

// what names the principal in a finding.
func (t trustedPrincipal) what() string {
	if t.caller == nil {
		return WhatIngressGateway
	}
	return t.caller.Name
}

// forwardsForUsers says whether the principal sends requests on behalf of any user, which the
// policies admit only with the user-id header, checked at the waypoint.
func (t trustedPrincipal) forwardsForUsers() bool { return t.caller == nil || t.caller.OnBehalfOfUser }

// readTrusted reads every platform caller's and then the ingress gateway's namespace and pods.
func readTrusted(ctx context.Context, r client.Reader, cfg *config.Config) ([]trustedPrincipal, error) {
	var out []trustedPrincipal
	for i := range cfg.Authorization.PlatformCallers {
		caller := &cfg.Authorization.PlatformCallers[i]
		t, err := readPrincipal(ctx, r, "platform caller "+caller.Name, fmt.Sprintf("authorization.platformCallers[%d].principal", i), caller.Principal)
		if err != nil {
			return nil, err
		}
		t.caller = caller
		out = append(out, t)
	}
	t, err := readPrincipal(ctx, r, "ingress gateway", "authorization.principals.ingressGateway", cfg.Authorization.Principals.IngressGateway)
	if err != nil {
		return nil, err
	}
	return append(out, t), nil
}

// readPrincipal reads the namespace and pods of principal; a malformed principal is an error
// that names path, a read error is wrapped with who names the principal.
func readPrincipal(ctx context.Context, r client.Reader, who, path, principal string) (trustedPrincipal, error) {
	t := trustedPrincipal{path: path, principal: principal}
	_, namespace, sa, err := config.ParsePrincipal(principal)
	if err != nil {
		return t, fmt.Errorf("%s %w", path, err)
	}
	t.namespace, t.sa = namespace, sa
	if t.ns, t.pods, err = serviceAccountPods(ctx, r, namespace, sa); err != nil {
		return t, fmt.Errorf("%s (%s): %w", who, path, err)
	}
	return t, nil
}

// judgeTrusted gives the findings about one caller's or the ingress gateway's own pods.
func judgeTrusted(mode config.MeshMode, t trustedPrincipal) []Finding {
	if t.caller == nil {
		return judgeIngressGateway(t)
	}
	base := Finding{What: t.caller.Name, Namespace: t.namespace, Principal: t.principal}
	if t.ns == nil {
		f := base
		f.Kind = FindingCallerNamespaceMissing
		f.Problem = fmt.Sprintf("namespace %s does not exist: the caller is not installed, or its principal names the wrong namespace, so the owner policy's rule for it never matches", t.namespace)
		f.Fix = fmt.Sprintf("correct %s, or remove the caller from authorization.platformCallers if it is not installed", t.path)
		return []Finding{f}
	}
	var out []Finding
	for _, o := range observePlanes(t.ns, t.pods, t.sa) {
		if f, ok := judgeCaller(base, mode, *t.caller, o); ok {
			out = append(out, f)
		}
	}
	return out
}

// dataPlane is what the cluster runs for a pod or, without pods, what a namespace's labels ask for.
type dataPlane string

const (
	planeAmbient dataPlane = dataPlane(config.CallerAmbient)
	planeSidecar dataPlane = dataPlane(config.CallerSidecar)
	planeNone    dataPlane = "none"
)

// podDataPlane classifies a pod as the Istio CNI agent does: a pod with a sidecar is never
// captured by ztunnel (cni/pkg/util/podutil.go podHasSidecar, on sidecar.istio.io/status, called
// first by the enablement selector), and a captured pod carries ambient.istio.io/redirection:
// enabled, which istiod needs to send it HBONE (pilot/pkg/serviceregistry/ambient/workloads.go).
func podDataPlane(pod *corev1.Pod) dataPlane {
	switch {
	case pod.Annotations[annotation.SidecarStatus.Name] != "":
		return planeSidecar
	case pod.Annotations[annotation.AmbientRedirection.Name] == "enabled":
		return planeAmbient
	}
	return planeNone
}

// namespaceDataPlane is what a namespace's labels ask for. Injection wins over ambient because
// a pod with a sidecar is never captured by ztunnel (see podDataPlane).
func namespaceDataPlane(ns *corev1.Namespace) dataPlane {
	injection := ns.Labels[waypoint.InjectionLabel]
	switch {
	case injection == "enabled", injection != "disabled" && ns.Labels[label.IoIstioRev.Name] != "":
		return planeSidecar
	case ns.Labels[label.IoIstioDataplaneMode.Name] == "ambient":
		return planeAmbient
	}
	return planeNone
}

// serviceAccountPods reads the namespace and its live pods that run as sa; ns is nil when the
// namespace does not exist.
func serviceAccountPods(ctx context.Context, r client.Reader, namespace, sa string) (*corev1.Namespace, []corev1.Pod, error) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: namespace}, ns); apierrors.IsNotFound(err) {
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("reading Namespace %s: %w", namespace, err)
	}
	// The API server selects pods by spec.serviceAccountName (pkg/registry/core/pod/strategy.go,
	// ToSelectableFields), so only the caller's pods cross the wire.
	list := &corev1.PodList{}
	if err := r.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{"spec.serviceAccountName": sa}); err != nil {
		return nil, nil, fmt.Errorf("listing Pods of ServiceAccount %s in namespace %s: %w", sa, namespace, err)
	}
	live := slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	return ns, live, nil
}

// observation is one data plane a caller runs on, and where that was seen.
type observation struct {
	plane dataPlane
	// evidence says which pods (or that the namespace's labels) show it.
	evidence string
}

// observePlanes groups the pods by data plane, in a fixed order; without pods it reads the
// namespace's labels, and says so.
func observePlanes(ns *corev1.Namespace, pods []corev1.Pod, sa string) []observation {
	if len(pods) == 0 {
		return []observation{{plane: namespaceDataPlane(ns),
			evidence: fmt.Sprintf("no pod runs as ServiceAccount %s, so this is read from the labels of namespace %s", sa, ns.Name)}}
	}
	byPlane := map[dataPlane][]string{}
	for i := range pods {
		p := podDataPlane(&pods[i])
		byPlane[p] = append(byPlane[p], pods[i].Name)
	}
	var out []observation
	for _, p := range []dataPlane{planeAmbient, planeSidecar, planeNone} {
		names := byPlane[p]
		if len(names) == 0 {
			continue
		}
		slices.Sort(names)
		out = append(out, observation{plane: p, evidence: fmt.Sprintf("%d of %d pod(s), e.g. %s", len(names), len(pods), names[0])})
	}
	return out
}

// judgeCaller decides whether one observed data plane of a caller is a finding. The configured
// data plane matters only in ambient mode: with sidecars in the user namespaces, the owner
// policy runs in each pod's sidecar and sees the caller's identity from either data plane.
func judgeCaller(f Finding, mode config.MeshMode, caller config.PlatformCaller, o observation) (Finding, bool) {
	configured := dataPlane(caller.DataPlane)
	if configured == "" {
		configured = planeAmbient
	}
	switch {
	case o.plane == planeNone:
		f.Kind = FindingCallerNotInMesh
		f.Problem = fmt.Sprintf("runs outside the mesh (%s): its calls carry no identity, so every user namespace denies them", o.evidence)
		f.Fix = fmt.Sprintf("enrol namespace %s: label it %s=ambient (dataPlane: ambient) or %s=enabled (dataPlane: sidecar), then restart the caller's pods",
			f.Namespace, label.IoIstioDataplaneMode.Name, waypoint.InjectionLabel)
	case mode != config.ModeAmbient || o.plane == configured:
		return f, false
	case o.plane == planeSidecar:
		// Sidecars never send through a waypoint (pilot/pkg/xds/endpoints/endpoint_builder.go,
		// findServiceWaypoint is for gateways only): their calls reach the pod's ztunnel directly.
		f.Kind = FindingDataPlaneMismatch
		f.Problem = fmt.Sprintf("configured dataPlane ambient, but runs with a sidecar (%s): its calls skip the waypoint, and the ztunnel policy denies them", o.evidence)
		f.Fix = fmt.Sprintf("set dataPlane: sidecar for %s (the ztunnel policy then admits it at L4, without its L7 limits), or move namespace %s to ambient and restart the caller's pods",
			caller.Name, f.Namespace)
	default:
		f.Kind = FindingDataPlaneMismatch
		f.Problem = fmt.Sprintf("configured dataPlane sidecar, but runs in ambient (%s): the ztunnel policy admits it to every port and path of every pod, more than its rule at the waypoint allows", o.evidence)
		f.Fix = fmt.Sprintf("set dataPlane: ambient for %s", caller.Name)
	}
	return f, true
}

func judgeIngressGateway(t trustedPrincipal) []Finding {
	if t.ns != nil && len(t.pods) > 0 {
		return nil
	}
	problem := fmt.Sprintf("namespace %s does not exist", t.namespace)
	if t.ns != nil {
		problem = fmt.Sprintf("no pod in namespace %s runs as ServiceAccount %s", t.namespace, t.sa)
	}
	return []Finding{{
		Kind: FindingIngressGatewayMissing, What: WhatIngressGateway, Namespace: t.namespace, Principal: t.principal,
		Problem: problem + ": the owner policy admits users only through this principal, so no user reaches their namespace",
		Fix:     fmt.Sprintf("set %s to the principal of the ingress gateway's pods (their namespace and ServiceAccount)", t.path),
	}}
}

// supportedOverlays are the keys istiod accepts in a class-defaults ConfigMap; any other key
// makes it refuse to render the class's Gateways (supportedOverlays in
// pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go, Istio 1.30).
var supportedOverlays = []string{"deployment", "service", "serviceAccount", "horizontalPodAutoscaler", "podDisruptionBudget"}

// checkWaypoint reads the waypoint class defaults that istiod applies: only those in its own
// namespace, and of several only the oldest (deploymentcontroller.go, render:
// controllers.OldestObject, by creation time, then name).
func checkWaypoint(ctx context.Context, r client.Reader, cfg *config.Config) ([]Finding, error) {
	namespace, class := cfg.Mesh.IstiodNamespace, cfg.Mesh.Waypoint.ClassName
	list := &corev1.ConfigMapList{}
	if err := r.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{waypoint.ClassDefaultsLabel: class}); err != nil {
		return nil, fmt.Errorf("listing the waypoint class defaults (ConfigMaps labelled %s=%s) in namespace %s (mesh.istiodNamespace): %w",
			waypoint.ClassDefaultsLabel, class, namespace, err)
	}
	var defaults *corev1.ConfigMap
	if len(list.Items) > 0 {
		oldest := slices.MinFunc(list.Items, olderFirst)
		defaults = &oldest
	}
	base := Finding{Kind: FindingWaypointCannotStart, What: WhatWaypoint, Namespace: namespace}
	if defaults != nil {
		base.ConfigMap = defaults.Name
		if f, bad := unsupportedKeys(base, defaults, class); bad {
			return []Finding{f}, nil
		}
	}
	if ptr.Deref(cfg.Mesh.Waypoint.SeccompPatch, false) || waypoint.SetsSeccompDefault(defaults) {
		return nil, nil
	}
	missing := fmt.Sprintf("mesh.waypoint.seccompPatch is off, and no ConfigMap in namespace %s is labelled %s=%s",
		namespace, waypoint.ClassDefaultsLabel, class)
	if defaults != nil {
		missing = "mesh.waypoint.seccompPatch is off, and the class defaults (the oldest labelled ConfigMap, the one istiod applies) " +
			"set no pod seccompProfile that restricted admits (or their deployment key does not parse)"
	}
	f := base
	f.Fix = fmt.Sprintf("apply the class-defaults ConfigMap that `render -cluster` emits into namespace %s, or set mesh.waypoint.seccompPatch: true", namespace)
	if level := cfg.PodSecurity.Enforce.Level; level != psaapi.LevelRestricted {
		// A Profile may always choose a stricter enforce level (pss), and a stricter level another
		// writer set is kept, so some namespace may be restricted whatever the configured level.
		f.Kind = FindingWaypointCannotStartIfRestricted
		f.Problem = fmt.Sprintf("enforce is %s, but any Profile may choose restricted (and a stricter enforce label set by another writer is kept), and %s: "+
			"in each such namespace Pod Security rejects the waypoint's pods, so it is never Programmed and the namespace waits for it forever", level, missing)
		return []Finding{f}, nil
	}
	f.Problem = "enforce is restricted, " + missing +
		": Pod Security rejects the waypoint's pods, so it is never Programmed and every user namespace waits for it forever"
	return []Finding{f}, nil
}

func olderFirst(a, b corev1.ConfigMap) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func unsupportedKeys(f Finding, cm *corev1.ConfigMap, class string) (Finding, bool) {
	var bad []string
	for k := range cm.Data {
		if !slices.Contains(supportedOverlays, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return f, false
	}
	slices.Sort(bad)
	f.Problem = fmt.Sprintf("the class defaults have key(s) %q, which istiod does not support, so it renders no waypoint of class %s", bad, class)
	f.Fix = fmt.Sprintf("keep only the keys %s in ConfigMap %s/%s", strings.Join(supportedOverlays, ", "), cm.Namespace, cm.Name)
	return f, true
}
