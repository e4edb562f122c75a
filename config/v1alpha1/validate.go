package v1alpha1

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"istio.io/api/label"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	psaapi "k8s.io/pod-security-admission/api"
)

// Validate checks a defaulted configuration. The error lists every problem, each with its field
// path and bad value.
func (c *Config) Validate() error {
	var errs field.ErrorList
	if c.APIVersion != APIVersion {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), c.APIVersion, "must be "+APIVersion))
	}
	if c.Kind != Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), c.Kind, "must be "+Kind))
	}
	errs = append(errs, c.Mesh.validate(field.NewPath("mesh"))...)
	errs = append(errs, c.Authorization.validate(field.NewPath("authorization"))...)
	errs = append(errs, c.PodSecurity.validate(field.NewPath("podSecurity"))...)
	errs = append(errs, c.Namespaces.validate(field.NewPath("namespaces"))...)
	errs = append(errs, c.Guard.validate(field.NewPath("guard"), c.Mesh.Waypoint.Name)...)
	if c.Mesh.Mode == ModeSidecar && c.Mesh.IstioCNI != nil && !*c.Mesh.IstioCNI && c.PodSecurity.Enforce.Level != psaapi.LevelPrivileged {
		errs = append(errs, field.Invalid(field.NewPath("podSecurity", "enforce", "level"), c.PodSecurity.Enforce.Level,
			"sidecar mode without istio-cni injects an istio-init container that needs NET_ADMIN and NET_RAW, which this level forbids, "+
				"so every meshed pod would be refused; install istio-cni (mesh.istioCNI: true), use mesh.mode ambient, or enforce \"privileged\""))
	}
	errs = append(errs, c.Mesh.ingressReachesPods(field.NewPath("mesh"))...)
	errs = append(errs, c.defaultInputsUnchanged()...)
	errs = append(errs, c.onBehalfOfUserOnSidecar()...)
	// Enforce "restricted" without mesh.waypoint.seccompPatch is valid: the waypoint class
	// defaults in mesh.istiodNamespace (waypoint.ClassDefaults) give the waypoint pod its
	// seccompProfile. Whether they exist is a fact of the cluster, not of this file: the platform
	// check and the waypoint's waiting message report it.
	return errs.ToAggregate()
}

// ingressReachesPods refuses an ambient configuration in which the ingress gateway can never reach
// a user pod. The ztunnel policy does not admit the ingress gateway (its requests must pass the
// owner's header check at the waypoint), so the ingress must send through the waypoint: that needs
// istio.io/ingress-use-waypoint, and a waypoint that takes Service traffic, since gateways send
// only Service traffic to waypoints. Both values are errors, not warnings: each locks every user
// out of every namespace, and no deployment of this library works with them.
func (m *Mesh) ingressReachesPods(path *field.Path) field.ErrorList {
	if m.Mode != ModeAmbient {
		return nil
	}
	var errs field.ErrorList
	if m.IngressUseWaypoint != nil && !*m.IngressUseWaypoint {
		errs = append(errs, field.Invalid(path.Child("ingressUseWaypoint"), false,
			"in ambient mode the ingress gateway would send requests straight to the pods, where the ztunnel policy refuses it "+
				"(it admits the ingress only through the waypoint, which checks the user-id header), so no user could reach any namespace; "+
				"leave it true"))
	}
	if m.Waypoint.For == "workload" {
		errs = append(errs, field.Invalid(path.Child("waypoint", "for"), m.Waypoint.For,
			"a waypoint for workloads takes no Service traffic, and the ingress gateway sends only Service traffic to a waypoint, "+
				"so its requests would go straight to the pods, where the ztunnel policy refuses it; use \"service\" or \"all\""))
	}
	return errs
}

