package safety

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The evaluator reads raw objects from the fake API server and judges them against specs written
// out below from the documented defaults. It shares no code with the runner or the plugins: a bug
// they share cannot hide itself.

// Owners the Profile can name. Only the first two may ever reach a policy: a trailing space breaks
// the header comparison, and a value starting or ending with '*' is a wildcard in Istio's header
// matcher (pilot/pkg/security/authz/matcher), which would admit every authenticated user.
var (
	validOwners   = []string{"alice@example.com", "carol@example.com"}
	invalidOwners = []string{"alice@example.com ", "*", "*@example.com"}
)

// podInfo is what the evaluator needs to know about a pod.
type podInfo struct {
	name    string
	sidecar bool
	// strictest is the strictest Pod Security level that admits the pod.
	strictest int
}

// snapshot is the user namespace as the evaluator sees it, read past the runner's client.
type snapshot struct {
	labels      map[string]string
	labelOwners map[string][]string // field managers per label key, from managedFields
	policies    map[string]*istiosecurityv1.AuthorizationPolicy
	gateways    map[string]*gatewayv1.Gateway
	configMaps  map[string]*corev1.ConfigMap
	pods        []podInfo
	// versions maps "Kind/namespace/name" of everything the runner has no business writing
	// (pods, the other namespace, foreign objects) to its resourceVersion.
	versions map[string]string
	// handed names ("Kind/name") the objects revoke handed to the namespace's deletion (see
	// handedOver), judged as the runner's.
	handed map[string]bool
}

func (w *world) snap() snapshot {
	s := snapshot{
		policies: map[string]*istiosecurityv1.AuthorizationPolicy{}, gateways: map[string]*gatewayv1.Gateway{},
		configMaps: map[string]*corev1.ConfigMap{}, versions: map[string]string{},
	}
	ns := &corev1.Namespace{}
	w.must(w.store.Get(w.ctx, client.ObjectKey{Name: userNS}, ns))
	s.labels = maps.Clone(ns.Labels)
	if s.labels == nil {
		s.labels = map[string]string{}
	}
	s.labelOwners = labelOwners(ns.ManagedFields)

	aps := &istiosecurityv1.AuthorizationPolicyList{}
	w.must(w.store.List(w.ctx, aps, client.InNamespace(userNS)))
	for _, p := range aps.Items {
		p = s.handedOver(w, "AuthorizationPolicy", p).(*istiosecurityv1.AuthorizationPolicy)
		s.policies[p.Name] = p
		if !isManaged(p) {
			s.versions["AuthorizationPolicy/"+userNS+"/"+p.Name] = p.ResourceVersion
		}
	}
	gws := &gatewayv1.GatewayList{}
	w.must(w.store.List(w.ctx, gws, client.InNamespace(userNS)))
	for i := range gws.Items {
		g := s.handedOver(w, "Gateway", &gws.Items[i]).(*gatewayv1.Gateway)
		s.gateways[g.Name] = g
		if !isManaged(g) {
			s.versions["Gateway/"+userNS+"/"+g.Name] = g.ResourceVersion
		}
	}
	cms := &corev1.ConfigMapList{}
	w.must(w.store.List(w.ctx, cms, client.InNamespace(userNS)))
	for i := range cms.Items {
		c := s.handedOver(w, "ConfigMap", &cms.Items[i]).(*corev1.ConfigMap)
		s.configMaps[c.Name] = c
		if !isManaged(c) {
			s.versions["ConfigMap/"+userNS+"/"+c.Name] = c.ResourceVersion
		}
	}
	pods := &corev1.PodList{}
	w.must(w.store.List(w.ctx, pods, client.InNamespace(userNS)))
	for i := range pods.Items {
		p := &pods.Items[i]
		s.pods = append(s.pods, podInfo{name: p.Name, sidecar: hasSidecar(p), strictest: strictestAdmitting(p)})
		s.versions["Pod/"+userNS+"/"+p.Name] = p.ResourceVersion
	}
	other := &corev1.Namespace{}
	w.must(w.store.Get(w.ctx, client.ObjectKey{Name: otherNS}, other))
	s.versions["Namespace//"+otherNS] = other.ResourceVersion
	otherAPs := &istiosecurityv1.AuthorizationPolicyList{}
	w.must(w.store.List(w.ctx, otherAPs, client.InNamespace(otherNS)))
	for _, p := range otherAPs.Items {
		s.versions["AuthorizationPolicy/"+otherNS+"/"+p.Name] = p.ResourceVersion
	}
	return s
}

