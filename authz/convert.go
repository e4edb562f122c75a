package authz

import (
	"errors"
	"fmt"

	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ErrAlreadyAmbient is returned for a policy that has targetRefs already.
var ErrAlreadyAmbient = errors.New("policy already has targetRefs")

// ConversionReport says what converting one policy changes in enforcement.
type ConversionReport struct {
	// Policy is namespace/name.
	Policy string
	// L7 lists the attributes only a waypoint enforces (see L7Attributes). Left on a selector
	// policy in ambient mode, ztunnel would drop these rules; after conversion they run only for
	// traffic that passes the targeted waypoint.
	L7 []string
	// Notes are further things to check by hand.
	Notes []string
}

// GatewayTarget targets a waypoint Gateway, as the owner and contributor policies target the
// namespace's waypoint; GatewayTarget and ServiceTarget are the two targets a converted policy may have.
func GatewayTarget(name string) *typev1beta1.PolicyTargetReference {
	return &typev1beta1.PolicyTargetReference{Group: gatewayv1.GroupName, Kind: "Gateway", Name: name}
}

// ServiceTarget targets a Service; the policy then runs on whichever waypoint the Service uses.
func ServiceTarget(name string) *typev1beta1.PolicyTargetReference {
	return &typev1beta1.PolicyTargetReference{Group: "", Kind: "Service", Name: name}
}

// ToAmbient converts a selector-based (or namespace-wide) policy to its ambient form: the same
// rules attached with targetRefs to a waypoint Gateway or a Service in the same namespace, no
// selector. The input is not modified. Server-set metadata (uid, resourceVersion, managedFields,
// status) is dropped so the output applies cleanly.
func ToAmbient(in *istiosecurityv1.AuthorizationPolicy, target *typev1beta1.PolicyTargetReference) (*istiosecurityv1.AuthorizationPolicy, ConversionReport, error) {
	rep := ConversionReport{Policy: in.Namespace + "/" + in.Name}
	if target == nil || (target.Kind != "Gateway" && target.Kind != "Service") {
		return nil, rep, fmt.Errorf("%s: target kind must be Gateway or Service", rep.Policy)
	}
	if msgs := validation.IsDNS1123Subdomain(target.Name); len(msgs) > 0 {
		return nil, rep, fmt.Errorf("%s: target name %q: %v", rep.Policy, target.Name, msgs)
	}
	if target.Namespace != "" && target.Namespace != in.Namespace {
		return nil, rep, fmt.Errorf("%s: target namespace %q: Istio does not attach policies across namespaces", rep.Policy, target.Namespace)
	}
	if len(in.Spec.TargetRefs) > 0 || in.Spec.TargetRef != nil {
		return nil, rep, fmt.Errorf("%s: %w", rep.Policy, ErrAlreadyAmbient)
	}

	out := &istiosecurityv1.AuthorizationPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: istiosecurityv1.SchemeGroupVersion.String(), Kind: "AuthorizationPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name: in.Name, Namespace: in.Namespace,
			Labels: in.Labels, Annotations: withoutLastApplied(in.Annotations),
		},
	}
	in.Spec.DeepCopyInto(&out.Spec)
	if out.Spec.Selector == nil {
		rep.Notes = append(rep.Notes, "it had no selector, so it applied to the whole namespace; now it applies only to traffic through the target")
	}
	out.Spec.Selector = nil
	out.Spec.TargetRefs = []*typev1beta1.PolicyTargetReference{{Group: target.Group, Kind: target.Kind, Name: target.Name}}

	rep.L7 = L7Attributes(&out.Spec)
	if len(rep.L7) == 0 {
		rep.Notes = append(rep.Notes, "it uses only L4 attributes: ztunnel could enforce it with its selector as it is; converted, it is enforced at the waypoint only")
	} else {
		rep.Notes = append(rep.Notes, "its L7 rules now run only on traffic through the target; pair it with a ztunnel policy that admits only the waypoint, or pod-IP traffic skips them")
	}
	switch out.Spec.Action {
	case securityv1beta1.AuthorizationPolicy_DENY:
		rep.Notes = append(rep.Notes, "it is a DENY policy: traffic that skips the waypoint is no longer denied by it")
	case securityv1beta1.AuthorizationPolicy_CUSTOM:
		rep.Notes = append(rep.Notes, "it is a CUSTOM policy: the waypoint must be able to reach its extension provider")
	}
	return out, rep, nil
}

func withoutLastApplied(a map[string]string) map[string]string {
	if _, ok := a["kubectl.kubernetes.io/last-applied-configuration"]; !ok {
		return a
	}
	out := map[string]string{}
	for k, v := range a {
		if k != "kubectl.kubernetes.io/last-applied-configuration" {
			out[k] = v
		}
	}
	return out
}
