package guard

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"istio.io/api/annotation"
	"istio.io/api/label"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// The policies' names; each binding has its policy's name.
const (
	ManagedObjectsPolicy  = "profile-plugins-guard-managed-objects"
	NamespaceLabelsPolicy = "profile-plugins-guard-namespace-labels"
	PodsPolicy            = "profile-plugins-guard-pods"
	WorkloadsPolicy       = "profile-plugins-guard-workloads"
	CronJobsPolicy        = "profile-plugins-guard-cronjobs"
	ServicesPolicy        = "profile-plugins-guard-services"
	BindingsPolicy        = "profile-plugins-guard-bindings"
	KubeflowPolicy        = "profile-plugins-guard-kubeflow"
)

// Names are the names of every policy Objects renders, each also its binding's name.
func Names() []string {
	return []string{ManagedObjectsPolicy, NamespaceLabelsPolicy, WaypointPolicy, MeshConfigPolicy, PodsPolicy, WorkloadsPolicy, CronJobsPolicy, ServicesPolicy, BindingsPolicy, KubeflowPolicy, TokensPolicy}
}

// sidecarInject is Istio's per-pod injection switch, read as a label and as an annotation.
const sidecarInject = "sidecar.istio.io/inject"

// ask ends every message: what the tenant does about a refusal.
const ask = "; ask your platform admin"

// Objects are the guard's policies and bindings for cfg, policy first, each binding after its
// policy, each policy holding its checks from the registry ([Checks]). cfg must be defaulted and
// valid.
func Objects(cfg *config.Config) ([]client.Object, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	var out []client.Object
	for _, s := range (builder{cfg: cfg}).specs() {
		p := s.policy()
		out = append(out, p, Binding(p.Name))
	}
	return out, nil
}

// Binding binds the named policy to every namespace, denying: the policy itself decides which
// namespaces are managed (see the package doc), so that no label a namespace could carry narrows it.
func Binding(policy string) *admissionv1.ValidatingAdmissionPolicyBinding {
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: policy, Labels: map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue}},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
}

type builder struct{ cfg *config.Config }

// spec is a policy on rules with the common variables, judging every request but the trusted
// ones: managed says whether the request's namespace is managed, nsExpr being the Namespace
// object in CEL.
func (b builder) spec(name, nsExpr string, rules []admissionv1.NamedRuleWithOperations, vars ...admissionv1.Variable) policySpec {
	return policySpec{name: name, managed: b.managed(nsExpr), rules: rules, vars: vars, untrusted: "!(" + b.trusted() + ")"}
}

// policy is the spec as a ValidatingAdmissionPolicy, its checks in registry order.
func (s policySpec) policy() *admissionv1.ValidatingAdmissionPolicy {
	validations := make([]admissionv1.Validation, len(s.checks))
	for i, c := range s.checks {
		validations[i] = c.validation()
	}
	return &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Labels: map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue}},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: s.rules},
			MatchConditions: []admissionv1.MatchCondition{{
				Name:       "not-the-controller-break-glass-or-kubernetes",
				Expression: s.untrusted,
			}},
			Variables:   append([]admissionv1.Variable{{Name: "managed", Expression: s.managed}}, s.vars...),
			Validations: validations,
		},
	}
}

// trusted is whose requests the guard never refuses: the controller, the break-glass group,
// system:masters and Kubernetes' own controllers (but see pods).
func (b builder) trusted() string { return b.trustedUsers() + " || " + b.kubernetes() }

// trustedUsers are the controller, the break-glass group and system:masters (whom no authorizer
// refuses anything, the guard's deletion included).
func (b builder) trustedUsers() string {
	ns, name, _ := strings.Cut(b.cfg.Guard.ControllerServiceAccount, "/")
	return fmt.Sprintf("request.userInfo.username == %s || %s in request.userInfo.groups || 'system:masters' in request.userInfo.groups",
		quote(serviceAccountUser(ns, name)), quote(b.cfg.Guard.BreakGlassGroup))
}

// kubernetes are Kubernetes' own controllers: kube-controller-manager, under its own name or,
// with --use-service-account-credentials, as one ServiceAccount of kube-system per controller.
// They delete a terminating namespace's objects and garbage, and make the pods of workloads.
func (b builder) kubernetes() string {
	return "request.userInfo.username == 'system:kube-controller-manager' || request.userInfo.username.startsWith('system:serviceaccount:kube-system:')"
}

// managed is whether the Namespace n (a CEL expression) is managed: it carries the profiles
// controller's owner annotation and is not reserved. The annotation, not the controller
// reference: namespaceObject shows a namespaced request's Namespace with its labels and
// annotations only, and every namespace of a Profile carries it (the profiles controller writes
// it on the namespaces it makes; ownerReferenceOrAnnotation hands over exactly those that have it).
func (b builder) managed(n string) string {
	owned := fmt.Sprintf("has(%[1]s.metadata.annotations) && %[2]s in %[1]s.metadata.annotations && %[1]s.metadata.annotations[%[2]s] != ''",
		n, quote(ownership.OwnerAnnotation))
	reserved := append(ownership.AlwaysReserved(), b.cfg.ReservedNamespaces()...)
	slices.Sort(reserved)
	var not []string
	for _, r := range slices.Compact(reserved) {
		not = append(not, reservedExpr(n+".metadata.name", r))
	}
	return fmt.Sprintf("%s != null && %s && !(%s)", n, owned, strings.Join(not, " || "))
}

