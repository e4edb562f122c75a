package waypoint

import (
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

// ClusterDefaultDeny is an allow-nothing policy in Istio's root namespace that targets the waypoint
// GatewayClass, so every waypoint of that class denies what no policy of its own allows
// (istio/istio#54696). It is cluster-wide, not per namespace: apply it once, before any user
// namespace is enrolled.
func ClusterDefaultDeny(cfg *config.Config) *istiosecurityv1.AuthorizationPolicy {
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
				Name:  cfg.Mesh.Waypoint.ClassName,
			}},
		},
	}
}