func (m *Mesh) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch m.Mode {
	case ModeAmbient, ModeSidecar, ModeNone:
	default:
		errs = append(errs, field.NotSupported(path.Child("mode"), m.Mode, []MeshMode{ModeAmbient, ModeSidecar, ModeNone}))
	}
	errs = append(errs, ValidateTrustDomain(path.Child("trustDomain"), m.TrustDomain)...)
	if m.Revision != "" {
		errs = append(errs, dns1123Label(path.Child("revision"), m.Revision)...)
	}
	wp := path.Child("waypoint")
	errs = append(errs, dns1123Label(wp.Child("name"), m.Waypoint.Name)...)
	if m.Waypoint.Name == "none" {
		// istio.io/use-waypoint=none means "no waypoint", so a waypoint cannot be called that.
		errs = append(errs, field.Invalid(wp.Child("name"), m.Waypoint.Name, `"none" is reserved by Istio to opt out of waypoints`))
	}
	if slices.Contains([]string{"default", "default-editor", "default-viewer"}, m.Waypoint.Name) {
		// The waypoint's ServiceAccount has its name: the guard lets nothing else run as it.
		errs = append(errs, field.Invalid(wp.Child("name"), m.Waypoint.Name, "is a ServiceAccount every Profile's namespace already has (the profiles controller's), which the waypoint's would be"))
	}
	if m.Waypoint.Namespace != "" {
		errs = append(errs, field.Invalid(wp.Child("namespace"), m.Waypoint.Namespace,
			"a shared waypoint is not supported: its owner policy would have to target every Service of every user "+
				"namespace (a Gateway targetRef cannot cross namespaces), and until that is complete traffic would skip the "+
				"owner check; leave it empty for one waypoint per user namespace"))
	}
	errs = append(errs, m.Waypoint.validateSizing(wp)...)
	errs = append(errs, dns1123Label(path.Child("rootNamespace"), m.RootNamespace)...)
	errs = append(errs, dns1123Label(path.Child("istiodNamespace"), m.IstiodNamespace)...)
	errs = append(errs, dns1123Subdomain(path.Child("trustBundleName"), m.TrustBundleName)...)
	errs = append(errs, metavalidation.ValidateLabels(m.Waypoint.Labels, wp.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(m.Waypoint.Annotations, wp.Child("annotations"))...)
	for _, msg := range validation.IsDNS1123Subdomain(m.Waypoint.ClassName) {
		errs = append(errs, field.Invalid(wp.Child("className"), m.Waypoint.ClassName, msg))
	}
	errs = append(errs, m.Waypoint.validateProvision(wp)...)
	switch m.Waypoint.For {
	case "service", "workload", "all":
	case "none":
		errs = append(errs, field.Invalid(wp.Child("for"), m.Waypoint.For,
			`a waypoint for "none" carries no traffic, so its L7 policy would never run`))
	default:
		errs = append(errs, field.NotSupported(wp.Child("for"), m.Waypoint.For, []string{"service", "workload", "all"}))
	}
	return errs
}

func (a *Authorization) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(a.OwnerPolicyName) {
		errs = append(errs, field.Invalid(path.Child("ownerPolicyName"), a.OwnerPolicyName, msg))
	}
	for _, msg := range validation.IsDNS1123Subdomain(a.ZtunnelPolicyName) {
		errs = append(errs, field.Invalid(path.Child("ztunnelPolicyName"), a.ZtunnelPolicyName, msg))
	}
	if a.ZtunnelPolicyName == a.OwnerPolicyName {
		errs = append(errs, field.Invalid(path.Child("ztunnelPolicyName"), a.ZtunnelPolicyName, "must differ from ownerPolicyName"))
	}
	if !httpToken.MatchString(a.UserIDHeader) {
		errs = append(errs, field.Invalid(path.Child("userIdHeader"), a.UserIDHeader, "must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)"))
	}
	if a.UserIDPrefix != "" {
		// The policy compares prefix+user; a prefix without stars at its ends and a user without
		// them make a value without them.
		errs = append(errs, ValidateIdentity(path.Child("userIdPrefix"), a.UserIDPrefix)...)
	}
	pp := path.Child("principals")
	for name, v := range map[string]string{
		"ingressGateway":     a.Principals.IngressGateway,
		"pipelinesUI":        a.Principals.PipelinesUI,
		"notebookController": a.Principals.NotebookController,
		"katibController":    a.Principals.KatibController,
	} {
		errs = append(errs, ValidatePrincipal(pp.Child(name), v)...)
	}
	errs = append(errs, a.validateCallers(path)...)
	switch a.Contributors {
	case ContributorsByKfam, ContributorsByPlugin:
	default:
		errs = append(errs, field.NotSupported(path.Child("contributors"), a.Contributors, []ContributorsSource{ContributorsByKfam, ContributorsByPlugin}))
	}
	if g := a.KfamGracePeriod; g != nil && (g.Duration < 0 || g.Duration > MaxKfamGracePeriod) {
		errs = append(errs, field.Invalid(path.Child("kfamGracePeriod"), g.Duration.String(),
			fmt.Sprintf("must be between 0s and %s", MaxKfamGracePeriod)))
	}
	for i, e := range a.L4Exceptions {
		errs = append(errs, e.validate(path.Child("l4Exceptions").Index(i), a.headerOnlyPrincipals())...)
	}
	errs = append(errs, ipBlocksCoverAFamily(path.Child("l4Exceptions"), a.L4Exceptions)...)
	for i, p := range a.HealthPaths {
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, " \t\r\n*") {
			errs = append(errs, field.Invalid(path.Child("healthPaths").Index(i), p, "must be an absolute path without spaces or wildcards"))
		}
	}
	// field.ErrorList from a map loop would come out in random order.
	sortByField(errs)
	return errs
}

