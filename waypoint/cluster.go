package waypoint

import (
	"fmt"

	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
)

// ClusterDefaultDenyName names the mesh-wide allow-nothing policy for waypoints.
const ClusterDefaultDenyName = "waypoint-default-deny"

// attachableClass is the only GatewayClass a root-namespace policy can target: istiod attaches
// a GatewayClass-targeted policy only when it sits in the root namespace and names this class
// (pilot/pkg/model/policyattachment.go, since Istio 1.25, istio/istio#54780). Any other class
// name is accepted by the API server and then silently ignored.
const attachableClass = config.DefaultWaypointClassName

// ClusterDefaultDeny is an allow-nothing policy in Istio's root namespace that targets the
// istio-waypoint GatewayClass, so every waypoint denies what no policy of its own allows
// (istio/istio#54696). It is cluster-wide, not per namespace: apply it once, before any user
// namespace is enrolled. With another waypoint class it returns an error, because istiod would
// ignore the policy and the admin would believe in a default-deny that does not exist.
func ClusterDefaultDeny(cfg *config.Config) (*istiosecurityv1.AuthorizationPolicy, error) {
	if class := cfg.Mesh.Waypoint.ClassName; class != attachableClass {
		return nil, fmt.Errorf("mesh.waypoint.className %q: istiod attaches a policy that targets a GatewayClass only for class %q "+
			"(in the root namespace %q), so a cluster-wide default-deny for class %q would be silently ignored; "+
			"the per-namespace ztunnel policy still keeps each namespace closed, but a waypoint without its own policy would allow everything "+
			"it is sent: use class %q, or give every waypoint of your class an allow-nothing policy of its own",
			class, attachableClass, cfg.Mesh.RootNamespace, class, attachableClass)
	}
	return &istiosecurityv1.AuthorizationPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: istiosecurityv1.SchemeGroupVersion.String(), Kind: "AuthorizationPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      ClusterDefaultDenyName,
			Namespace: cfg.Mesh.RootNamespace,
			Labels:    map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: PluginName},
		},
		Spec: securityv1beta1.AuthorizationPolicy{
			// An ALLOW policy with no rules allows nothing.
			Action: securityv1beta1.AuthorizationPolicy_ALLOW,
			TargetRefs: []*typev1beta1.PolicyTargetReference{{
				Group: gatewayv1.GroupName,
				Kind:  "GatewayClass",
				Name:  attachableClass,
			}},
		},
	}, nil
}
