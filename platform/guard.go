package platform

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// This file checks the cluster-wide objects `render -cluster` emits that protect every user
// namespace: the admission guard (package guard) and, in ambient mode, the waypoints' default deny.

// WhatGuard names the admission guard in a Finding; Policy names its policy.
const WhatGuard = "guard"

// renderHint is how an admin makes the cluster-wide objects.
const renderHint = "profile-plugins render -cluster -config <your PluginConfig> | kubectl apply -f -"

// checkGuard reads each of the guard's policies and every binding: a policy missing, bound by no
// binding that denies, or bound to fewer namespaces than the managed ones (a binding that selects
// namespaces or objects, or a policy that recognises managed namespaces by something else than
// the owner annotation), or another than cfg renders (deploy/guard, the default ambient
// rendering, under a sidecar PluginConfig; a guard not rendered again after a change) is a finding. A cluster that serves no ValidatingAdmissionPolicy
// (Kubernetes before 1.30) has none of them.
func checkGuard(ctx context.Context, r client.Reader, cfg *config.Config) ([]Finding, error) {
	bindings := &admissionv1.ValidatingAdmissionPolicyBindingList{}
	if err := r.List(ctx, bindings); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return []Finding{{Kind: FindingGuardMissing, What: WhatGuard,
				Problem: "the API server serves no ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1, Kubernetes 1.30 and later): nothing prevents the changes the runner only repairs, " +
					"or pods opting out of the mesh, which it cannot repair",
				Fix: "upgrade the cluster to Kubernetes 1.30 or later, then apply the guard: " + renderHint}}, nil
		}
		return nil, fmt.Errorf("listing ValidatingAdmissionPolicyBindings: %w", err)
	}
	rendered := renderedPolicies(cfg)
	bound := map[string][]admissionv1.ValidatingAdmissionPolicyBinding{}
	for _, b := range bindings.Items {
		bound[b.Spec.PolicyName] = append(bound[b.Spec.PolicyName], b)
	}
	var out []Finding
	for _, name := range guard.Names() {
		p := &admissionv1.ValidatingAdmissionPolicy{}
		err := r.Get(ctx, client.ObjectKey{Name: name}, p)
		if apierrors.IsNotFound(err) {
			out = append(out, Finding{Kind: FindingGuardMissing, What: WhatGuard, Policy: name,
				Problem: "the admission guard's policy " + name + " does not exist, so nothing prevents " + guardedBy(cfg, name) + " (the runner repairs what it can only at its next reconcile, and a pod that opts out not at all)",
				Fix:     "apply the guard: " + renderHint})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading ValidatingAdmissionPolicy %s: %w", name, err)
		}
		if f, bad := judgeBindings(cfg, name, bound[name]); bad {
			out = append(out, f)
			continue
		}
		if !recognisesManaged(p) {
			out = append(out, Finding{Kind: FindingGuardMisbound, What: WhatGuard, Policy: name,
				Problem: "policy " + name + " does not recognise the managed namespaces by their " + ownership.OwnerAnnotation + " annotation, as profile-plugins renders it: it may leave managed namespaces unguarded",
				Fix:     "apply the guard as rendered: " + renderHint})
			continue
		}
		if diff := policyDiff(p, rendered[name]); len(diff) > 0 {
			out = append(out, Finding{Kind: FindingGuardStale, What: WhatGuard, Policy: name,
				Problem: fmt.Sprintf("policy %s is not the one this PluginConfig renders (%s differ): it was rendered from another configuration "+
					"(mesh.mode, the guard's identities, the reserved namespaces) or version, so it may admit what this one forbids, or refuse the controller's or istiod's writes",
					name, strings.Join(diff, ", ")),
				Fix: "render the guard from this PluginConfig and apply it again: " + renderHint})
		}
	}
	return out, nil
}