// headerOnly is a principal the owner and contributor policies admit only together with the
// user-id header, because it forwards requests on behalf of any user.
type headerOnly struct {
	who       string // for the message: "the ingress gateway"
	principal string
}

// headerOnlyPrincipals are the principals that must pass the waypoint's header check: the ingress
// gateway and every platform caller on behalf of users, such as the Pipelines UI (which proxies
// artifact reads for whichever user id it is sent).
func (a *Authorization) headerOnlyPrincipals() []headerOnly {
	out := []headerOnly{{"the ingress gateway", a.Principals.IngressGateway}}
	for _, c := range a.PlatformCallers {
		if c.OnBehalfOfUser {
			out = append(out, headerOnly{fmt.Sprintf("platform caller %q", c.Name), c.Principal})
		}
	}
	return out
}

// validate refuses an exception that would let a header-only principal reach pods without the
// waypoint: in ambient mode its requests must pass the owner's header check there, and an L4
// exception admits it with no header check at all, for every user it forwards.
func (e L4Exception) validate(path *field.Path, headerOnly []headerOnly) field.ErrorList {
	var errs field.ErrorList
	set := 0
	for _, l := range [][]string{e.Namespaces, e.Principals, e.ServiceAccounts, e.IPBlocks} {
		if len(l) > 0 {
			set++
		}
	}
	if set != 1 {
		errs = append(errs, field.Invalid(path, fmt.Sprintf("%d sources", set), "set exactly one of namespaces, principals, serviceAccounts or ipBlocks"))
	}
	for i, b := range e.IPBlocks {
		errs = append(errs, validateIPBlock(path.Child("ipBlocks").Index(i), b)...)
	}
	bypass := func(who string) string {
		return "would let " + who + " reach pods directly, skipping the owner's header check at the waypoint (the user-id header), " +
			"for every user it forwards requests for; admit a component that must skip the waypoint by its own principal"
	}
	for i, ns := range e.Namespaces {
		if idErrs := ValidateIdentity(path.Child("namespaces").Index(i), ns); len(idErrs) > 0 {
			errs = append(errs, idErrs...)
			continue
		}
		errs = append(errs, dns1123Label(path.Child("namespaces").Index(i), ns)...)
		for _, h := range headerOnly {
			if _, hNS, _, err := ParsePrincipal(h.principal); err == nil && ns == hNS {
				errs = append(errs, field.Invalid(path.Child("namespaces").Index(i), ns, "the namespace of "+h.who+" "+bypass(h.who)))
			}
		}
	}
	for i, p := range e.Principals {
		errs = append(errs, ValidatePrincipal(path.Child("principals").Index(i), p)...)
		for _, h := range headerOnly {
			if p == h.principal {
				errs = append(errs, field.Invalid(path.Child("principals").Index(i), p, "the principal of "+h.who+" "+bypass(h.who)))
			}
		}
	}
	for i, sa := range e.ServiceAccounts {
		p := path.Child("serviceAccounts").Index(i)
		if idErrs := ValidateIdentity(p, sa); len(idErrs) > 0 {
			errs = append(errs, idErrs...)
			continue
		}
		ns, name, ok := strings.Cut(sa, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			errs = append(errs, field.Invalid(p, sa, "must be <namespace>/<service account>"))
			continue
		}
		if strings.Contains(name, ".") {
			// Envoy matches serviceAccounts with a regular expression built from the name
			// unescaped (istio/istio pilot/pkg/security/authz/model/generator.go,
			// serviceAccountRegex), where '.' matches any character.
			errs = append(errs, field.Invalid(p, sa, "the service account must not contain '.': Istio's proxies read it as \"any character\", so it would also admit look-alike service accounts"))
			continue
		}
		// serviceAccounts match in any trust domain, so the trust domain is not compared.
		for _, h := range headerOnly {
			if _, hNS, hSA, err := ParsePrincipal(h.principal); err == nil && ns == hNS && name == hSA {
				errs = append(errs, field.Invalid(p, sa, "the service account of "+h.who+" "+bypass(h.who)))
			}
		}
	}
	return append(errs, validatePorts(path.Child("ports"), e.Ports)...)
}