// reservedExpr matches a namespace name against a reserved name or shell pattern (path.Match).
func reservedExpr(name, pattern string) string {
	if !strings.ContainsAny(pattern, `*?[\`) {
		return name + " == " + quote(pattern)
	}
	return name + ".matches(" + quote(globRegexp(pattern)) + ")"
}

// globRegexp is the RE2 form of a path.Match pattern without '/'.
func globRegexp(pattern string) string {
	var sb strings.Builder
	sb.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*':
			sb.WriteString(".*")
		case '?':
			sb.WriteString(".")
		case '[':
			j := strings.IndexByte(pattern[i:], ']')
			if j < 0 {
				sb.WriteString(regexp.QuoteMeta(pattern[i:]))
				i = len(pattern)
				continue
			}
			class := pattern[i+1 : i+j]
			if strings.HasPrefix(class, "^") || strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			sb.WriteString("[" + class + "]")
			i += j
		case '\\':
			if i+1 < len(pattern) {
				i++
			}
			sb.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		default:
			sb.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	sb.WriteString("$")
	return sb.String()
}

// quote is s as a CEL string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func serviceAccountUser(ns, name string) string {
	return "system:serviceaccount:" + ns + ":" + name
}

// hasKey is whether the metadata m (a CEL expression) carries key in field (labels or
// annotations), with value if value is not "".
func hasKey(m, field, key, value string) string {
	e := fmt.Sprintf("(has(%[1]s.%[2]s) && %[3]s in %[1]s.%[2]s", m, field, quote(key))
	if value != "" {
		e += fmt.Sprintf(" && %s.%s[%s] == %s", m, field, quote(key), quote(value))
	}
	return e + ")"
}

// chk is a check of the registry, its policy and ID prefix set when a spec adds it.
func chk(id string, asset Asset, source, expr, message, messageExpr string) Check {
	return Check{ID: id, Asset: asset, Source: source, Expression: expr, Message: message, MessageExpression: messageExpr}
}

// authzPluginName is the authz plugin's value of plugin.PluginLabel (authz.PluginName, which the
// guard's tests compare; importing authz here would make its tests' fixtures import themselves).
const authzPluginName = "authz"

func rule(group, version string, resources []string, ops ...admissionv1.OperationType) admissionv1.NamedRuleWithOperations {
	return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: ops,
		Rule: admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: resources,
			Scope: ptr.To(admissionv1.NamespacedScope)},
	}}
}

// managedObjects refuses changes of the plugins' objects and copies of their labels or names.
func (b builder) managedObjects() policySpec {
	ours := func(o string) string {
		return fmt.Sprintf("(%[1]s != null && (%[2]s || %[3]s))", o,
			hasKey(o+".metadata", "labels", plugin.ManagedByLabel, plugin.ManagedByValue), hasKey(o+".metadata", "labels", plugin.PluginLabel, ""))
	}
	wp := b.cfg.Mesh.Waypoint.Name
	a := b.cfg.Authorization
	names := fmt.Sprintf("(request.kind.group == 'security.istio.io' && object.metadata.name == %s) || "+
		"(request.kind.group == 'gateway.networking.k8s.io' && object.metadata.name == %s) || "+
		"(request.kind.group == '' && object.metadata.name == %s)",
		quote(a.ZtunnelPolicyName), quote(wp), quote(wp+waypoint.SeccompPatchSuffix))
	// A contributor's policy only grants: deleting it takes access away from one contributor and
	// never opens the namespace (the owner policy stays, and it is an ALLOW policy on the same
	// target). kfam deletes it when the owner removes the contributor, also after the authz plugin
	// adopted it (kubeflow/dashboard components/access-management/kfam/bindings.go Delete); the
	// plugin writes it again while the contributor's RoleBinding stands.
	contributor := fmt.Sprintf("(request.operation == 'DELETE' && request.kind.group == 'security.istio.io' && %s && !(request.name in [%s, %s]))",
		hasKey("oldObject.metadata", "labels", plugin.PluginLabel, authzPluginName), quote(a.OwnerPolicyName), quote(a.ZtunnelPolicyName))
	what := "request.kind.kind + ' ' + request.namespace + '/' + request.name"
	ops := []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete}
	s := b.spec(ManagedObjectsPolicy, "namespaceObject", []admissionv1.NamedRuleWithOperations{
		rule("security.istio.io", "*", []string{"authorizationpolicies"}, ops...),
		rule("gateway.networking.k8s.io", "*", []string{"gateways"}, ops...),
		rule("", "v1", []string{"configmaps"}, ops...),
	}, admissionv1.Variable{
		// The namespace controller deletes everything of a namespace being deleted.
		Name: "leaving", Expression: "namespaceObject != null && has(namespaceObject.metadata.deletionTimestamp)",
	})
	s.add(Check{ID: "unchanged", Asset: AssetPluginObjects,
		Passes:            "the namespace controller in a namespace being deleted; anyone RBAC lets delete a contributor's policy (kfam)",
		Source:            "runner: only the controller writes what it manages; kfam/bindings.go Delete removes a contributor's policy",
		Expression:        "!variables.managed || variables.leaving || " + contributor + " || !" + ours("oldObject"),
		Message:           "this object is managed by profile-plugins: only its controller changes or deletes it" + ask,
		MessageExpression: what + " + ' is managed by profile-plugins: only its controller changes or deletes it, and it restores any other change" + ask + "'"})
	s.add(Check{ID: "labels", Asset: AssetPluginObjects,
		Source:            "runner/observe.go (disown): the managed-by and plugin labels mark the plugins' objects",
		Expression:        "!variables.managed || " + ours("oldObject") + " || !" + ours("object"),
		Message:           "the labels " + plugin.ManagedByLabel + " and " + plugin.PluginLabel + " are for the objects profile-plugins makes" + ask,
		MessageExpression: what + " + ': the labels " + plugin.ManagedByLabel + " and " + plugin.PluginLabel + " are for the objects profile-plugins makes; remove them" + ask + "'"})
	s.add(Check{ID: "reserved-names", Asset: AssetPluginObjects,
		Source:            "istiod adopts a Gateway's objects by name (deploymentcontroller.go); the runner's contested-create rule",
		Expression:        "!variables.managed || request.operation != 'CREATE' || !(" + names + ")",
		Message:           "this name is reserved for an object profile-plugins makes" + ask,
		MessageExpression: what + " + ': the name is reserved for an object profile-plugins makes in every managed namespace; choose another name" + ask + "'"})
	return s
}

// guardedLabels are the namespace labels only the controller changes: enrolment and mesh labels,
// and Pod Security's.
func guardedLabels() []string {
	return []string{label.IoIstioDataplaneMode.Name, label.IoIstioUseWaypoint.Name, label.IoIstioUseWaypointNamespace.Name,
		label.IoIstioIngressUseWaypoint.Name, label.IoIstioRev.Name, waypoint.InjectionLabel,
		psaapi.EnforceLevelLabel, psaapi.EnforceVersionLabel, psaapi.AuditLevelLabel, psaapi.AuditVersionLabel,
		psaapi.WarnLevelLabel, psaapi.WarnVersionLabel}
}

// namespaceLabels refuses changes of a managed namespace's guarded labels.
func (b builder) namespaceLabels() policySpec {
	var list []string
	for _, k := range guardedLabels() {
		list = append(list, quote(k))
	}
	keys := "[" + strings.Join(list, ", ") + "]"
	changed := "(has(oldObject.metadata.labels) && k in oldObject.metadata.labels) != (has(object.metadata.labels) && k in object.metadata.labels) || " +
		"(has(oldObject.metadata.labels) && k in oldObject.metadata.labels && has(object.metadata.labels) && k in object.metadata.labels && " +
		"oldObject.metadata.labels[k] != object.metadata.labels[k])"
	s := b.spec(NamespaceLabelsPolicy, "oldObject", []admissionv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Update},
			// The status and finalize subresources too: both keep the labels a request sends.
			Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces", "namespaces/status", "namespaces/finalize"},
				Scope: ptr.To(admissionv1.ClusterScope)},
		},
	}}, admissionv1.Variable{Name: "changed", Expression: keys + ".filter(k, " + changed + ")"})
	s.add(Check{ID: "labels", Asset: AssetNamespaceLabels,
		Source:     "istio pilot/pkg/serviceregistry/ambient (dataplane-mode, use-waypoint); k8s.io/pod-security-admission/api (the Pod Security labels)",
		Expression: "!variables.managed || size(variables.changed) == 0",
		Message:    "the mesh and Pod Security labels of this namespace are managed by profile-plugins" + ask,
		MessageExpression: "'namespace ' + object.metadata.name + ': the labels ' + variables.changed.join(', ') + ' are managed by profile-plugins, " +
			"which sets them from its PluginConfig and the Profile'" + " + '" + ask + "'"})
	// The owner annotation is what makes the namespace managed: without it every policy of the
	// guard would let the next change through.
	s.add(Check{ID: "owner-annotation", Asset: AssetNamespaceLabels,
		Source:     "kubeflow/dashboard profile-controller: the owner annotation on a Profile's namespace",
		Expression: "!variables.managed || " + annotationValue("object", ownership.OwnerAnnotation) + " == " + annotationValue("oldObject", ownership.OwnerAnnotation),
		Message:    "the owner annotation of this namespace is the profiles controller's" + ask,
		MessageExpression: "'namespace ' + object.metadata.name + ': the annotation " + ownership.OwnerAnnotation + " names the Profile owner and puts the namespace under the guard of profile-plugins; " +
			"only the profiles controller and profile-plugins change it'" + " + '" + ask + "'"})
	return s
}

// annotationValue is the value of annotation key on the object o (a CEL expression), "" when unset.
func annotationValue(o, key string) string {
	return fmt.Sprintf("(%[1]s ? %[2]s.metadata.annotations[%[3]s] : '')", hasKey(o+".metadata", "annotations", key, ""), o, quote(key))
}

// podChecks are the validations of pod metadata m and pod spec s (CEL expressions). katib is
// whether the request is Katib's suggestion Deployment or one of its pods (katibsTemplate,
// katibsPod), which may opt out of injection by Katib's label; "false" where none can be.
func (b builder) podChecks(m, old, s, what string, katib expr) []Check {
	allowed := "false"
	var entries []string
	for _, o := range b.cfg.Guard.OptOutAllowed {
		entries = append(entries, fmt.Sprintf("(request.namespace == %s && (has(%s.serviceAccountName) ? %[2]s.serviceAccountName : 'default') == %s)",
			quote(o.Namespace), s, quote(o.ServiceAccount)))
	}
	if len(entries) > 0 {
		allowed = strings.Join(entries, " || ")
	}
	var mesh []string
	for _, sa := range b.cfg.Guard.MeshServiceAccounts {
		ns, name, _ := strings.Cut(sa, "/")
		mesh = append(mesh, quote(serviceAccountUser(ns, name)))
	}
	exempt := fmt.Sprintf("!variables.managed || %s || request.userInfo.username in [%s]", allowed, strings.Join(mesh, ", "))
	if old != "" {
		// The waypoint's pods opt out (istio.io/dataplane-mode=none, sidecar.istio.io/inject=false,
		// in istiod's waypoint template): the waypoint policy judges them, and admits a pod that
		// runs as the waypoint's ServiceAccount with istiod's managed label only as istiod's
		// template makes it, from Kubernetes' controllers.
		exempt += " || (" + runsAs(s, b.cfg.Mesh.Waypoint.Name) + " && " + hasKey(m, "labels", label.GatewayManaged.Name, "") + ")"
	}
	status := annotation.SidecarStatus.Name
	var out []Check
	switch b.cfg.Mesh.Mode {
	case config.ModeAmbient:
		// istio-cni leaves a pod with sidecar.istio.io/status to its sidecar (cni/pkg/util
		// podutil.go podHasSidecar), and the sidecar path then trusts the pod's own switches
		// (inject=false, an istio-init container): a pod can only get the annotation from the
		// injector, which an ambient namespace (istio-injection=disabled) never runs. So no pod
		// template carries it, no pod is created with it, and no update adds it; a pod that had
		// it (from the namespace's sidecar days) keeps it only with an istio-proxy container.
		fresh := "!" + hasKey(m, "annotations", status, "")
		if old != "" {
			fresh += " || (request.operation == 'UPDATE' && " + hasKey(old, "annotations", status, "") + ")"
		}
		out = append(out,
			chk("dataplane-mode-none", AssetPodCapture, "istio cni/pkg/util/podutil.go: istio.io/dataplane-mode=none takes a pod out of ztunnel's capture", exempt+" || !"+hasKey(m, "labels", label.IoIstioDataplaneMode.Name, "none"),
				"pods of this namespace may not opt out of the ambient mesh (istio.io/dataplane-mode=none)"+ask,
				what+" + ': istio.io/dataplane-mode=none takes the pod out of the ambient mesh, where no policy of the namespace protects it; remove the label"+ask+"'"),
			chk("reroute-interfaces", AssetPodCapture, "istio tools/istio-iptables: rerouted and kubevirt interfaces send what arrives on them out as the pod's own traffic", exempt+" || !("+hasKey(m, "annotations", annotation.IoIstioRerouteVirtualInterfaces.Name, "")+" || "+
				hasKey(m, "annotations", annotation.SidecarTrafficKubevirtInterfaces.Name, "")+")",
				"pods of this namespace may not reroute an interface past ztunnel's inbound capture"+ask,
				what+" + ': the annotations "+annotation.IoIstioRerouteVirtualInterfaces.Name+" and "+annotation.SidecarTrafficKubevirtInterfaces.Name+
					" send what arrives on an interface out as the pod\\'s own traffic, past the namespace\\'s policies; remove them"+ask+"'"),
			chk("bypass-inbound-capture", AssetPodCapture, "istio cni/pkg/iptables: ambient.istio.io/bypass-inbound-capture skips the inbound redirect", exempt+" || !"+hasKey(m, "annotations", annotation.AmbientBypassInboundCapture.Name, ""),
				"pods of this namespace may not bypass ztunnel's inbound capture ("+annotation.AmbientBypassInboundCapture.Name+")"+ask,
				what+" + ': the annotation "+annotation.AmbientBypassInboundCapture.Name+" lets every caller reach the pod past ztunnel and the namespace\\'s policies; remove it"+ask+"'"),
			chk("sidecar-status-only-from-injector", AssetPodCapture, "istio cni/pkg/util/podutil.go podHasSidecar: a pod with sidecar.istio.io/status is left to its sidecar", exempt+" || "+fresh,
				"only Istio's injector sets sidecar.istio.io/status, and it injects nothing in this namespace"+ask,
				what+" + ': the annotation "+status+" makes Istio leave the pod to a sidecar, and no sidecar is injected in this ambient namespace, "+
					"so the pod would run outside the mesh; remove it"+ask+"'"),
			chk("sidecar-status-without-proxy", AssetPodCapture, "istio cni/pkg/util/podutil.go podHasSidecar", exempt+" || !"+hasKey(m, "annotations", status, "")+" || "+s+".containers.exists(c, c.name == "+quote(waypoint.SidecarContainer)+")",
				"pods of this namespace may not carry sidecar.istio.io/status without an istio-proxy container"+ask,
				what+" + ': the annotation "+status+" without an "+waypoint.SidecarContainer+" container makes Istio skip the pod, "+
					"which then runs outside the mesh; remove it"+ask+"'"))
	case config.ModeSidecar:
		// Istio's injector takes only "true" and "false", istio-cni reads the value with
		// strconv.ParseBool ("0", "f", "False" skip its redirect too), and the traffic annotations
		// take inbound ports, or all of them, out of the sidecar's capture.
		notTrue := func(field string) string {
			return fmt.Sprintf("(%s && %s.%s[%s] != 'true')", hasKey(m, field, sidecarInject, ""), m, field, quote(sidecarInject))
		}
		include, exclude, mode := annotation.SidecarTrafficIncludeInboundPorts.Name, annotation.SidecarTrafficExcludeInboundPorts.Name, annotation.SidecarInterceptionMode.Name
		// With istio-cni the injector itself excludes the status port and nothing else; the
		// status port stays Istio's 15020 (or 0, none), since the injector excludes whatever
		// status.sidecar.istio.io/port names (pkg/kube/inject/template.go excludeInboundPort).
		statusPort := annotation.SidecarStatusPort.Name
		excluded := fmt.Sprintf("%[1]s.annotations[%[2]s]", m, quote(exclude))
		injectorsOwn := fmt.Sprintf("(%[1]s == '' || %[1]s == '15020')", excluded)
		bypass := fmt.Sprintf("(%[1]s && %[2]s.annotations[%[3]s] != '*') || (%[4]s && !%[5]s) || %[6]s || %[7]s || %[8]s || %[9]s || (%[10]s && !(%[2]s.annotations[%[11]s] in ['', '0', '15020']))",
			hasKey(m, "annotations", include, ""), m, quote(include), hasKey(m, "annotations", exclude, ""), injectorsOwn, hasKey(m, "annotations", mode, "NONE"),
			hasKey(m, "annotations", annotation.SidecarTrafficExcludeInterfaces.Name, ""),
			hasKey(m, "annotations", annotation.SidecarTrafficKubevirtInterfaces.Name, ""),
			hasKey(m, "annotations", annotation.IoIstioRerouteVirtualInterfaces.Name, ""),
			hasKey(m, "annotations", statusPort, ""), quote(statusPort))
		// Katib's suggestions opt out by the label sidecar.istio.io/inject=false, and only by it.
		labelOptOut := notTrue("labels")
		if katib != "false" {
			labelOptOut = "(" + labelOptOut + " && " + string(not(katibOptOut(m, katib))) + ")"
		}
		injectNotTrue := chk("inject-not-true", AssetPodCapture, "istio pkg/kube/inject/webhook.go injectRequired; cni/pkg/plugin/plugin.go doAddRun reads the switch with strconv.ParseBool", exempt+" || !("+labelOptOut+" || "+notTrue("annotations")+")",
			"pods of this namespace may not opt out of sidecar injection (sidecar.istio.io/inject other than true)"+ask,
			what+" + ': sidecar.istio.io/inject other than \\'true\\' runs the pod without a sidecar, or without its redirect, outside the mesh and every policy of the namespace; remove it"+ask+"'")
		if katib != "false" {
			injectNotTrue.Passes = katibPasses(old != "")
			injectNotTrue.MessageExpression = what + " + ': sidecar.istio.io/inject other than \\'true\\' runs the pod without a sidecar, or without its redirect, outside the mesh and every policy of the namespace' + " +
				katibRefusal(m) + " + '; remove it" + ask + "'"
		}
		out = append(out, injectNotTrue,
			chk("inbound-capture", AssetPodCapture, "istio pkg/kube/inject/template.go excludeInboundPort; tools/istio-iptables (the inbound port, interception and interface annotations)", exempt+" || !("+bypass+")",
				"pods of this namespace may not take inbound traffic out of the sidecar's capture"+ask,
				what+" + ': "+include+" other than *, "+exclude+" beyond the status port, "+statusPort+" other than 15020, "+mode+"=NONE, or an excluded or rerouted interface "+
					"lets callers reach the pod past its sidecar and the namespace\\'s policies; remove it"+ask+"'"))
		out = append(out, b.sidecarContainerChecks(m, old, s, what, exempt, katib)...)
	}
	out = inModes(b.cfg.Mesh.Mode, out...)
	if old == "" {
		out = append(out, b.katibLabelsCheck(m, what, katib)...)
	}
	return append(out, b.waypointChecks(m, what)...)
}

// sidecarContainerChecks are the sidecar-mode checks of the containers Istio reads (pod metadata
// m, spec s): what makes istio-cni skip a pod's redirect (cni/pkg/plugin/plugin.go doAddRun: an
// istio-init container, DISABLE_ENVOY on istio-proxy read with strconv.ParseBool, a proxy type
// other than sidecar, no istio-proxy at all), looked for among the init containers too, where the
// injector puts istio-proxy when native sidecars are on (cni/pkg/plugin/kubernetes.go containers);
// and the two annotations that reshape the sidecar the injector adds. Templates are judged before
// injection, pods after it (whoever creates them), so only pods are required to be injected.
func (b builder) sidecarContainerChecks(m, old, s, what, exempt string, katib expr) []Check {
	all := fmt.Sprintf("(has(%[1]s.initContainers) ? %[1]s.containers + %[1]s.initContainers : %[1]s.containers)", s)
	proxy := quote(waypoint.SidecarContainer)
	// istio-cni reads both with strconv.ParseBool (cni/pkg/plugin/plugin.go doAddRun,
	// sidecar_redirect.go NewRedirect); ISTIO_DUAL_STACK anything but true (an unparsable value
	// counts as false) drops the IPv6 redirect on a dual-stack cluster, where the mesh sets it true.
	const truthy = "['1', 't', 'T', 'TRUE', 'true', 'True']"
	noProxy := fmt.Sprintf("%[1]s.exists(c, c.name == %[2]s && ((has(c.env) && c.env.exists(e, e.name == 'DISABLE_ENVOY' && has(e.value) && e.value in %[3]s)) || "+
		"(has(c.env) && c.env.exists(e, e.name == 'ISTIO_DUAL_STACK' && !(has(e.value) && e.value in %[3]s))) || "+
		"(has(c.args) && size(c.args) >= 2 && c.args[0] == 'proxy' && c.args[1] != 'sidecar')))", all, proxy, truthy)
	templates, proxyConfig := annotation.InjectTemplates.Name, annotation.ProxyConfig.Name
	out := []Check{
		chk("proxy-runs-sidecar", AssetPodCapture, "istio cni/pkg/plugin/plugin.go doAddRun, sidecar_redirect.go NewRedirect (DISABLE_ENVOY, ISTIO_DUAL_STACK, the proxy type)", exempt+" || !"+noProxy,
			"the istio-proxy container of a pod in this namespace must run the sidecar proxy"+ask,
			what+" + ': an istio-proxy container (or init container) with DISABLE_ENVOY set true or a proxy type other than sidecar makes istio-cni skip the pod\\'s redirect, "+
				"and ISTIO_DUAL_STACK other than true skips its IPv6 redirect, so callers reach it past the namespace\\'s policies; remove them"+ask+"'"),
		// The annotation sets any field of the sidecar's proxy config (proxyMetadata becomes the
		// environment of istio-proxy, DISABLE_ENVOY among it; interceptionMode NONE drops the
		// redirect), in YAML no CEL expression can read reliably; and a template other than
		// "sidecar" injects another proxy (grpc-agent runs none).
		chk("proxy-config", AssetPodCapture, "istio pkg/kube/inject: proxy.istio.io/config sets any field of the sidecar's proxy config", exempt+" || !"+hasKey(m, "annotations", proxyConfig, ""),
			"pods of this namespace may not reshape their sidecar with "+proxyConfig+ask,
			what+" + ': the annotation "+proxyConfig+" can switch off the sidecar\\'s capture or its proxy; remove it"+ask+"'"),
		chk("inject-templates", AssetPodCapture, "istio pkg/kube/inject/webhook.go: inject.istio.io/templates chooses what is injected", exempt+" || !"+hasKey(m, "annotations", templates, "")+" || "+m+".annotations["+quote(templates)+"] == 'sidecar'",
			"pods of this namespace may be injected only with Istio's sidecar template"+ask,
			what+" + ': "+templates+"=' + "+m+".annotations["+quote(templates)+"] + ' injects something other than the sidecar, which may run no proxy; remove it"+ask+"'"),
	}
	if *b.cfg.Mesh.IstioCNI || old == "" {
		// With istio-cni the injector adds istio-validation, never istio-init; without it, it adds
		// its own istio-init, after templates are judged, and merges a template's over it.
		out = append(out, chk("istio-init", AssetPodCapture, "istio cni/pkg/plugin/plugin.go doAddRun skips a pod with an istio-init container", exempt+" || !"+all+".exists(c, c.name == 'istio-init')",
			"a container named istio-init is Istio's to add"+ask,
			what+" + ': istio-cni skips the redirect of a pod with a container named istio-init, and Istio\\'s injector merges one over its own, "+
				"so callers would reach the pod past the namespace\\'s policies; rename it"+ask+"'"))
	}
	status := annotation.SidecarStatus.Name
	if old == "" {
		// The injector merges the containers of a pod's proxy.istio.io/overrides over the proxy it
		// injects (pkg/kube/inject/webhook.go reapplyOverwrittenContainers), which would put
		// DISABLE_ENVOY or another proxy type on the pods of a template where the checks above
		// never see them. On a pod the guard sees the merged result, so only templates are refused.
		overrides := annotation.ProxyOverrides.Name
		out = append(out, chk("proxy-overrides", AssetPodCapture, "istio pkg/kube/inject/webhook.go reapplyOverwrittenContainers", exempt+" || !"+hasKey(m, "annotations", overrides, ""),
			"pod templates of this namespace may not carry "+overrides+ask,
			what+" + ': Istio\\'s injector merges the containers of "+overrides+" over the sidecar it injects, so it could switch the proxy or its redirect off; "+
				"set what you need on the template\\'s own "+waypoint.SidecarContainer+" container instead"+ask+"'"))
	}
	if old != "" {
		// istio-cni reads the pod when its sandbox is set up, not as created (plugin.go doAddRun
		// gets it from the API server), so the status annotation may not be removed either: a
		// pod held by a scheduling gate could lose it before it starts.
		out = append(out, chk("keeps-sidecar-status", AssetPodCapture, "istio cni/pkg/plugin/plugin.go doAddRun reads the pod from the API server when its sandbox is set up", exempt+" || request.operation != 'UPDATE' || !"+hasKey(old, "annotations", status, "")+" || "+hasKey(m, "annotations", status, ""),
			"pods of this namespace keep sidecar.istio.io/status"+ask,
			what+" + ': without "+status+" istio-cni sets up no redirect for the pod, so callers would reach it past the namespace\\'s policies; keep the annotation"+ask+"'"))
	}
	if old != "" {
		// A pod a user creates is seen as the injector left it: without istio-proxy, or without
		// the status annotation the injector always writes, it was not injected, and istio-cni
		// programs no redirect for it (cni/pkg/plugin/plugin.go doAddRun skips a pod without
		// sidecar.istio.io/status), whatever its own istio-proxy container runs.
		// A Katib suggestion's pod is not injected: it opted out by Katib's label (katibOptOut).
		injected := chk("injected", AssetPodCapture, "istio cni/pkg/plugin/plugin.go doAddRun skips a pod without sidecar.istio.io/status", exempt+" || request.operation != 'CREATE' || "+string(katibOptOut(m, katib))+" || ("+all+".exists(c, c.name == "+proxy+") && "+hasKey(m, "annotations", status, "")+")",
			"pods of this namespace run with Istio's sidecar"+ask,
			what+" + ': the pod has no "+waypoint.SidecarContainer+" container or no "+status+", so it was not injected and istio-cni would leave it "+
				"outside the mesh and every policy of the namespace; create it where injection is on, without switching it off"+ask+"'")
		if katib != "false" {
			injected.Passes = katibPasses(true)
		}
		out = append(out, injected)
	}
	return out
}

// waypointChecks refuse routing labels of an object (metadata m) that point past the namespace's
// own waypoint.
func (b builder) waypointChecks(m, what string) []Check {
	wp := b.cfg.Mesh.Waypoint.Name
	use, useNS := label.IoIstioUseWaypoint.Name, label.IoIstioUseWaypointNamespace.Name
	return append([]Check{
		chk("use-waypoint", AssetWaypointRouting, "istio pilot/pkg/serviceregistry/ambient/waypoints.go (istio.io/use-waypoint)", "!variables.managed || !"+hasKey(m, "labels", use, "")+" || "+m+".labels["+quote(use)+"] == "+quote(wp),
			"istio.io/use-waypoint may name only this namespace's waypoint "+wp+ask,
			what+" + ': istio.io/use-waypoint=' + "+m+".labels["+quote(use)+"] + ' sends traffic past this namespace\\'s waypoint "+wp+
				", which enforces the owner\\'s policy; remove the label"+ask+"'"),
		chk("use-waypoint-namespace", AssetWaypointRouting, "istio pilot/pkg/serviceregistry/ambient/waypoints.go (istio.io/use-waypoint-namespace)", "!variables.managed || !"+hasKey(m, "labels", useNS, "")+" || "+m+".labels["+quote(useNS)+"] == request.namespace",
			"istio.io/use-waypoint-namespace may name only this namespace"+ask,
			what+" + ': istio.io/use-waypoint-namespace=' + "+m+".labels["+quote(useNS)+"] + ' sends traffic to another namespace\\'s waypoint; remove the label"+ask+"'"),
	}, b.canaryChecks(m, what)...)
}

// Istio's canary waypoint labels (istio 1.32, pilot/pkg/serviceregistry/ambient/waypoints.go
// getUseWaypointCanary), spelled out: istio.io/api names them only from v1.32, above our floor.
const (
	useWaypointCanary          = "istio.io/use-waypoint-canary"
	useWaypointCanaryNamespace = "istio.io/use-waypoint-canary-namespace"
)

// canaryChecks refuse a canary waypoint (a share of the traffic, by weight) anywhere but the
// namespace's own waypoint. Another waypoint would fail closed, refused by the ztunnel policy,
// yet it would take that share away from the owner's policy's waypoint.
func (b builder) canaryChecks(m, what string) []Check {
	canary, canaryNS := quote(useWaypointCanary), quote(useWaypointCanaryNamespace)
	return []Check{
		chk("use-waypoint-canary", AssetWaypointRouting, "istio 1.32 pilot/pkg/serviceregistry/ambient/waypoints.go getUseWaypointCanary", "!variables.managed || !"+hasKey(m, "labels", useWaypointCanary, "")+" || "+m+".labels["+canary+"] in ['', 'none', "+quote(b.cfg.Mesh.Waypoint.Name)+"]",
			useWaypointCanary+" may name only this namespace's waypoint "+b.cfg.Mesh.Waypoint.Name+ask,
			what+" + ': "+useWaypointCanary+"=' + "+m+".labels["+canary+"] + ' sends a share of the traffic past this namespace\\'s waypoint; remove the label"+ask+"'"),
		chk("use-waypoint-canary-namespace", AssetWaypointRouting, "istio 1.32 pilot/pkg/serviceregistry/ambient/waypoints.go getUseWaypointCanary", "!variables.managed || !"+hasKey(m, "labels", useWaypointCanaryNamespace, "")+" || "+m+".labels["+canaryNS+"] == request.namespace",
			useWaypointCanaryNamespace+" may name only this namespace"+ask,
			what+" + ': "+useWaypointCanaryNamespace+"=' + "+m+".labels["+canaryNS+"] + ' sends a share of the traffic to another namespace\\'s waypoint; remove the label"+ask+"'"),
	}
}

// pods judges every pod created in a managed namespace, whoever creates it: a pod a Kubernetes
// controller creates from a template the workloads policy judged may have been changed since by
// any mutating webhook (Kubeflow's PodDefaults, Katib's and the Spark operator's pod webhooks
// among them), and validating admission runs after all of them (k8s.io/apiserver
// pkg/admission/chain.go; mutating before validating). Kubernetes' controllers stay trusted in
// updates of pods, which change what they own (owner references, finalizers, conditions).
func (b builder) pods() policySpec {
	s := b.spec(PodsPolicy, "namespaceObject", []admissionv1.NamedRuleWithOperations{
		rule("", "v1", []string{"pods", "pods/status"}, admissionv1.Create, admissionv1.Update),
		// An ephemeral container is a change of the pod as any other: judged whole, so none is
		// added to a pod the checks would refuse now, a Katib suggestion's opted out of the sidecar
		// among them (the tenant re-review of Dec 5).
		rule("", "v1", []string{"pods/ephemeralcontainers"}, admissionv1.Update),
	}, sameMetadata()...)
	s.untrusted = "!(" + b.trustedUsers() + " || ((" + b.kubernetes() + ") && request.operation != 'CREATE'))"
	s.addAll(viaStatus(b.podChecks("object.metadata", "oldObject.metadata", "object.spec", "'Pod ' + request.namespace + '/' + object.metadata.name", b.katibsPod("object.metadata"))))
	return s
}

// sameMetadata is the variable that says whether an update leaves the object's labels and
// annotations as they were.
func sameMetadata() []admissionv1.Variable {
	same := func(f string) string {
		return fmt.Sprintf("((!has(object.metadata.%[1]s) && !has(oldObject.metadata.%[1]s)) || "+
			"(has(object.metadata.%[1]s) && has(oldObject.metadata.%[1]s) && object.metadata.%[1]s == oldObject.metadata.%[1]s))", f)
	}
	return []admissionv1.Variable{{Name: "sameMetadata", Expression: same("labels") + " && " + same("annotations")}}
}

// viaStatus lets every status update through that leaves labels and annotations as they were, and
// judges the others as any update. The status subresource of pods and Services takes label and
// annotation changes as well (only the spec is kept), so without it a label the checks refuse could
// be set there; with it the kubelet's status writes of a pod that predates the guard still pass.
func viaStatus(vs []Check) []Check {
	out := make([]Check, len(vs))
	for i, v := range vs {
		v.Expression = "(has(request.subResource) && request.subResource == 'status' && variables.sameMetadata) || (" + v.Expression + ")"
		out[i] = v
	}
	return out
}

func (b builder) workloads() policySpec {
	s := b.spec(WorkloadsPolicy, "namespaceObject", []admissionv1.NamedRuleWithOperations{
		rule("apps", "v1", []string{"deployments", "statefulsets", "daemonsets", "replicasets"}, admissionv1.Create, admissionv1.Update),
		rule("batch", "v1", []string{"jobs"}, admissionv1.Create, admissionv1.Update),
		rule("", "v1", []string{"replicationcontrollers"}, admissionv1.Create, admissionv1.Update),
	})
	s.addAll(b.podChecks("object.spec.template.metadata", "", "object.spec.template.spec",
		"request.kind.kind + ' ' + request.namespace + '/' + object.metadata.name + ' (its pod template)'", b.katibsTemplate("object.spec.template.metadata")))
	return s
}

func (b builder) cronJobs() policySpec {
	s := b.spec(CronJobsPolicy, "namespaceObject", []admissionv1.NamedRuleWithOperations{
		rule("batch", "v1", []string{"cronjobs"}, admissionv1.Create, admissionv1.Update),
	})
	s.addAll(b.podChecks("object.spec.jobTemplate.spec.template.metadata", "", "object.spec.jobTemplate.spec.template.spec",
		"'CronJob ' + request.namespace + '/' + object.metadata.name + ' (its pod template)'", "false"))
	return s
}

// bindings refuses a Binding that carries Istio's metadata: the API server copies a Binding's
// annotations, and its labels, onto the pod it binds (pods/binding, and the older bindings
// resource), so a Binding could opt a pod out of the mesh or route it past the waypoint. The
// scheduler's Bindings carry none.
func (b builder) bindings() policySpec {
	istio := func(field string) string {
		return fmt.Sprintf("(has(object.metadata.%[1]s) && object.metadata.%[1]s.exists(k, k.startsWith('istio.io/') || k.contains('.istio.io/')))", field)
	}
	s := b.spec(BindingsPolicy, "namespaceObject", []admissionv1.NamedRuleWithOperations{
		rule("", "v1", []string{"pods/binding", "bindings"}, admissionv1.Create),
	})
	s.add(chk("istio-metadata", AssetPodCapture, "kubernetes pkg/registry/core/pod/storage/storage.go: a Binding's labels and annotations are copied onto the pod", "!variables.managed || !("+istio("labels")+" || "+istio("annotations")+")",
		"a Binding may not carry Istio's labels or annotations: they would be copied onto the pod"+ask,
		"'Binding ' + request.namespace + '/' + object.metadata.name + ': its Istio labels or annotations would be copied onto the pod, "+
			"which could take it out of the mesh or past the waypoint; bind without them'"+" + '"+ask+"'"))
	// The API server copies a Binding's labels onto the pod too, whatever the key, which would give
	// a member's pod the waypoint's gateway-name label and a ReplicaSet's pod-template-hash after
	// the pod was judged (the webhook review of Dec 5). The scheduler's Bindings carry only the
	// topology labels the PodTopologyLabels admission plugin adds.
	topology := string(topologyKey("k"))
	s.add(chk("labels", AssetServiceMembership, "kubernetes pkg/registry/core/pod/storage/storage.go (a Binding's labels are copied onto the pod); plugin/pkg/admission/podtopologylabels",
		"!variables.managed || !has(object.metadata.labels) || object.metadata.labels.all(k, "+topology+")",
		"a Binding may carry only topology labels: its labels are copied onto the pod"+ask,
		"'Binding ' + request.namespace + '/' + object.metadata.name + ': its labels would be copied onto the pod after the pod was judged, "+
			"which could put it behind the waypoint\\'s Service or under another workload; bind without labels other than topology.kubernetes.io/'"+" + '"+ask+"'"))
	return s
}

// kubeflow refuses Kubeflow's objects whose controllers copy a tenant's input into what Istio
// reads: PodDefaults (onto pods), Notebooks (onto the ingress route), Katib's Experiments and
// Trials (onto the pods of trials) and the Spark operator's SparkApplications and
// ScheduledSparkApplications (onto pods its webhook selects). Clusters without these CRDs match
// nothing.
func (b builder) kubeflow() policySpec {
	s := b.spec(KubeflowPolicy, "namespaceObject", []admissionv1.NamedRuleWithOperations{
		rule("kubeflow.org", "*", []string{"poddefaults"}, admissionv1.Create, admissionv1.Update),
		rule("kubeflow.org", "*", []string{"notebooks"}, admissionv1.Create, admissionv1.Update),
		rule("kubeflow.org", "*", []string{"experiments", "trials"}, admissionv1.Create, admissionv1.Update),
		rule("sparkoperator.k8s.io", "*", []string{"sparkapplications", "scheduledsparkapplications"}, admissionv1.Create, admissionv1.Update),
	})
	s.addAll([]Check{podDefaultCheck(), b.podDefaultSelectorCheck(), b.podDefaultIdentityCheck(), b.notebookCheck(), katibCheck(), sparkCheck()})
	s.addAll(b.katibKubeflowChecks())
	return s
}

// istioContainerNames is the CEL list of the container names Istio reads: its proxy, and the init
// containers whose presence makes istio-cni or the injector treat a pod as already handled.
func istioContainerNames() string {
	return "[" + quote(waypoint.SidecarContainer) + ", 'istio-init', 'istio-validation']"
}

// proxySwitchNames is a CEL list of the istio-proxy environment variables istio-cni reads to
// decide a sidecar pod's redirect (cni/pkg/plugin/plugin.go doAddRun, sidecar_redirect.go
// NewRedirect): DISABLE_ENVOY true skips it, ISTIO_DUAL_STACK false skips its IPv6 half. What a
// webhook merges into every container of a pod (Kubeflow's PodDefaults) may set neither: on the
// template's own istio-proxy the workloads policy judges them, on pods kube-controller-manager
// creates nobody does.
func proxySwitchNames() string { return "['DISABLE_ENVOY', 'ISTIO_DUAL_STACK']" }

// sparkCheck refuses the Spark operator's SparkApplications (and ScheduledSparkApplications, whose
// spec.template the operator makes SparkApplications of) with a driver or executor init container
// or sidecar named as a container Istio reads. The operator's pod webhook appends those containers
// to every pod labelled sparkoperator.k8s.io/launched-by-spark-operator=true whose
// sparkoperator.k8s.io/app-name label names the application, in every namespace, whoever creates
// the pod (kubeflow/spark-operator internal/webhook/sparkpod_defaulter.go mutateSparkPod,
// addInitContainers, addSidecarContainers). Those labels mean nothing to the guard, so a member
// may put them on a workload's pod template, whose pods kube-controller-manager creates and the
// guard does not judge: an istio-init there makes istio-cni skip the pod's redirect (istio/istio
// cni/pkg/plugin/plugin.go doAddRun), and an istio-proxy of the member's is merged into the
// injected one. Everything else the webhook copies lands on the Spark container or the pod spec,
// where Pod Security still judges it.
func sparkCheck() Check {
	named := func(spec, role, field string) string {
		return fmt.Sprintf("(has(%[1]s.%[2]s) && has(%[1]s.%[2]s.%[3]s) && %[1]s.%[2]s.%[3]s.exists(c, has(c.name) && c.name in %[4]s))",
			spec, role, field, istioContainerNames())
	}
	istioContainer := func(spec string) string {
		var clauses []string
		for _, role := range []string{"driver", "executor"} {
			for _, field := range []string{"initContainers", "sidecars"} {
				clauses = append(clauses, named(spec, role, field))
			}
		}
		return "(" + strings.Join(clauses, " || ") + ")"
	}
	spec := "(request.resource.resource == 'sparkapplications' && has(object.spec) && " + istioContainer("object.spec") + ")"
	template := "(request.resource.resource == 'scheduledsparkapplications' && has(object.spec) && has(object.spec.template) && " + istioContainer("object.spec.template") + ")"
	return chk("spark-istio-containers", AssetPodCapture, "kubeflow/spark-operator internal/webhook/sparkpod_defaulter.go addInitContainers, addSidecarContainers",
		"!(request.resource.resource in ['sparkapplications', 'scheduledsparkapplications']) || !variables.managed || !("+spec+" || "+template+")",
		"a SparkApplication may not give its driver or executor a container named as Istio's: the Spark operator's webhook copies them onto pods no policy judges"+ask,
		"request.kind.kind + ' ' + request.namespace + '/' + object.metadata.name + ': the Spark operator\\'s webhook appends the driver\\'s and executor\\'s initContainers and sidecars "+
			"to every pod labelled with this application\\'s name, also those kube-controller-manager creates, which the guard does not judge, so a container named "+waypoint.SidecarContainer+
			", istio-init or istio-validation could take them out of the mesh; name the container otherwise"+ask+"'")
}

// katibCheck refuses Katib's Experiments and Trials whose labels or custom metrics collector Katib
// would put on pods no policy judges. Katib's pod webhook copies every label of a Trial onto every
// pod of the trial's job (kubeflow/katib pkg/webhook/v1beta1/pod/inject_webhook.go Mutate,
// utils.go mutatePodMetadata), in every Profile's namespace (the profiles controller labels them
// katib.kubeflow.org/metrics-collector-injection=enabled), and the experiment controller gives each
// Trial its Experiment's labels (pkg/controller.v1beta1/util/labels.go TrialLabels) and its
// metrics collector spec, whose custom collector, a whole container, the webhook appends to those
// pods. The pods of a trial's Job are created by kube-controller-manager, which the guard trusts,
// after the Job's template was judged. So an Experiment or Trial in a managed namespace may carry
// no label of Istio's domain, and no custom collector named as a container Istio reads.
func katibCheck() Check {
	named := func(mc string) string {
		return fmt.Sprintf("(has(object.spec.%[1]s) && has(object.spec.%[1]s.collector) && has(object.spec.%[1]s.collector.customCollector) && "+
			"has(object.spec.%[1]s.collector.customCollector.name) && object.spec.%[1]s.collector.customCollector.name in %[2]s)",
			mc, istioContainerNames())
	}
	istio := "(has(object.metadata.labels) && object.metadata.labels.exists(k, k.startsWith('istio.io/') || k.contains('.istio.io/') || k.startsWith('gateway.networking.k8s.io/')))"
	collector := "(has(object.spec) && (" + named("metricsCollectorSpec") + " || " + named("metricsCollector") + "))"
	return chk("katib-istio", AssetPodCapture, "kubeflow/katib pkg/webhook/v1beta1/pod/inject_webhook.go Mutate, utils.go mutatePodMetadata",
		"!(request.resource.resource in ['experiments', 'trials']) || !variables.managed || !("+istio+" || "+collector+")",
		"a Katib Experiment or Trial may not carry Istio's labels or a custom collector named as Istio's containers: Katib copies them onto pods no policy judges"+ask,
		"request.kind.kind + ' ' + request.namespace + '/' + object.metadata.name + ': Katib\\'s webhook copies the labels of a Trial (and of its Experiment) and its custom metrics collector onto the pods of the trial, "+
			"which kube-controller-manager creates and the guard does not judge, so a label of Istio\\'s domain or a collector named "+waypoint.SidecarContainer+
			", istio-init or istio-validation could take them out of the mesh or past the waypoint; set Istio\\'s labels on the trial template\\'s pod template instead, and name the collector otherwise"+ask+"'")
}

// podDefaultSelectorCheck refuses Kubeflow's PodDefaults whose selector may match the pods of the
// namespace's waypoint. The webhook applies a PodDefault to every pod of the namespace its selector
// matches (kubeflow/kubeflow components/admission-webhook/main.go filterPodDefaults; an empty
// selector matches all), the waypoint's too, which istiod's Deployment and kube-controller-manager
// make and the guard does not judge, and merges its env, envFrom, volumes and volumeMounts into
// istio-proxy: ISTIO_BOOTSTRAP_OVERRIDE or ISTIO_BOOTSTRAP with a member's ConfigMap mounted runs
// the member's Envoy configuration (istio/istio pkg/envoy/proxy.go, pkg/bootstrap/instance.go) in a
// pod outside ztunnel's capture that holds the identity every pod's ztunnel policy admits. A
// selector is taken to exclude the waypoint's pods only as selectorExcludesWaypoint says.
func (b builder) podDefaultSelectorCheck() Check {
	const gatewayName = "gateway.networking.k8s.io/gateway-name"
	sel := "object.spec.selector"
	return chk("poddefault-selects-waypoint", AssetWaypointWorkload, "kubeflow components/admission-webhook/main.go filterPodDefaults; istio pkg/envoy/proxy.go, pkg/bootstrap/instance.go (ISTIO_BOOTSTRAP_OVERRIDE)",
		"request.resource.resource != 'poddefaults' || !variables.managed || (has(object.spec) && has("+sel+") && "+string(b.selectorExcludesWaypoint(sel))+")",
		"a PodDefault must select by a label the waypoint's pods do not carry"+ask,
		"'PodDefault ' + request.namespace + '/' + object.metadata.name + ': Kubeflow\\'s webhook applies it to every pod its selector matches, "+
			"and this selector may match the pods of this namespace\\'s waypoint ("+b.cfg.Mesh.Waypoint.Name+"), whose proxy would then run with its environment and volumes, "+
			"outside every policy of the namespace; select by a label of your own pods (matchLabels, or In or Exists), "+
			"not one of Istio\\'s, the Gateway API\\'s, pod-template-hash or those the waypoint is given by its configuration, or exclude "+gatewayName+"'"+" + '"+ask+"'")
}

// notebookCheck refuses Kubeflow's Notebooks that set the user-id header: the notebook controller
// copies the JSON object of headers in a Notebook's notebooks.kubeflow.org/http-headers-request-set
// into the headers.request.set of the VirtualService that routes the ingress gateway to it
// (kubeflow/notebooks components/notebook-controller generateVirtualServices), and Istio's "set"
// overwrites the request's header (pilot/pkg/networking/core/route/route.go translateAppendHeaders).
// The owner and contributor policies admit the ingress gateway for the user its user-id header
// names, so no Notebook may set that header: its name in any case, or any JSON escape, which could
// spell it.
func (b builder) notebookCheck() Check {
	const key = "notebooks.kubeflow.org/http-headers-request-set"
	headers := "object.metadata.annotations[" + quote(key) + "]"
	return chk("notebook-user-id-header", AssetUserIdentity, "kubeflow/notebooks notebook-controller generateVirtualServices; istio pilot/pkg/networking/core/route/route.go translateAppendHeaders",
		"request.resource.resource != 'notebooks' || !variables.managed || !"+hasKey("object.metadata", "annotations", key, "")+" || !("+
			headers+".lowerAscii().contains("+quote(strings.ToLower(b.cfg.Authorization.UserIDHeader))+") || "+headers+".contains('\\\\u'))",
		"a Notebook may not set the header "+b.cfg.Authorization.UserIDHeader+" on the requests routed to it"+ask,
		"'Notebook ' + request.namespace + '/' + object.metadata.name + ': "+key+" sets the header "+b.cfg.Authorization.UserIDHeader+
			" (or uses a JSON escape, which could spell it) on every request the ingress gateway routes to the notebook, "+
			"and the namespace\\'s policies admit whoever that header names; remove it from the annotation"+ask+"'")
}

// podDefaultCheck refuses Kubeflow's PodDefaults that would put Istio's switches on pods. Kubeflow's
// admission webhook merges a PodDefault's spec.labels and spec.annotations into every pod it
// selects in a Profile's namespace, and its
// spec.env into every container (kubeflow/kubeflow components/admission-webhook/main.go
// applyPodDefaultsOnPod), whoever creates the pod: the pods of workloads are created by
// kube-controller-manager, which the guard trusts, after their templates were judged. So a
// PodDefault in a managed namespace may carry no key of Istio's domain, no DISABLE_ENVOY or
// ISTIO_DUAL_STACK (merged into a template's own istio-proxy, see proxySwitchNames), and no
// container Istio reads by name.
func podDefaultCheck() Check {
	istio := func(field string) string {
		return fmt.Sprintf("(has(object.spec.%[1]s) && object.spec.%[1]s.exists(k, k.startsWith('istio.io/') || k.contains('.istio.io/')))", field)
	}
	named := func(field string) string {
		return fmt.Sprintf("(has(object.spec.%[1]s) && object.spec.%[1]s.exists(c, has(c.name) && c.name in %[2]s))",
			field, istioContainerNames())
	}
	disable := "(has(object.spec.env) && object.spec.env.exists(e, has(e.name) && e.name in " + proxySwitchNames() + "))"
	return chk("poddefault-istio", AssetPodCapture, "kubeflow components/admission-webhook/main.go applyPodDefaultsOnPod",
		"request.resource.resource != 'poddefaults' || !variables.managed || !has(object.spec) || !("+
			strings.Join([]string{istio("labels"), istio("annotations"), disable, named("initContainers"), named("sidecars")}, " || ")+")",
		"a PodDefault may not carry Istio's labels, annotations, DISABLE_ENVOY, ISTIO_DUAL_STACK or containers: they would be copied onto pods no policy judges"+ask,
		"'PodDefault ' + request.namespace + '/' + object.metadata.name + ': Kubeflow\\'s webhook copies its labels, annotations and environment onto the pods it selects, "+
			"also those of workloads, whose templates alone the guard judges, so Istio\\'s labels and annotations, DISABLE_ENVOY, ISTIO_DUAL_STACK or a container named "+
			waypoint.SidecarContainer+", istio-init or istio-validation could take them out of the mesh or past the waypoint; "+
			"set Istio\\'s keys on the workload\\'s pod template instead"+ask+"'")
}

// podDefaultIdentityCheck refuses Kubeflow's PodDefaults that would give a member's pods the
// waypoint's identity or make them the waypoint Service's: the webhook sets a pod's
// serviceAccountName from the PodDefault's and merges its labels (kubeflow components/
// admission-webhook/main.go applyPodDefaultsOnPod), on pods kube-controller-manager creates from
// templates the guard judged without them. The waypoint policy refuses such a pod at its creation
// too; refused here, the member hears of it when creating the PodDefault.
func (b builder) podDefaultIdentityCheck() Check {
	wp := b.cfg.Mesh.Waypoint.Name
	gatewayLabels := "(has(object.spec.labels) && object.spec.labels.exists(k, k.startsWith('gateway.networking.k8s.io/')))"
	asWaypoint := "(has(object.spec.serviceAccountName) && object.spec.serviceAccountName == " + quote(wp) + ")"
	return chk("poddefault-waypoint-identity", AssetWaypointIdentity, "kubeflow components/admission-webhook/main.go applyPodDefaultsOnPod (serviceAccountName, labels)",
		"request.resource.resource != 'poddefaults' || !variables.managed || !has(object.spec) || !("+asWaypoint+" || "+gatewayLabels+")",
		"a PodDefault may not run pods as the waypoint's ServiceAccount or give them the Gateway API's labels"+ask,
		"'PodDefault ' + request.namespace + '/' + object.metadata.name + ': Kubeflow\\'s webhook sets the ServiceAccount and labels of the pods it selects, "+
			"so this one would give them the identity the namespace\\'s policies admit as its waypoint ("+wp+"), or make them the waypoint Service\\'s; "+
			"name another ServiceAccount and drop the gateway.networking.k8s.io/ labels"+ask+"'")
}

func (b builder) services() policySpec {
	s := b.spec(ServicesPolicy, "namespaceObject", []admissionv1.NamedRuleWithOperations{
		rule("", "v1", []string{"services", "services/status"}, admissionv1.Create, admissionv1.Update),
	}, sameMetadata()...)
	s.addAll(viaStatus(b.waypointChecks("object.metadata", "'Service ' + request.namespace + '/' + object.metadata.name")))
	b.withEndpointChecks(&s)
	return s
}

// withEndpointChecks adds to the services policy p the endpoints of Services without a selector:
// an address whose targetRef names a pod of another namespace is refused unless that namespace is
// reserved (never managed). istiod counts the pod a targetRef names as a member of the slice's
// Service whatever the two namespaces (pilot/pkg/serviceregistry/ambient/workloads.go
// matchingServicesWithoutSelectors, endpointSliceAddressIndex), so the other namespace's pod would
// list this namespace's Service, and with istiod's PILOT_AUTO_ALLOW_WAYPOINT_POLICY be given an
// ALLOW policy for this namespace's waypoint (implicitWaypointPolicies), which ztunnel joins to the
// pod's own namespace's. kube-controller-manager mirrors an Endpoints' targetRefs into the
// EndpointSlice istiod reads.
func (b builder) withEndpointChecks(p *policySpec) {
	// The Services' checks stay theirs: istiod reads no waypoint label of an endpoint slice.
	for i := range p.checks {
		p.checks[i].Expression = "request.resource.resource != 'services' || (" + p.checks[i].Expression + ")"
	}
	p.rules = append(p.rules,
		rule("", "v1", []string{"endpoints"}, admissionv1.Create, admissionv1.Update),
		rule("discovery.k8s.io", "v1", []string{"endpointslices"}, admissionv1.Create, admissionv1.Update))
	var reserved []string
	for _, r := range b.reservedNamespaces() {
		reserved = append(reserved, reservedExpr("a.targetRef.namespace", r))
	}
	// A service account may also name the pods of its own namespace: Knative's controller
	// (knative-serving) writes the Endpoints of a scaled-to-zero Service with its activator's
	// addresses. A tenant's service accounts live in the tenant's namespace.
	own := "request.userInfo.username.startsWith('system:serviceaccount:' + a.targetRef.namespace + ':')"
	ok := "(!has(a.targetRef) || !has(a.targetRef.kind) || a.targetRef.kind != 'Pod' || !has(a.targetRef.namespace) || " +
		"a.targetRef.namespace == '' || a.targetRef.namespace == request.namespace || " + own + " || " + strings.Join(reserved, " || ") + ")"
	addresses := func(list string) string {
		return fmt.Sprintf("(!has(s.%[1]s) || s.%[1]s.all(a, %[2]s))", list, ok)
	}
	endpoints := "request.resource.resource != 'endpoints' || !has(object.subsets) || object.subsets.all(s, " +
		addresses("addresses") + " && " + addresses("notReadyAddresses") + ")"
	sliceOK := "request.resource.resource != 'endpointslices' || !has(object.endpoints) || object.endpoints.all(a, " + ok + ")"
	what := "request.kind.kind + ' ' + request.namespace + '/' + object.metadata.name"
	p.add(chk("endpoint-foreign-pods", AssetServiceMembership, "istio pilot/pkg/serviceregistry/ambient/workloads.go matchingServicesWithoutSelectors, endpointSliceAddressIndex", "!variables.managed || (("+endpoints+") && ("+sliceOK+"))",
		"an endpoint address of this namespace may name only this namespace's pods"+ask,
		what+" + ': an address whose targetRef names a pod of another namespace makes Istio count that pod as a member of this namespace\\'s Service, "+
			"and can make it admit this namespace\\'s waypoint; name only this namespace\\'s pods, or none"+ask+"'"))
}

// reservedNamespaces are the names and patterns of the namespaces never managed, as managed reads them.
func (b builder) reservedNamespaces() []string {
	reserved := append(ownership.AlwaysReserved(), b.cfg.ReservedNamespaces()...)
	slices.Sort(reserved)
	return slices.Compact(reserved)
}

// waypointsOwnKey is whether the label key k (CEL) is one the waypoint's pods may carry: istiod's
// waypoint template gives them labels of Istio's and the Gateway API's domains, the Gateway's own
// labels, which are the plugins' (app.kubernetes.io/managed-by and their own domain's), the
// Deployment's pod-template-hash, and the admin's mesh.waypoint.labels, which the Gateway's
// spec.infrastructure.labels carry (deploymentcontroller.go extractInfrastructureLabels).
func (b builder) waypointsOwnKey(k string) expr {
	ours, _, _ := strings.Cut(plugin.PluginLabel, "/")
	keys := []string{"pod-template-hash", plugin.ManagedByLabel}
	// The API server copies the node's topology labels onto every pod it binds, the waypoint's too
	// (and bindings/labels lets a Binding carry them).
	keys = append(keys, slices.Sorted(maps.Keys(b.cfg.Mesh.Waypoint.Labels))...)
	return anyOf(expr(k+".startsWith('istio.io/')"), expr(k+".contains('.istio.io/')"), expr(k+".startsWith('gateway.networking.k8s.io/')"),
		topologyKey(k),
		expr(k+".startsWith("+quote(ours+"/")+")"), in(expr(k), keys...))
}

// selectorExcludesWaypoint is whether the LabelSelector sel (CEL) requires a label the waypoint's
// pods never carry (matchLabels, or In or Exists, on a key not of theirs), or the waypoint's
// gateway-name label absent or other than the waypoint's. Anything else may select them.
func (b builder) selectorExcludesWaypoint(sel string) expr {
	gw, wp := quote(label.IoK8sNetworkingGatewayGatewayName.Name), quote(b.cfg.Mesh.Waypoint.Name)
	labels := allOf(expr("has("+sel+".matchLabels)"), anyOf(
		expr(sel+".matchLabels.exists(k, "+string(not(b.waypointsOwnKey("k")))+")"),
		allOf(expr(gw+" in "+sel+".matchLabels"), expr("string("+sel+".matchLabels["+gw+"]) != "+wp))))
	requirement := anyOf(
		allOf("e.operator in ['In', 'Exists']", not(b.waypointsOwnKey("string(e.key)"))),
		allOf(expr("e.key == "+gw), anyOf("e.operator == 'DoesNotExist'",
			allOf("e.operator == 'NotIn'", "has(e.values)", expr(wp+" in e.values")),
			allOf("e.operator == 'In'", expr("!has(e.values) || !("+wp+" in e.values)")))))
	exprs := allOf(expr("has("+sel+".matchExpressions)"),
		expr(sel+".matchExpressions.exists(e, has(e.key) && has(e.operator) && "+string(requirement)+")"))
	return anyOf(labels, exprs)
}

// mapExcludesWaypoint is whether the Service selector m (CEL, a map) is empty, selecting nothing,
// or requires a label the waypoint's pods never carry, or another gateway-name.
func (b builder) mapExcludesWaypoint(m string) expr {
	gw, wp := quote(label.IoK8sNetworkingGatewayGatewayName.Name), quote(b.cfg.Mesh.Waypoint.Name)
	return anyOf(expr("size("+m+") == 0"), expr(m+".exists(k, "+string(not(b.waypointsOwnKey("k")))+")"),
		allOf(expr(gw+" in "+m), expr(m+"["+gw+"] != "+wp)))
}

// topologyKey is whether the label key k (CEL) is a topology label: the only labels a Binding may
// carry (bindings/labels), which the API server copies onto every pod it binds, the waypoint's too.
func topologyKey(k string) expr {
	return anyOf(expr(k+".startsWith('topology.kubernetes.io/')"), expr(k+".startsWith('topology.k8s.io/')"))
}