// renderedPolicies are the guard's policies as cfg renders them, by name; none when cfg is one
// Validate refuses (guard.Objects validates it), which no controller runs with: then there is
// nothing to compare with, and the rest of the check still says what it can.
func renderedPolicies(cfg *config.Config) map[string]*admissionv1.ValidatingAdmissionPolicy {
	objs, err := guard.Objects(cfg)
	if err != nil {
		return nil
	}
	out := map[string]*admissionv1.ValidatingAdmissionPolicy{}
	for _, o := range objs {
		if p, ok := o.(*admissionv1.ValidatingAdmissionPolicy); ok {
			out[p.Name] = p
		}
	}
	return out
}

// judgedPolicy is what of a policy's spec the check compares: what the API server keeps as
// written, with its defaults applied alike to both sides (a rule's scope "*", failurePolicy Fail,
// matchPolicy Equivalent, an empty selector for none). The whole of matchConstraints counts: an
// exclusion or a selector there narrows the policy as much as a binding's would (the
// careless-admin re-review of Dec 5).
type judgedPolicy struct {
	Validations          []admissionv1.Validation              `json:"spec.validations"`
	Variables            []admissionv1.Variable                `json:"spec.variables"`
	MatchConditions      []admissionv1.MatchCondition          `json:"spec.matchConditions"`
	ResourceRules        []admissionv1.NamedRuleWithOperations `json:"spec.matchConstraints.resourceRules"`
	ExcludeResourceRules []admissionv1.NamedRuleWithOperations `json:"spec.matchConstraints.excludeResourceRules"`
	NamespaceSelector    string                                `json:"spec.matchConstraints.namespaceSelector"`
	ObjectSelector       string                                `json:"spec.matchConstraints.objectSelector"`
	MatchPolicy          admissionv1.MatchPolicyType           `json:"spec.matchConstraints.matchPolicy"`
	ParamKind            *admissionv1.ParamKind                `json:"spec.paramKind"`
	AuditAnnotations     []admissionv1.AuditAnnotation         `json:"spec.auditAnnotations"`
	FailurePolicy        admissionv1.FailurePolicyType         `json:"spec.failurePolicy"`
}

// policyDiff names the fields in which the installed policy differs from the rendered one.
func policyDiff(installed, rendered *admissionv1.ValidatingAdmissionPolicy) []string {
	if rendered == nil {
		return nil
	}
	return fieldsDiff(judged(installed.Spec), judged(rendered.Spec))
}

func judged(s admissionv1.ValidatingAdmissionPolicySpec) judgedPolicy {
	j := judgedPolicy{Validations: s.Validations, Variables: s.Variables, MatchConditions: s.MatchConditions, FailurePolicy: admissionv1.Fail,
		ParamKind: s.ParamKind, AuditAnnotations: s.AuditAnnotations, MatchPolicy: admissionv1.Equivalent}
	if s.FailurePolicy != nil {
		j.FailurePolicy = *s.FailurePolicy
	}
	m := s.MatchConstraints
	if m == nil {
		return j
	}
	j.ResourceRules, j.ExcludeResourceRules = scoped(m.ResourceRules), scoped(m.ExcludeResourceRules)
	j.NamespaceSelector, j.ObjectSelector = selectorString(m.NamespaceSelector), selectorString(m.ObjectSelector)
	if m.MatchPolicy != nil {
		j.MatchPolicy = *m.MatchPolicy
	}
	return j
}

// scoped is rules with the API server's default scope "*" where none is set.
func scoped(rules []admissionv1.NamedRuleWithOperations) []admissionv1.NamedRuleWithOperations {
	var out []admissionv1.NamedRuleWithOperations
	for _, r := range rules {
		if r.Scope == nil {
			r.Scope = ptr.To(admissionv1.AllScopes)
		}
		out = append(out, r)
	}
	return out
}

// selectorString is a label selector as the selector it means: "" for none or the empty one.
func selectorString(s *metav1.LabelSelector) string {
	if s == nil {
		return ""
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return "invalid: " + err.Error()
	}
	return sel.String()
}