func (p *PodSecurity) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, lv := range []struct {
		name string
		v    LevelVersion
	}{{"enforce", p.Enforce}, {"audit", p.Audit}, {"warn", p.Warn}} {
		errs = append(errs, lv.v.Validate(path.Child(lv.name))...)
	}
	switch p.Preflight {
	case PreflightApply, PreflightHold:
	default:
		errs = append(errs, field.NotSupported(path.Child("preflight"), p.Preflight, []PreflightAction{PreflightApply, PreflightHold}))
	}
	for i, o := range p.Overrides {
		op := path.Child("overrides").Index(i)
		errs = append(errs, o.validateMatch(op)...)
		if _, err := psaapi.ParseLevel(string(o.MinimumEnforce)); err != nil {
			errs = append(errs, field.NotSupported(op.Child("minimumEnforce"), o.MinimumEnforce,
				[]psaapi.Level{psaapi.LevelPrivileged, psaapi.LevelBaseline, psaapi.LevelRestricted}))
		}
	}
	return errs
}

// validateMatch accepts an override that matches on namespace labels only. Profile names are
// refused: a user chooses the name at self-registration, so a pattern such as "gpu-*" (or an
// exact name registered before the admin's team does) would hand a looser level to anyone. For the
// same reason the selector may not name a label that follows the Profile rather than the admin
// (see [notSelectable]): one the API server or the profiles controller derives from the Profile's
// name, or one this library itself writes. Nor may it be negative (NotIn, DoesNotExist): it would
// match every namespace the admin did not label, so every Profile registered later.
func (o PodSecurityOverride) validateMatch(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(o.Profiles) > 0 {
		errs = append(errs, field.Invalid(path.Child("profiles"), o.Profiles,
			"overrides cannot match on Profile names: a user chooses the name when registering, so any user could "+
				"pick a matching one and loosen enforce; match the namespace labels the admin sets (namespaceSelector, "+
				"for example with the profiles controller's namespace-labels.yaml or kubectl label) instead"))
	}
	if o.NamespaceSelector == nil {
		if len(o.Profiles) == 0 {
			errs = append(errs, field.Required(path.Child("namespaceSelector"), "set namespaceSelector, or the override matches nothing"))
		}
		return errs
	}
	sel := path.Child("namespaceSelector")
	if _, err := metav1.LabelSelectorAsSelector(o.NamespaceSelector); err != nil {
		errs = append(errs, field.Invalid(sel, o.NamespaceSelector.String(), err.Error()))
	} else if len(o.NamespaceSelector.MatchLabels) == 0 && len(o.NamespaceSelector.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(sel, "{}", "an empty selector matches nothing here; name the admin's label"))
	}
	for _, k := range slices.Sorted(maps.Keys(o.NamespaceSelector.MatchLabels)) {
		if why, refused := notSelectable(k); refused {
			errs = append(errs, field.Invalid(sel.Child("matchLabels").Key(k), k, why))
		}
	}
	// Whatever the operator: NotIn or DoesNotExist on the name selects by name too.
	for i, e := range o.NamespaceSelector.MatchExpressions {
		if why, refused := notSelectable(e.Key); refused {
			errs = append(errs, field.Invalid(sel.Child("matchExpressions").Index(i).Child("key"), e.Key, why))
		}
		if e.Operator == metav1.LabelSelectorOpNotIn || e.Operator == metav1.LabelSelectorOpDoesNotExist {
			errs = append(errs, field.Invalid(sel.Child("matchExpressions").Index(i).Child("operator"), e.Operator,
				"a negative selector matches every namespace the admin has not labelled, which is every namespace a user "+
					"registers from now on; use In or Exists on the admin's own label"))
		}
	}
	return errs
}

