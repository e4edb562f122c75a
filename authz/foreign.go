package authz

import (
	"fmt"
	"sort"
	"strconv"

	"istio.io/api/annotation"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// foreignAllowAll warns about ALLOW policies another writer put where the plugin's policies
// decide, that admit every caller: evaluated, not judged by their shape (see
// [evaluateOpenness]). ALLOW policies add up (a request passes if any one admits it), so one such
// policy makes the plugin's restrict nothing there:
//   - namespace-wide (no selector, no targetRefs): in ambient mode ztunnel enforces it next to the
//     ztunnel policy; in sidecar mode every sidecar enforces it next to the owner policy;
//   - in ambient mode, attached to the waypoint Gateway or to a Service: the waypoint enforces it
//     next to the owner policy.
//
// The plugin does not own such a policy and leaves it alone; the warning names it.
func foreignAllowAll(cfg *config.Config, obs plugin.Observed) []string {
	var out []string
	for _, o := range obs.Objects {
		pol, ok := o.(*istiosecurityv1.AuthorizationPolicy)
		if !ok || plugin.IsManagedBy(pol.Labels, PluginName) || !enforcedAllow(pol) {
			continue
		}
		where, voided, l4, voids := placement(cfg, pol)
		if !voids {
			continue
		}
		open := evaluateOpenness(pol.Spec.GetRules(), cfg.Mesh.TrustDomain, l4)
		switch {
		case open.tooLarge > 0:
			out = append(out, fmt.Sprintf("AuthorizationPolicy %s (not made by this plugin) is enforced %s and names %d address ranges, more than the %d "+
				"this plugin evaluates, so whether it admits every caller, and %s restricts nothing there, is not known; check it",
				pol.Name, where, open.tooLarge, maxRanges, voided))
		case open.open():
			out = append(out, fmt.Sprintf("AuthorizationPolicy %s (not made by this plugin) admits %s %s: ALLOW policies add up, "+
				"so %s restricts nothing there; delete it or narrow its rules", pol.Name, open.who(), where, voided))
		}
	}
	sort.Strings(out)
	return out
}

// placement says where Istio enforces a foreign policy next to the plugin's policies and which of
// them it can void there, and whether that place is ztunnel (l4); voids is false where it is enforced
// next to none of them. A policy with a selector opens only the pods it selects, which is not the
// namespace-wide guarantee.
func placement(cfg *config.Config, pol *istiosecurityv1.AuthorizationPolicy) (where, voided string, l4, voids bool) {
	a := cfg.Authorization
	if pol.Spec.GetSelector() != nil {
		return "", "", false, false
	}
	refs := pol.Spec.GetTargetRefs()
	if r := pol.Spec.GetTargetRef(); r != nil {
		refs = append(refs, r)
	}
	ambient := cfg.Mesh.Mode == config.ModeAmbient
	if len(refs) == 0 && ambient {
		return "at ztunnel (it has no selector or targetRefs)", a.ZtunnelPolicyName, true, true
	}
	if len(refs) == 0 {
		return "at every sidecar (it has no selector or targetRefs)", a.OwnerPolicyName, false, true
	}
	if ambient && atWaypoint(cfg, refs) {
		return "at the waypoint (through its targetRefs)", a.OwnerPolicyName, false, true
	}
	return "", "", false, false
}

// enforcedAllow says whether pol is an ALLOW policy Istio enforces (not in dry-run).
func enforcedAllow(pol *istiosecurityv1.AuthorizationPolicy) bool {
	if pol.Spec.GetAction() != securityv1beta1.AuthorizationPolicy_ALLOW || pol.Spec.GetProvider() != nil {
		return false
	}
	dry, err := strconv.ParseBool(pol.Annotations[annotation.IoIstioDryRun.Name])
	return err != nil || !dry
}

// atWaypoint says whether a targetRef attaches the policy to the namespace's waypoint: the
// Gateway itself, or a Service, whose policies the waypoint enforces for that Service.
func atWaypoint(cfg *config.Config, refs []*typev1beta1.PolicyTargetReference) bool {
	for _, r := range refs {
		if r.GetKind() == "Gateway" && r.GetGroup() == gatewayv1.GroupName && r.GetName() == cfg.Mesh.Waypoint.Name {
			return true
		}
		if r.GetKind() == "Service" && r.GetGroup() == "" {
			return true
		}
	}
	return false
}