// judgeBindings says what is wrong with how the policy is bound, if anything: it must have a
// binding that denies and selects neither namespaces nor objects.
func judgeBindings(cfg *config.Config, name string, bs []admissionv1.ValidatingAdmissionPolicyBinding) (Finding, bool) {
	f := Finding{What: WhatGuard, Policy: name, Fix: "apply the guard's binding as rendered, which denies in every namespace and leaves the choice of the managed ones to the policy: " + renderHint}
	var narrowed []string
	for _, b := range bs {
		if !denies(b) {
			continue
		}
		if why := narrows(b.Spec.MatchResources); why != "" {
			narrowed = append(narrowed, b.Name+" ("+why+")")
			continue
		}
		return Finding{}, false
	}
	if len(narrowed) > 0 {
		f.Kind = FindingGuardMisbound
		f.Problem = "policy " + name + " is bound only to some namespaces or objects, by " + strings.Join(narrowed, ", ") + ": managed namespaces outside that choice are unguarded"
		return f, true
	}
	f.Kind = FindingGuardUnbound
	f.Problem = "policy " + name + " exists but no binding with validationActions Deny binds it: it refuses nothing, so nothing prevents " + guardedBy(cfg, name)
	return f, true
}

func denies(b admissionv1.ValidatingAdmissionPolicyBinding) bool {
	for _, a := range b.Spec.ValidationActions {
		if a == admissionv1.Deny {
			return true
		}
	}
	return false
}

// narrows says how a binding's matchResources selects less than everything the policy matches.
func narrows(m *admissionv1.MatchResources) string {
	if m == nil {
		return ""
	}
	var why []string
	if s := m.NamespaceSelector; s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0) {
		why = append(why, "namespaceSelector")
	}
	if s := m.ObjectSelector; s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0) {
		why = append(why, "objectSelector")
	}
	if len(m.ResourceRules) > 0 {
		why = append(why, "resourceRules")
	}
	if len(m.ExcludeResourceRules) > 0 {
		why = append(why, "excludeResourceRules")
	}
	return strings.Join(why, ", ")
}

// recognisesManaged: the policy's "managed" variable tests the owner annotation, as rendered.
func recognisesManaged(p *admissionv1.ValidatingAdmissionPolicy) bool {
	for _, v := range p.Spec.Variables {
		if v.Name == "managed" {
			return strings.Contains(v.Expression, ".metadata.annotations['"+ownership.OwnerAnnotation+"'] != ''")
		}
	}
	return false
}

// guardedBy says what the named policy protects, from the guard's registry of checks.
func guardedBy(cfg *config.Config, name string) string {
	var words []string
	for _, a := range guard.Protects(cfg, name) {
		words = append(words, a.String())
	}
	if len(words) == 0 {
		return "what it protects"
	}
	return "changes of " + strings.Join(words, "; ")
}

// checkDefaultDeny reads the waypoints' default deny in the root namespace: without it a waypoint
// that has no policy of its own (its owner policy not attached yet, or deleted) admits every
// request it is sent.
func checkDefaultDeny(ctx context.Context, r client.Reader, cfg *config.Config) ([]Finding, error) {
	want, err := waypoint.ClusterDefaultDeny(cfg)
	if err != nil {
		return nil, err
	}
	got := &istiosecurityv1.AuthorizationPolicy{}
	err = r.Get(ctx, client.ObjectKeyFromObject(want), got)
	f := Finding{Kind: FindingWaypointDefaultDenyMissing, What: WhatWaypoint, Namespace: want.Namespace, Policy: want.Name,
		Fix: "apply the default deny: " + renderHint}
	switch {
	case apierrors.IsNotFound(err):
		f.Problem = fmt.Sprintf("AuthorizationPolicy %s/%s does not exist: a waypoint without a policy of its own admits every request", want.Namespace, want.Name)
		return []Finding{f}, nil
	case err != nil:
		return nil, fmt.Errorf("reading AuthorizationPolicy %s/%s (the waypoints' default deny): %w", want.Namespace, want.Name, err)
	case !proto.Equal(&want.Spec, &got.Spec):
		f.Problem = fmt.Sprintf("AuthorizationPolicy %s/%s is not the waypoints' default deny as rendered (it is %s): it may not deny what a waypoint without a policy of its own is sent",
			want.Namespace, want.Name, got.Spec.String())
		return []Finding{f}, nil
	}
	return nil, nil
}