// namespaceNameLabel is the label the API server sets on every namespace to its name (since
// Kubernetes 1.22, immutable); a Profile's namespace has the Profile's name.
const namespaceNameLabel = "kubernetes.io/metadata.name"

// ownLabelPrefixes and ownLabels are the namespace label keys the plugins write: pss the Pod
// Security labels, waypoint the data-plane and routing labels. Their values follow the Profile
// (the level it asks for) and the namespace's enrolment (use-waypoint appears once its waypoint is
// Programmed), not a choice the admin made for that namespace.
var (
	// profile-plugins.kubeflow-ambient.io/ holds the waypoint's idle-since label, whose presence
	// follows the namespace's Service endpoints, which its users make.
	ownLabelPrefixes = []string{"pod-security.kubernetes.io/", "profile-plugins.kubeflow-ambient.io/"}
	ownLabels        = []string{
		label.IoIstioDataplaneMode.Name, label.IoIstioUseWaypoint.Name, label.IoIstioIngressUseWaypoint.Name,
		label.IoIstioRev.Name, "istio-injection",
	}
)

// notSelectable says why a namespace label key may not select a Pod Security override, or false
// when it may. Refused are the keys whose value a user who registers a Profile chooses, or that
// follow the Profile rather than the admin:
//   - kubernetes.io/metadata.name ([namespaceNameLabel]): the API server sets it to the
//     namespace's name, which is the Profile's, so whoever registers that name first gets the level;
//   - istio.io/use-waypoint-namespace: the profiles controller in ambient mode sets it to the
//     Profile's name unless it runs with -waypoint-namespace (kubeflow/dashboard
//     components/profile-controller/controllers/profile_controller.go,
//     setNamespaceLabelsAndServiceMesh);
//   - the labels the plugins write (pod-security.kubernetes.io/*, istio.io/dataplane-mode,
//     istio.io/use-waypoint, istio.io/ingress-use-waypoint, istio.io/rev, istio-injection).
//
// The profiles controller derives no other label from the Profile: its other namespace labels
// come, with fixed values, from its namespace-labels.yaml, which is the admin's, and the owner goes
// into the "owner" annotation, which a selector cannot match.
func notSelectable(key string) (string, bool) {
	switch {
	case key == namespaceNameLabel:
		return "the API server sets this label on every namespace to its name, which is the Profile's name, and a user picks that name " +
			"when registering, so whoever registers a matching Profile first gets the looser level; use a label only the admin sets", true
	case key == label.IoIstioUseWaypointNamespace.Name:
		return "the profiles controller in ambient mode sets this label to the Profile's name, which a user picks when registering, " +
			"so the Profile would choose; use a label only the admin sets", true
	case slices.ContainsFunc(ownLabelPrefixes, func(p string) bool { return strings.HasPrefix(key, p) }), slices.Contains(ownLabels, key):
		return "this label is written by the plugins from what the Profile asks for and how far its namespace is enrolled, " +
			"so matching on it lets the Profile choose; use a label only the admin sets", true
	}
	return "", false
}

func (n *Namespaces) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch n.Ownership {
	case OwnershipReferenceOrAnnotation, OwnershipReference:
	default:
		errs = append(errs, field.NotSupported(path.Child("ownership"), n.Ownership,
			[]NamespaceOwnership{OwnershipReferenceOrAnnotation, OwnershipReference}))
	}
	for i, pat := range n.Reserved {
		p := path.Child("reserved").Index(i)
		if _, err := filepath.Match(pat, ""); err != nil || pat == "" {
			errs = append(errs, field.Invalid(p, pat, "must be a namespace name or a shell pattern such as \"team-*\""))
			continue
		}
		// A pattern may hold * ? [ ]; the rest must be what a namespace name may hold.
		if strings.ContainsFunc(pat, func(r rune) bool { return !strings.ContainsRune("abcdefghijklmnopqrstuvwxyz0123456789-*?[]^", r) }) {
			errs = append(errs, field.Invalid(p, pat, "may hold only lowercase letters, digits, '-' and the pattern characters * ? [ ]"))
		}
		if why := badClass(pat); why != "" {
			errs = append(errs, field.Invalid(p, pat, why+": the runner and the guard's regular expression would read it differently, "+
				"or the API server would refuse every policy of the guard"))
		}
	}
	return errs
}

