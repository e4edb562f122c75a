package guard

import (
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// Asset is something a managed namespace's protection rests on. Every check protects one; the
// trust model (docs/security/threat-model.md) says who can reach each and how.
type Asset string

// The assets, in the order the trust model lists them.
const (
	// AssetWaypointWorkload is the code that runs as the waypoint: istiod's Deployment, its
	// ReplicaSets and pods, the Service and endpoints that send traffic to them, their autoscaler
	// and disruption budget. The owner's L7 decision runs there.
	AssetWaypointWorkload Asset = "waypoint-workload"
	// AssetWaypointIdentity is the waypoint's ServiceAccount: the identity the ztunnel policy
	// admits, which istiod's CA certifies for whoever presents a token of it.
	AssetWaypointIdentity Asset = "waypoint-identity"
	// AssetPluginObjects are the objects the plugins write: the ztunnel, owner and contributor
	// policies, the waypoint Gateway and its ConfigMap, and the names and labels that mark them.
	AssetPluginObjects Asset = "plugin-objects"
	// AssetNamespaceLabels are a managed namespace's enrolment, mesh and Pod Security labels and
	// the owner annotation that makes it managed.
	AssetNamespaceLabels Asset = "namespace-labels"
	// AssetPodCapture is every pod's capture by the mesh: ztunnel's (ambient) or its sidecar's.
	AssetPodCapture Asset = "pod-capture"
	// AssetWaypointRouting is that a namespace's traffic goes through its own waypoint only.
	AssetWaypointRouting Asset = "waypoint-routing"
	// AssetServiceMembership is which pods Istio counts as a Service of the namespace.
	AssetServiceMembership Asset = "service-membership"
	// AssetAccess is who the namespace admits: the owner's and contributors' policies, and no
	// other ALLOW policy.
	AssetAccess Asset = "access"
	// AssetUserIdentity is the user-id header the owner and contributor policies decide on.
	AssetUserIdentity Asset = "user-identity"
	// AssetServiceAccountTokens are the tokens of a namespace's ServiceAccounts: whoever holds one
	// acts with the ServiceAccount's roles and, in the mesh, as the namespace.
	AssetServiceAccountTokens Asset = "service-account-tokens"
)

// assetWords say what each asset is, as the platform check reports an unguarded one.
var assetWords = map[Asset]string{
	AssetWaypointWorkload:     "the waypoint's workload (its Deployment, pods, Service, endpoints)",
	AssetWaypointIdentity:     "the waypoint's identity (its ServiceAccount, tokens, the pods that run as it)",
	AssetPluginObjects:        "the plugins' policies, waypoint Gateway and ConfigMap",
	AssetNamespaceLabels:      "a user namespace's mesh and Pod Security labels and owner annotation",
	AssetPodCapture:           "every pod's capture by the mesh",
	AssetWaypointRouting:      "routing through the namespace's own waypoint",
	AssetServiceMembership:    "which pods Istio counts as the namespace's Services'",
	AssetAccess:               "who the namespace admits (ALLOW policies beside the owner's and contributors')",
	AssetUserIdentity:         "the user-id header the namespace's policies decide on",
	AssetServiceAccountTokens: "the tokens of the namespace's ServiceAccounts, which must end with the pods or members they were made for",
}

// String says what the asset is, in words.
func (a Asset) String() string {
	if w, ok := assetWords[a]; ok {
		return w
	}
	return string(a)
}

// Assets are every asset, in the trust model's order.
func Assets() []Asset {
	return []Asset{AssetWaypointWorkload, AssetWaypointIdentity, AssetPluginObjects, AssetNamespaceLabels,
		AssetPodCapture, AssetWaypointRouting, AssetServiceMembership, AssetAccess, AssetUserIdentity, AssetServiceAccountTokens}
}

// Check is one rule of the guard: what it protects, where it applies, what it rests on, and the
// CEL that refuses. Its ID opens every refusal message, so a user's error names the rule an admin
// looks up in docs/security/checks.md.
type Check struct {
	// ID names the check, "<policy's short name>/<what>", unique.
	ID string
	// Asset is what the check protects.
	Asset Asset
	// Policy is the ValidatingAdmissionPolicy that holds the check.
	Policy string
	// Modes are the mesh modes the check applies in; empty means every mode.
	Modes []config.MeshMode
	// Passes says who, besides the guard's trusted writers (see the package doc), passes it.
	Passes string
	// Source is the upstream code (or the reasoning) the check rests on.
	Source string
	// Expression is the CEL that admits the request (true) or refuses it (false).
	Expression string
	// Message says what is refused, for clients that cannot show MessageExpression.
	Message string
	// MessageExpression says, in CEL, which object was refused, why, and what to do.
	MessageExpression string
}

// validation is the check as a policy's validation, its ID opening both messages.
func (c Check) validation() admissionv1.Validation {
	v := admissionv1.Validation{Expression: c.Expression, Message: "[" + c.ID + "] " + c.Message}
	if c.MessageExpression != "" {
		v.MessageExpression = quote("["+c.ID+"] ") + " + " + c.MessageExpression
	}
	return v
}

// policySpec is a policy without its checks: what it matches, whom it trusts, its variables.
type policySpec struct {
	name      string
	managed   string // CEL: whether the request's namespace is managed (variables.managed)
	rules     []admissionv1.NamedRuleWithOperations
	vars      []admissionv1.Variable
	untrusted string // the match condition: true for the requests the policy judges
	checks    []Check
}

// specs are every policy of the guard for the builder's configuration, checks included, in the
// order Objects renders them.
func (b builder) specs() []policySpec {
	return []policySpec{
		b.managedObjects(), b.namespaceLabels(), b.waypointWorkload(), b.meshConfig(), b.pods(), b.workloads(), b.cronJobs(),
		b.services(), b.bindings(), b.kubeflow(), b.tokens(),
	}
}

// Checks are the guard's checks for cfg, each with the policy that holds it. cfg must be
// defaulted and valid.
func Checks(cfg *config.Config) ([]Check, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	var out []Check
	for _, s := range (builder{cfg: cfg}).specs() {
		out = append(out, s.checks...)
	}
	return out, nil
}

// Protects says what the named policy protects, from its checks' assets: the platform check's
// words for a policy that is missing.
func Protects(cfg *config.Config, policy string) []Asset {
	checks, err := Checks(cfg)
	if err != nil {
		return nil
	}
	var out []Asset
	for _, c := range checks {
		if c.Policy == policy && !slices.Contains(out, c.Asset) {
			out = append(out, c.Asset)
		}
	}
	return out
}

// add adds c to the policy, its ID prefixed with the policy's short name.
func (s *policySpec) add(c Check) {
	c.Policy = s.name
	if !strings.HasPrefix(c.ID, shortName(s.name)+"/") {
		c.ID = shortName(s.name) + "/" + c.ID
	}
	s.checks = append(s.checks, c)
}

// addAll adds each check.
func (s *policySpec) addAll(cs []Check) {
	for _, c := range cs {
		s.add(c)
	}
}

// inModes is the checks, each applying only in mode.
func inModes(mode config.MeshMode, cs ...Check) []Check {
	for i := range cs {
		cs[i].Modes = []config.MeshMode{mode}
	}
	return cs
}

// shortName is a policy's name without the guard's prefix.
func shortName(policy string) string { return strings.TrimPrefix(policy, "profile-plugins-guard-") }
