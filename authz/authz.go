package authz

import (
	"fmt"
	"slices"
	"strconv"

	"istio.io/api/annotation"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
)

// Annotations the profiles controller and kfam put on their policies; the dashboard reads them.
const (
	UserAnnotation = "user"
	RoleAnnotation = "role"
	// RoleAdmin is the owner's role.
	RoleAdmin = "admin"
)

// newPolicy returns an empty ALLOW policy with the typed metadata every generator uses. It states
// istio.io/dry-run "false": istiod enforces no policy marked "true" (istio/istio
// pilot/pkg/serviceregistry/ambient/authorization.go, convertAuthorizationPolicy, sends it to no
// ztunnel; pilot/pkg/security/authz/builder/builder.go, isDryRun, makes it shadow rules in
// proxies), so the value is part of the desired state: another writer's "true" is drift, restored
// and reported.
func newPolicy(name, namespace string, annotations map[string]string) *istiosecurityv1.AuthorizationPolicy {
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[annotation.IoIstioDryRun.Name] = "false"
	return &istiosecurityv1.AuthorizationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: istiosecurityv1.SchemeGroupVersion.String(), Kind: "AuthorizationPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: annotations},
		Spec:       securityv1beta1.AuthorizationPolicy{Action: securityv1beta1.AuthorizationPolicy_ALLOW},
	}
}

// headerCondition matches the user-id header the ingress sets after authentication.
func headerCondition(cfg *config.Config, user string) *securityv1beta1.Condition {
	return &securityv1beta1.Condition{
		Key:    "request.headers[" + cfg.Authorization.UserIDHeader + "]",
		Values: []string{cfg.Authorization.UserIDPrefix + user},
	}
}

// onBehalfOfUser is the rule of both owner and contributor policies: the ingress gateway or a
// platform caller on behalf of users (the Pipelines UI by default) forwards a request whose
// user-id header names user.
func onBehalfOfUser(cfg *config.Config, user string) *securityv1beta1.Rule {
	principals := []string{cfg.Authorization.Principals.IngressGateway}
	for _, c := range cfg.Authorization.PlatformCallers {
		if c.OnBehalfOfUser && !slices.Contains(principals, c.Principal) {
			principals = append(principals, c.Principal)
		}
	}
	return &securityv1beta1.Rule{
		From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{Principals: principals}}},
		When: []*securityv1beta1.Condition{headerCondition(cfg, user)},
	}
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

// OwnerPolicy is the owner's policy, ns-owner-access-istio by default. In ambient mode it is
// attached to the waypoint; in sidecar mode it applies to every pod of the namespace.
func OwnerPolicy(cfg *config.Config, namespace, owner string) (*istiosecurityv1.AuthorizationPolicy, error) {
	if errs := validateUser(cfg, field.NewPath("spec", "owner", "name"), owner); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	pol := OwnerlessPolicy(cfg, namespace)
	pol.Annotations[UserAnnotation] = owner
	pol.Spec.Rules = append([]*securityv1beta1.Rule{onBehalfOfUser(cfg, owner)}, pol.Spec.Rules...)
	return pol, nil
}

// OwnerlessPolicy is the owner policy without the owner's rule: what the namespace keeps while
// its Profile names an owner the policy cannot carry. It still attaches to the waypoint and
// admits the namespace itself and the platform's callers, so the namespace stays protected and
// working for its pods; no user reaches it until the Profile's owner is valid again. Keeping the
// previous owner's rule instead would leave access with someone the Profile no longer names.
func OwnerlessPolicy(cfg *config.Config, namespace string) *istiosecurityv1.AuthorizationPolicy {
	a := cfg.Authorization
	pol := newPolicy(a.OwnerPolicyName, namespace, map[string]string{RoleAnnotation: RoleAdmin})
	rules := []*securityv1beta1.Rule{
		{When: []*securityv1beta1.Condition{{Key: "source.namespace", Values: []string{namespace}}}},
	}
	if len(a.HealthPaths) > 0 {
		rules = append(rules, &securityv1beta1.Rule{To: []*securityv1beta1.Rule_To{{Operation: &securityv1beta1.Operation{Paths: a.HealthPaths}}}})
	}
	for _, c := range a.PlatformCallers {
		if !c.OnBehalfOfUser {
			rules = append(rules, callerRule(c))
		}
	}
	pol.Spec.Rules = rules
	if cfg.Mesh.Mode == config.ModeAmbient {
		pol.Spec.TargetRefs = []*typev1beta1.PolicyTargetReference{GatewayTarget(cfg.Mesh.Waypoint.Name)}
	}
	return pol
}

// ZtunnelPolicy is the ambient namespace's L4 policy: it admits the waypoint, the namespace itself,
// the platform callers that run sidecars and the configured exceptions, and through being an
// ALLOW policy denies everything else.
func ZtunnelPolicy(cfg *config.Config, namespace string) *istiosecurityv1.AuthorizationPolicy {
	a := cfg.Authorization
	pol := newPolicy(a.ZtunnelPolicyName, namespace, nil)
	pol.Spec.Rules = []*securityv1beta1.Rule{
		// serviceAccounts matches in any trust domain; separate from namespaces, as Istio requires.
		{From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{ServiceAccounts: []string{namespace + "/" + cfg.Mesh.Waypoint.Name}}}}},
		{From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{Namespaces: []string{namespace}}}}},
	}
	for _, c := range sidecarCallers(cfg) {
		pol.Spec.Rules = append(pol.Spec.Rules, l4Rule(&securityv1beta1.Source{Principals: []string{c.Principal}}, c.Ports))
	}
	for _, e := range a.L4Exceptions {
		// ztunnel matches ipBlocks against the connection's source address (istio/istio
		// pilot/pkg/serviceregistry/ambient/authorization.go makes them SourceIps); it has no
		// remoteIpBlocks, which would be an L7 attribute and drop the rule.
		src := &securityv1beta1.Source{Namespaces: e.Namespaces, Principals: e.Principals, ServiceAccounts: e.ServiceAccounts, IpBlocks: e.IPBlocks}
		pol.Spec.Rules = append(pol.Spec.Rules, l4Rule(src, e.Ports))
	}
	return pol
}

// l4Rule admits src on ports (every port when empty).
func l4Rule(src *securityv1beta1.Source, ports []int32) *securityv1beta1.Rule {
	r := &securityv1beta1.Rule{From: []*securityv1beta1.Rule_From{{Source: src}}}
	if len(ports) > 0 {
		r.To = []*securityv1beta1.Rule_To{{Operation: &securityv1beta1.Operation{Ports: portStrings(ports)}}}
	}
	return r
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