// badClass says what is wrong with the first malformed character class of a shell pattern, or "".
// The runner matches reserved names with path.Match and the guard with an RE2 class written as the
// pattern's, and the two must agree on every name: path.Match accepts a reversed range (matching
// nothing), which RE2 refuses, and stops checking a pattern's syntax once a name fails to match
// after a '*', so `team-*[a-]` passed path.Match's check while RE2 reads "[a-]" as "a or -" (the
// careless-admin reviews of Dec 5). So a class must be '[', an optional '^', then one or more
// characters or ranges lo-hi with lo <= hi, then ']', and no character of it '-', '[' or ']'.
func badClass(pat string) string {
	for i := 0; i < len(pat); i++ {
		switch pat[i] {
		case ']':
			return "a ']' outside a class"
		case '[':
		default:
			continue
		}
		end := strings.IndexByte(pat[i:], ']')
		if end < 0 {
			return "a '[' without its ']'"
		}
		class := strings.TrimPrefix(pat[i+1:i+end], "^")
		if class == "" {
			return "an empty class " + pat[i:i+end+1]
		}
		for j := 0; j < len(class); j++ {
			if strings.IndexByte("-[", class[j]) >= 0 {
				return fmt.Sprintf("the class %s has a %q where a character belongs", pat[i:i+end+1], class[j])
			}
			if j+1 < len(class) && class[j+1] == '-' {
				if j+2 >= len(class) || class[j+2] == '[' || class[j+2] == '-' {
					return fmt.Sprintf("the class %s has a range without its end", pat[i:i+end+1])
				}
				if class[j] > class[j+2] {
					return fmt.Sprintf("the range %q is reversed", class[j:j+3])
				}
				j += 2
			}
		}
		i += end
	}
	return ""
}

// Validate checks a level and version with the Pod Security admission library's own parsers.
func (lv LevelVersion) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := psaapi.ParseLevel(string(lv.Level)); err != nil {
		errs = append(errs, field.NotSupported(path.Child("level"), lv.Level,
			[]psaapi.Level{psaapi.LevelPrivileged, psaapi.LevelBaseline, psaapi.LevelRestricted}))
	}
	if _, err := psaapi.ParseVersion(lv.Version); err != nil {
		errs = append(errs, field.Invalid(path.Child("version"), lv.Version, `must be "latest" or "v1.<minor>"`))
	}
	return errs
}

var (
	httpToken = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
	// trustDomainRE follows SPIFFE: lowercase letters, digits, dots, dashes and underscores.
	trustDomainRE = regexp.MustCompile(`^[a-z0-9._-]+$`)
)

// ValidateTrustDomain checks a SPIFFE trust domain.
func ValidateTrustDomain(path *field.Path, td string) field.ErrorList {
	if td == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	if len(td) > 255 || !trustDomainRE.MatchString(td) {
		return field.ErrorList{field.Invalid(path, td, "must be a SPIFFE trust domain: lowercase letters, digits, '.', '-' and '_'")}
	}
	return nil
}

// ValidatePrincipal checks an Istio principal <trust domain>/ns/<namespace>/sa/<service account>:
// its form ([ParsePrincipal]), then the syntax of each part.
func ValidatePrincipal(path *field.Path, p string) field.ErrorList {
	if errs := ValidateIdentity(path, p); len(errs) > 0 {
		return errs
	}
	td, namespace, sa, err := ParsePrincipal(p)
	if err != nil {
		return field.ErrorList{field.Invalid(path, p, errPrincipalForm.Error())}
	}
	var errs field.ErrorList
	if len(ValidateTrustDomain(path, td)) > 0 {
		errs = append(errs, field.Invalid(path, p, fmt.Sprintf("trust domain %q: lowercase letters, digits, '.', '-' and '_' only", td)))
	}
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path, p, "namespace "+strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Subdomain(sa); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path, p, "service account "+strings.Join(msgs, "; ")))
	}
	return errs
}