// labelOwners reads, from managedFields, which field managers own each label.
func labelOwners(entries []metav1.ManagedFieldsEntry) map[string][]string {
	out := map[string][]string{}
	for _, e := range entries {
		if e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		var f struct {
			Metadata struct {
				Labels map[string]any `json:"f:labels"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &f) != nil {
			continue
		}
		for k := range f.Metadata.Labels {
			if key, ok := strings.CutPrefix(k, "f:"); ok && !slices.Contains(out[key], e.Manager) {
				out[key] = append(out[key], e.Manager)
			}
		}
	}
	return out
}

// runnerOwns: one of the runner's field managers owns the label.
func (s snapshot) runnerOwns(key string) bool {
	return slices.ContainsFunc(s.labelOwners[key], isRunnerManager)
}

func isRunnerManager(m string) bool { return m == labelManager || strings.HasPrefix(m, runnerManagers) }

// onlyRunnerOwns: the runner's field managers are the label's only owners.
func (s snapshot) onlyRunnerOwns(key string) bool {
	owners := s.labelOwners[key]
	if len(owners) == 0 {
		return false
	}
	return !slices.ContainsFunc(owners, func(m string) bool { return !isRunnerManager(m) })
}

// isManaged: the object is the runner's. Its managed-by label only claims it: anyone who may create
// objects in the namespace can copy labels. What proves it is its controller owner reference: the
// Profile (kind Profile of group kubeflow.org, any version) with the Profile's UID, which the
// runner sets on everything it writes (kubeflow.md: the profiles controller's objects are
// controlled by their Profile, and garbage collection deletes them with it).
func isManaged(o metav1.Object) bool {
	return o.GetLabels()[labelManagedBy] == managedByValue && profileControlled(o)
}

func managedByPlugin(o metav1.Object, plugin string) bool {
	return isManaged(o) && o.GetLabels()[labelPlugin] == plugin
}

// profileControlled: the object's controller is this Profile.
func profileControlled(o metav1.Object) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return ref.Kind == "Profile" && strings.HasPrefix(ref.APIVersion, "kubeflow.org/") && ref.UID == profileUID
		}
	}
	return false
}

// handedOver returns o as the evaluator judges it. Revoke hands the objects it keeps for pods
// still running to the namespace's deletion: it takes the Profile's owner reference (and the
// finalizer) off, so garbage collection leaves them to the namespace's ordered deletion. Such an
// object is still the runner's, and is judged with the Profile as its controller: once the
// Profile is being deleted, one with the managed labels, no owner at all, and a field manager of
// the runner among its writers. An editor's copy (made by another manager) stays an impostor.
// The runner leaves a handed-over object to the namespace's deletion, which in the real cluster
// follows the Profile's (the Profile controls the namespace; this world plays no namespace
// deletion), so revoke need not remove it once the pods are gone.
func (s *snapshot) handedOver(w *world, kind string, o client.Object) client.Object {
	if !w.revoked || o.GetLabels()[labelManagedBy] != managedByValue || len(o.GetOwnerReferences()) > 0 ||
		!slices.ContainsFunc(o.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return isRunnerManager(e.Manager) }) {
		return o
	}
	if s.handed == nil {
		s.handed = map[string]bool{}
	}
	s.handed[kind+"/"+o.GetName()] = true
	cp := o.DeepCopyObject().(client.Object)
	cp.SetOwnerReferences(controlledByThisProfile())
	return cp
}

// impostor: the object carries the managed-by label without being the runner's.
func impostor(o metav1.Object) bool {
	return o.GetLabels()[labelManagedBy] == managedByValue && !profileControlled(o)
}

func hasSidecar(p *corev1.Pod) bool {
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		if c.Name == sidecarName {
			return true
		}
	}
	return false
}

// strictestAdmitting classifies the three pod shapes the test makes (see newPod): a privileged
// container needs "privileged"; a hardened pod (RuntimeDefault seccomp, every container non-root,
// no privilege escalation, all capabilities dropped) passes "restricted"; anything else "baseline".
// TestPodShapesAgreeWithPodSecurity checks this against Pod Security's own evaluator.
func strictestAdmitting(p *corev1.Pod) int {
	hardened := p.Spec.SecurityContext != nil && p.Spec.SecurityContext.SeccompProfile != nil &&
		p.Spec.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		sc := c.SecurityContext
		if sc != nil && sc.Privileged != nil && *sc.Privileged {
			return privileged
		}
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			hardened = false
		}
	}
	if hardened {
		return restricted
	}
	return baseline
}

// covered: the pod is in a data plane. A sidecar takes precedence over ztunnel, so a pod with one
// is covered either way; one without is covered only while the namespace is enrolled in ambient.
func (s snapshot) covered(p podInfo) bool {
	return p.sidecar || s.labels[labelDataplane] == "ambient"
}

// enforceLevel is the namespace's enforce level as Pod Security reads it: none means privileged.
func (s snapshot) enforceLevel() (int, bool) {
	v, ok := s.labels[labelEnforce]
	if !ok {
		return privileged, false
	}
	return parseLevel(v), true
}

// The desired specs, written from the documented defaults (kubeflow.md, istio-ambient.md).
const (
	ingressPrincipal  = "cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account"
	pipelinesUI       = "cluster.local/ns/kubeflow/sa/ml-pipeline-ui"
	notebookPrincipal = "cluster.local/ns/kubeflow/sa/notebook-controller-service-account"
	katibPrincipal    = "cluster.local/ns/kubeflow/sa/katib-controller"
)

// wantZtunnel: a namespace-wide ALLOW (no selector, no targetRefs, so ztunnel enforces it) that
// admits only the waypoint's service account and the namespace itself.
func wantZtunnel() map[string]any {
	return fromJSON(fmt.Sprintf(`{"rules":[
		{"from":[{"source":{"serviceAccounts":["%[1]s/%[2]s"]}}]},
		{"from":[{"source":{"namespaces":["%[1]s"]}}]}]}`, userNS, waypointName))
}

// wantOwner: the profiles controller's owner policy; in ambient mode attached to the waypoint.
func wantOwner(owner string, ambient bool) map[string]any {
	target := ""
	if ambient {
		target = fmt.Sprintf(`,"targetRefs":[{"group":"gateway.networking.k8s.io","kind":"Gateway","name":%q}]`, waypointName)
	}
	return fromJSON(fmt.Sprintf(`{"rules":[
		{"from":[{"source":{"principals":[%q,%q]}}],"when":[{"key":"request.headers[kubeflow-userid]","values":[%q]}]},
		{"when":[{"key":"source.namespace","values":[%q]}]},
		{"to":[{"operation":{"paths":["/healthz","/metrics","/wait-for-drain"]}}]},
		{"from":[{"source":{"principals":[%q]}}],"to":[{"operation":{"methods":["GET"],"paths":["*/api/kernels"]}}]},
		{"from":[{"source":{"principals":[%q]}}]}]%s}`,
		ingressPrincipal, pipelinesUI, owner, userNS, notebookPrincipal, katibPrincipal, target))
}

// wantOwnerless: the owner policy without any user's rule, which stands in while the Profile's
// owner is refused (no user gets in; the namespace, health checks and platform callers do).
func wantOwnerless() map[string]any {
	m := wantOwner("", true)
	m["rules"] = m["rules"].([]any)[1:]
	return m
}

// wantGateway: what `istioctl waypoint generate` emits, plus the seccomp patch reference.
func wantGateway() map[string]any {
	return fromJSON(fmt.Sprintf(`{"gatewayClassName":"istio-waypoint",
		"listeners":[{"name":"mesh","port":15008,"protocol":"HBONE"}],
		"infrastructure":{"parametersRef":{"group":"","kind":"ConfigMap","name":%q}}}`, seccompCM))
}

// wantPatch: the per-namespace seccomp patch, a strategic merge patch of the waypoint Deployment
// under istiod's "deployment" key (istio-ambient.md, pod-security.md).
func wantPatch() map[string]string {
	return map[string]string{"deployment": "spec:\n  template:\n    spec:\n      securityContext:\n        seccompProfile:\n          type: RuntimeDefault\n"}
}

// formatOwners lists owner references as Kind/name(uid), the controller marked with a star.
func formatOwners(refs []metav1.OwnerReference) string {
	parts := make([]string, len(refs))
	for i, r := range refs {
		parts[i] = fmt.Sprintf("%s/%s(%s)", r.Kind, r.Name, r.UID)
		if r.Controller != nil && *r.Controller {
			parts[i] += "*"
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func fromJSON(s string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		panic(err)
	}
	return m
}

// toJSONMap is v's JSON form; Istio's specs marshal through their own MarshalJSON.
func toJSONMap(v any) map[string]any {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		panic(err)
	}
	return m
}

func compact(m map[string]any) string {
	data, _ := json.Marshal(m)
	return string(data)
}

// Istio's own metadata. istiod reads labels and annotations of its domain (a key whose prefix is
// istio.io or ends in .istio.io) on the objects it consumes: istio.io/rev on a policy that is not
// istiod's revision makes istiod ignore it, istio.io/dry-run "true" makes it shadow-only, and
// istiod copies a waypoint Gateway's metadata onto the waypoint's pods (sidecar.istio.io/*,
// proxy.istio.io/config, ...). The library documents what it puts there: istio.io/dry-run "false"
// on each policy and istio.io/waypoint-for "service" on the waypoint, no revision in this world.
// An object that carries any other key of the domain, or another value, may be switched off or
// rebuilt by it, so it does not protect. A documented key that is missing means Istio's default,
// which is the same (enforced; service traffic).
var (
	policyIstioLabels      = map[string]string{}
	policyIstioAnnotations = map[string]string{"istio.io/dry-run": "false"}
	gatewayIstioLabels     = map[string]string{"istio.io/waypoint-for": "service"}
	gatewayIstioAnnotation = map[string]string{}
)

func istioDomain(key string) bool {
	i := strings.Index(key, "/")
	if i < 0 {
		return false
	}
	prefix := key[:i]
	return prefix == "istio.io" || strings.HasSuffix(prefix, ".istio.io")
}

// foreignIstioMetadata lists the Istio-domain labels and annotations that differ from the
// documented ones ("" when none).
func foreignIstioMetadata(labels, annotations, wantLabels, wantAnnotations map[string]string) string {
	var out []string
	for _, kind := range []struct {
		name       string
		have, want map[string]string
	}{{"label", labels, wantLabels}, {"annotation", annotations, wantAnnotations}} {
		for _, k := range slices.Sorted(maps.Keys(kind.have)) {
			if want, documented := kind.want[k]; istioDomain(k) && (!documented || want != kind.have[k]) {
				out = append(out, fmt.Sprintf("%s %s=%q", kind.name, k, kind.have[k]))
			}
		}
	}
	return strings.Join(out, ", ")
}

// policyProblem says why the policy is not the intact, managed one wanted ("" when it is).
// Intact is about meaning: the action must be ALLOW (written or left to its default), everything
// else (selector, targetRefs, provider, rules) exactly as wanted, and no Istio metadata but the
// documented one.
func policyProblem(p *istiosecurityv1.AuthorizationPolicy, plugin string, wants ...map[string]any) string {
	if p == nil {
		return "missing"
	}
	if !managedByPlugin(p, plugin) {
		return fmt.Sprintf("not managed by plugin %s (labels %s, owners %s)", plugin, formatLabels(p.Labels), formatOwners(p.OwnerReferences))
	}
	if f := foreignIstioMetadata(p.Labels, p.Annotations, policyIstioLabels, policyIstioAnnotations); f != "" {
		return "marked with Istio metadata istiod reads: " + f
	}
	got := toJSONMap(&p.Spec)
	if got["action"] == "ALLOW" {
		delete(got, "action")
	}
	for _, want := range wants {
		if reflect.DeepEqual(got, want) {
			return ""
		}
	}
	return fmt.Sprintf("spec is %s, want %s", compact(got), compact(wants[0]))
}

func (s snapshot) ztunnelProblem() string {
	return policyProblem(s.policies[ztunnelPolicy], "authz", wantZtunnel())
}

// ownerProblem: the owner policy is intact for one of owners and attached to the waypoint.
func (s snapshot) ownerProblem(owners []string) string {
	var wants []map[string]any
	for _, o := range owners {
		wants = append(wants, wantOwner(o, true))
		if o == "" {
			wants[len(wants)-1] = wantOwnerless()
		}
	}
	return policyProblem(s.policies[ownerPolicy], "authz", wants...)
}

// waypointProblem: the waypoint is the managed, intact Gateway (its spec and its Istio metadata as
// documented) and istiod reports it Programmed for its current generation with an address
// (istio-ambient.md, "Readiness").
func (s snapshot) waypointProblem(name string) string {
	if p := s.waypointProtectionProblem(name); p != "" {
		return p
	}
	return programmedProblem(s.gateways[name])
}

// waypointProtectionProblem is waypointProblem without the Programmed condition: whether the
// waypoint is the runner's, unmarked, as specified, and patched by nothing but the runner's own
// seccomp patch.
func (s snapshot) waypointProtectionProblem(name string) string {
	g := s.gateways[name]
	switch {
	case g == nil:
		return "waypoint " + name + " missing"
	case !managedByPlugin(g, "waypoint"):
		return fmt.Sprintf("waypoint %s not managed by plugin waypoint (labels %s, owners %s)", name, formatLabels(g.Labels), formatOwners(g.OwnerReferences))
	}
	if f := foreignIstioMetadata(g.Labels, g.Annotations, gatewayIstioLabels, gatewayIstioAnnotation); f != "" {
		return fmt.Sprintf("waypoint %s marked with Istio metadata istiod reads: %s", name, f)
	}
	// istiod builds the waypoint Deployment from its defaults, patched by the ConfigMap the
	// Gateway's parametersRef names, if any: the Gateway names none, or the runner's own intact
	// seccomp patch and nothing else, so nobody else's ConfigMap shapes the pod traffic goes
	// through. (Which of the two the runner wants is liveness, see F-LIVE and patchProblem; the
	// waypoint plugin's package doc gives the same reason for routing only through the patched one
	// while mesh.waypoint.seccompPatch is on.)
	got, want := toJSONMap(&g.Spec), wantGateway()
	_, patched := got["infrastructure"]
	if !patched {
		delete(want, "infrastructure")
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("waypoint %s spec is %s, want %s", name, compact(got), compact(want))
	}
	if p := s.patchProblem(); patched && p != "" {
		return p
	}
	return ""
}

// programmedProblem says why istiod has not programmed the Gateway's current generation with an
// address ("" when it has).
func programmedProblem(g *gatewayv1.Gateway) string {
	name := g.Name
	for _, c := range g.Status.Conditions {
		if c.Type == "Programmed" {
			if c.Status != metav1.ConditionTrue || c.ObservedGeneration != g.Generation || len(g.Status.Addresses) == 0 {
				return fmt.Sprintf("waypoint %s not Programmed (status %s, observedGeneration %d of %d, %d address(es))",
					name, c.Status, c.ObservedGeneration, g.Generation, len(g.Status.Addresses))
			}
			return ""
		}
	}
	return "waypoint " + name + " has no Programmed condition"
}

// patchProblem says why the seccomp ConfigMap is not the runner's own, intact patch ("" when it is).
func (s snapshot) patchProblem() string {
	switch c := s.configMaps[seccompCM]; {
	case c == nil:
		return "seccomp ConfigMap " + seccompCM + " missing"
	case !managedByPlugin(c, "waypoint"):
		return fmt.Sprintf("seccomp ConfigMap %s not managed by plugin waypoint (labels %s, owners %s)", seccompCM, formatLabels(c.Labels), formatOwners(c.OwnerReferences))
	case !reflect.DeepEqual(c.Data, wantPatch()) || len(c.BinaryData) > 0:
		return fmt.Sprintf("seccomp ConfigMap %s holds %v, want %v", seccompCM, c.Data, wantPatch())
	}
	return ""
}

// wildcardIdentities lists header values in the managed policies that Istio would treat as a
// wildcard (leading or trailing '*') or that are empty.
func (s snapshot) wildcardIdentities() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(s.policies)) {
		p := s.policies[name]
		if !managedByPlugin(p, "authz") {
			continue
		}
		for _, r := range p.Spec.Rules {
			for _, c := range r.When {
				if !strings.HasPrefix(c.Key, "request.headers[") {
					continue
				}
				for _, v := range append(slices.Clone(c.Values), c.NotValues...) {
					if v == "" || strings.HasPrefix(v, "*") || strings.HasSuffix(v, "*") {
						out = append(out, fmt.Sprintf("%s: %s %q", name, c.Key, v))
					}
				}
			}
		}
	}
	return out
}
