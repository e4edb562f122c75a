package authz

import (
	"fmt"
	"slices"
	"strconv"

	"istio.io/api/annotation"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// Annotations the profiles controller and kfam put on their policies; the dashboard reads them.
const (
	UserAnnotation = "user"
	RoleAnnotation = "role"
	// RoleAdmin is the owner's role.
	RoleAdmin = "admin"
)

// policyAPIVersion is every policy's apiVersion, formatted once.
var policyAPIVersion = istiosecurityv1.SchemeGroupVersion.String()

// newPolicy returns an empty ALLOW policy with the typed metadata every generator uses. It states
// istio.io/dry-run "false": istiod enforces no policy marked "true" (istio/istio
// pilot/pkg/serviceregistry/ambient/authorization.go, convertAuthorizationPolicy, sends it to no
// ztunnel; pilot/pkg/security/authz/builder/builder.go, isDryRun, makes it shadow rules in
// proxies), so the value is part of the desired state: another writer's "true" is drift, restored
// and reported.
//
// It carries no istio.io/rev, with or without mesh.revision, on purpose: istiod reads a policy
// with that label only if the value is exactly its own revision, never a tag, and one without it
// in every revision (istio/istio pkg/config/model.go, LabelsInRevision, the informer filter of
// pilot/pkg/config/kube/crdclient/client.go and pilot/pkg/serviceregistry/ambient/ambientindex.go).
// Labelled, the ztunnel policy would vanish from ztunnel whenever ztunnel's istiod is another
// revision (ztunnel is upgraded on its own), and the policies of a namespace that moves to a new
// revision would vanish from the pods still on the old one until they restart; mesh.revision may
// also be a tag, which no istiod matches. Global, every revision enforces them. An istio.io/rev
// another writer sets is drift like any key of Istio's domain.
func newPolicy(name, namespace string, annotations map[string]string) *policyParts {
	annotations[annotation.IoIstioDryRun.Name] = "false"
	p := &policyParts{}
	p.policy.TypeMeta = metav1.TypeMeta{APIVersion: policyAPIVersion, Kind: "AuthorizationPolicy"}
	p.policy.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: annotations}
	p.policy.Spec.Action = securityv1beta1.AuthorizationPolicy_ALLOW
	return p
}

// builder makes the policies of one configuration. It keeps what they all have in common, worked
// out once (in New, for the plugin): strings, which nobody can change, and counts. Lists are
// copied into each policy (see policyParts), never shared.
type builder struct {
	cfg *config.Config
	// headerKey is the key of the user-id header's condition.
	headerKey string
	// forwarders may call in on behalf of a user: the ingress gateway and every platform caller
	// on behalf of users (the Pipelines UI by default).
	forwarders []string
	// ownCallers act on their own behalf: each has a rule in the owner policy (see callerRule).
	ownCallers []config.PlatformCaller
	// sidecarCallers have a rule in the ztunnel policy (see sidecarCallers).
	sidecarCallers []config.PlatformCaller
	// What the rules of each policy hold: the user's rule (see onBehalfOfUser), the owner
	// policy's other rules, the ztunnel policy's.
	userRule, ownerRules, ztunnelRules sizes
}

func newBuilder(cfg *config.Config) *builder {
	a := cfg.Authorization
	b := &builder{cfg: cfg, headerKey: headerKey(cfg), forwarders: []string{a.Principals.IngressGateway}, sidecarCallers: sidecarCallers(cfg)}
	b.ownerRules = sizes{rules: 1, conditions: 1, strings: 1} // the namespace itself
	if len(a.HealthPaths) > 0 {
		b.ownerRules = b.ownerRules.plus(sizes{rules: 1, operations: 1, strings: len(a.HealthPaths)})
	}
	for _, c := range a.PlatformCallers {
		if c.OnBehalfOfUser {
			if !slices.Contains(b.forwarders, c.Principal) {
				b.forwarders = append(b.forwarders, c.Principal)
			}
			continue
		}
		b.ownCallers = append(b.ownCallers, c)
		b.ownerRules = b.ownerRules.plus(callerRuleSizes(c))
	}
	b.userRule = sizes{rules: 1, sources: 1, conditions: 1, strings: len(b.forwarders) + 1}
	b.ztunnelRules = sizes{rules: 2, sources: 2, strings: 2} // the waypoint and the namespace itself
	for _, c := range b.sidecarCallers {
		b.ztunnelRules = b.ztunnelRules.plus(sizes{rules: 1, sources: 1, operations: oneIf(len(c.Ports) > 0), strings: 1 + len(c.Ports)})
	}
	for _, e := range a.L4Exceptions {
		b.ztunnelRules = b.ztunnelRules.plus(sizes{rules: 1, sources: 1, operations: oneIf(len(e.Ports) > 0),
			strings: len(e.Namespaces) + len(e.Principals) + len(e.ServiceAccounts) + len(e.IPBlocks) + len(e.Ports)})
	}
	return b
}

func oneIf(b bool) int {
	if b {
		return 1
	}
	return 0
}

// headerKey is the condition key of the user-id header the ingress sets after authentication.
func headerKey(cfg *config.Config) string {
	return "request.headers[" + cfg.Authorization.UserIDHeader + "]"
}

// onBehalfOfUser is the rule of both owner and contributor policies: the ingress gateway or a
// platform caller on behalf of users (the Pipelines UI by default) forwards a request whose
// user-id header names user. It takes b.userRule.
func (b *builder) onBehalfOfUser(rules *rulesBuilder, user string) {
	r := rules.next()
	rules.source(r).Principals = rules.list(b.forwarders...)
	rules.condition(r, b.headerKey, rules.list(b.cfg.Authorization.UserIDPrefix+user))
}