// dns1123Subdomain is v checked as an object name (a ConfigMap's).
func dns1123Subdomain(path *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(path, v, msg))
	}
	return errs
}

func dns1123Label(path *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(path, v, msg))
	}
	return errs
}

// validate checks the guard's names: each ServiceAccount is "namespace/name" of two DNS labels
// (a ServiceAccount name may be a subdomain), the group is not empty.
func (g *Guard) validate(path *field.Path, waypointName string) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validServiceAccount(path.Child("controllerServiceAccount"), g.ControllerServiceAccount)...)
	if everyone(g.BreakGlassGroup) {
		errs = append(errs, field.Invalid(path.Child("breakGlassGroup"), g.BreakGlassGroup, "is a group Kubernetes puts users or ServiceAccounts in by themselves, so the guard would trust them all"))
	}
	if strings.TrimSpace(g.BreakGlassGroup) == "" || strings.ContainsAny(g.BreakGlassGroup, "'\\\n") {
		errs = append(errs, field.Invalid(path.Child("breakGlassGroup"), g.BreakGlassGroup, "must be a group name, without quotes, backslashes or line breaks"))
	}
	for i, sa := range g.MeshServiceAccounts {
		errs = append(errs, validServiceAccount(path.Child("meshServiceAccounts").Index(i), sa)...)
	}
	for i, sa := range g.PolicyWriters {
		errs = append(errs, validServiceAccount(path.Child("policyWriters").Index(i), sa)...)
	}
	if sa := g.KatibController(); sa != "" {
		errs = append(errs, validServiceAccount(path.Child("katibControllerServiceAccount"), sa)...)
	}
	for i, o := range g.MeshConfigAllowed {
		p := path.Child("meshConfigAllowed").Index(i)
		if !slices.Contains(MeshConfigKinds(), o.Kind) {
			errs = append(errs, field.NotSupported(p.Child("kind"), o.Kind, MeshConfigKinds()))
		}
		for _, m := range validation.IsDNS1123Subdomain(o.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), o.Name, m))
		}
		if o.Kind == "Gateway" && o.Name == waypointName {
			errs = append(errs, field.Invalid(p.Child("name"), o.Name, "is the waypoint's name, which only the plugins' Gateway has"))
		}
	}
	for i, o := range g.OptOutAllowed {
		p := path.Child("optOutAllowed").Index(i)
		errs = append(errs, validServiceAccount(p, o.Namespace+"/"+o.ServiceAccount)...)
	}
	return errs
}

// everyone is whether group is one of the groups the API server gives whole classes of users
// (k8s.io/apiserver pkg/authentication/user: system:authenticated, system:unauthenticated,
// system:serviceaccounts, system:serviceaccounts:<namespace>).
func everyone(group string) bool {
	return slices.Contains([]string{"system:authenticated", "system:unauthenticated", "system:serviceaccounts"}, group) ||
		strings.HasPrefix(group, "system:serviceaccounts:")
}

// MeshConfigKinds are the kinds guard.meshConfigAllowed may name: what the guard refuses in the
// managed namespaces unless allowed.
func MeshConfigKinds() []string {
	return []string{"AuthorizationPolicy", "EnvoyFilter", "Gateway", "PeerAuthentication", "ProxyConfig", "ServiceEntry", "Sidecar", "WasmPlugin", "WorkloadEntry", "WorkloadGroup"}
}

// validServiceAccount checks a "namespace/name" ServiceAccount reference.
func validServiceAccount(path *field.Path, ref string) field.ErrorList {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return field.ErrorList{field.Invalid(path, ref, "must be namespace/name")}
	}
	var errs field.ErrorList
	for _, m := range validation.IsDNS1123Label(ns) {
		errs = append(errs, field.Invalid(path, ref, "namespace: "+m))
	}
	for _, m := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(path, ref, "name: "+m))
	}
	return errs
}
