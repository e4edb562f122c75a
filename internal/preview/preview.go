package preview

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// ProgrammedGateway is the waypoint as it looks once istiod has programmed it: managed labels,
// generation 1, Programmed=True for that generation and an address. In a cluster the status
// comes from istiod; here it stands in for it.
func ProgrammedGateway(cfg *config.Config, namespace string) *gatewayv1.Gateway {
	gw := waypoint.Gateway(cfg, namespace)
	gw.Generation = 1
	gw.Labels[plugin.ManagedByLabel] = plugin.ManagedByValue
	gw.Labels[plugin.PluginLabel] = waypoint.PluginName
	gw.Status.Conditions = []metav1.Condition{{
		Type: string(gatewayv1.GatewayConditionProgrammed), Status: metav1.ConditionTrue,
		Reason: string(gatewayv1.GatewayReasonProgrammed), ObservedGeneration: 1,
	}}
	gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Value: "waypoint." + namespace + ".svc"}}
	return gw
}

// ServingEndpointSlice is an EndpointSlice with one endpoint that is starting: a namespace in use,
// as provision onDemand sees it. In a cluster the EndpointSlice controller makes these.
func ServingEndpointSlice(namespace string) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "preview", Namespace: namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: "preview", discoveryv1.LabelManagedBy: plugin.EndpointSliceController}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: "preview"}}},
	}
}