func portStrings(ports []int32) []string {
	if len(ports) == 0 {
		return nil
	}
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = strconv.Itoa(int(p))
	}
	return out
}

// ownerNamePath is where a Profile names its owner; a field.Path is never changed once made.
var ownerNamePath = field.NewPath("spec", "owner", "name")

// OwnerPolicy is the owner's policy, ns-owner-access-istio by default. In ambient mode it is
// attached to the waypoint; in sidecar mode it applies to every pod of the namespace.
func OwnerPolicy(cfg *config.Config, namespace, owner string) (*istiosecurityv1.AuthorizationPolicy, error) {
	return newBuilder(cfg).ownerPolicy(namespace, owner)
}

func (b *builder) ownerPolicy(namespace, owner string) (*istiosecurityv1.AuthorizationPolicy, error) {
	if errs := validateUser(b.cfg, ownerNamePath, owner); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return b.policyForOwner(namespace, owner), nil
}

// OwnerlessPolicy is the owner policy without the owner's rule: what the namespace keeps while
// its Profile names an owner the policy cannot carry. It still attaches to the waypoint and
// admits the namespace itself and the platform's callers, so the namespace stays protected and
// working for its pods; no user reaches it until the Profile's owner is valid again. Keeping the
// previous owner's rule instead would leave access with someone the Profile no longer names.
func OwnerlessPolicy(cfg *config.Config, namespace string) *istiosecurityv1.AuthorizationPolicy {
	return newBuilder(cfg).policyForOwner(namespace, "")
}

// policyForOwner is the owner policy with the rule of a validated owner first, or without any
// user's rule when owner is "" (which no valid owner is).
func (b *builder) policyForOwner(namespace, owner string) *istiosecurityv1.AuthorizationPolicy {
	a := b.cfg.Authorization
	annotations := map[string]string{RoleAnnotation: RoleAdmin}
	n := b.ownerRules
	if owner != "" {
		annotations[UserAnnotation] = owner
		n = n.plus(b.userRule)
	}
	p := newPolicy(a.OwnerPolicyName, namespace, annotations)
	rules := newRules(n)
	if owner != "" {
		b.onBehalfOfUser(&rules, owner)
	}
	rules.condition(rules.next(), "source.namespace", rules.list(namespace))
	if len(a.HealthPaths) > 0 {
		rules.operation(rules.next()).Paths = rules.list(a.HealthPaths...)
	}
	for _, c := range b.ownCallers {
		callerRule(&rules, c)
	}
	p.policy.Spec.Rules = rules.rules
	if b.cfg.Mesh.Mode == config.ModeAmbient {
		p.targetGateway(b.cfg.Mesh.Waypoint.Name)
	}
	return &p.policy
}

// ZtunnelPolicy is the ambient namespace's L4 policy: it admits the waypoint, the namespace itself,
// the platform callers that run sidecars and the configured exceptions, and through being an
// ALLOW policy denies everything else.
func ZtunnelPolicy(cfg *config.Config, namespace string) *istiosecurityv1.AuthorizationPolicy {
	return newBuilder(cfg).ztunnelPolicy(namespace)
}

func (b *builder) ztunnelPolicy(namespace string) *istiosecurityv1.AuthorizationPolicy {
	a := b.cfg.Authorization
	p := newPolicy(a.ZtunnelPolicyName, namespace, make(map[string]string, 1))
	rules := newRules(b.ztunnelRules)
	// serviceAccounts matches in any trust domain; separate from namespaces, as Istio requires.
	rules.source(rules.next()).ServiceAccounts = rules.list(namespace + "/" + b.cfg.Mesh.Waypoint.Name)
	rules.source(rules.next()).Namespaces = rules.list(namespace)
	for _, c := range b.sidecarCallers {
		r := rules.next()
		rules.source(r).Principals = rules.list(c.Principal)
		rules.onPorts(r, c.Ports)
	}
	for _, e := range a.L4Exceptions {
		// ztunnel matches ipBlocks against the connection's source address (istio/istio
		// pilot/pkg/serviceregistry/ambient/authorization.go makes them SourceIps); it has no
		// remoteIpBlocks, which would be an L7 attribute and drop the rule.
		r := rules.next()
		src := rules.source(r)
		src.Namespaces, src.Principals = rules.list(e.Namespaces...), rules.list(e.Principals...)
		src.ServiceAccounts, src.IpBlocks = rules.list(e.ServiceAccounts...), rules.list(e.IPBlocks...)
		rules.onPorts(r, e.Ports)
	}
	p.policy.Spec.Rules = rules.rules
	return &p.policy
}

// validateUser checks a user id with config.ValidateIdentity, and then the value the policy
// compares, userIdPrefix+user: a configuration that skipped Validate could have a prefix "*", and
// "*" + "bob" is a suffix match. Only the user id's own length is bounded.
func validateUser(cfg *config.Config, path *field.Path, user string) field.ErrorList {
	if errs := config.ValidateIdentity(path, user); len(errs) > 0 {
		return errs
	}
	prefix := cfg.Authorization.UserIDPrefix
	if prefix == "" {
		return nil
	}
	var errs field.ErrorList
	for _, e := range config.ValidateIdentity(path, prefix+user) {
		if e.Type != field.ErrorTypeTooLong {
			errs = append(errs, field.Invalid(path, user, fmt.Sprintf("with authorization.userIdPrefix %q the policy would compare %q: %s", prefix, prefix+user, e.Detail)))
		}
	}
	return errs
}
