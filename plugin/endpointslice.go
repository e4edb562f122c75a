package plugin

import discoveryv1 "k8s.io/api/discovery/v1"

// EndpointSliceController is the value of discoveryv1.LabelManagedBy on the EndpointSlices that
// kube-controller-manager's EndpointSlice controller writes for a Service with a selector
// (kubernetes pkg/controller/endpointslice/endpointslice_controller.go, ControllerName). The
// mirroring controller, which copies the hand-written Endpoints of a Service without a selector,
// writes "endpointslicemirroring-controller.k8s.io" (pkg/controller/endpointslicemirroring).
// k8s.io/api names the label, not its values.
const EndpointSliceController = "endpointslice-controller.k8s.io"

// Serving says whether the slice has an endpoint that a pod of the namespace backs and that is not
// terminating, ready or not yet ready: a pod that starts counts (so that its waypoint starts with
// it), one on its way out does not. Only the EndpointSlice controller's slices count
// ([EndpointSliceController]): it makes an endpoint only of a pod that exists, matches the
// Service's selector and has an IP, and names it in the endpoint's targetRef (kind Pod, the pod's
// namespace and name; k8s.io/endpointslice utils.go podToEndpoint, util ShouldPodBeInEndpoints). A
// slice mirrored from hand-written Endpoints, or written by anyone else, names whatever its writer
// chose, a pod that does not exist or an address outside the cluster, and serves nothing the
// namespace runs. An endpoint whose terminating condition is unset is not terminating (the API's
// own reading, see discoveryv1.EndpointConditions).
func Serving(es *discoveryv1.EndpointSlice) bool {
	if es.Labels[discoveryv1.LabelManagedBy] != EndpointSliceController {
		return false
	}
	for _, e := range es.Endpoints {
		if podEndpoint(es.Namespace, &e) && (e.Conditions.Terminating == nil || !*e.Conditions.Terminating) {
			return true
		}
	}
	return false
}

// podEndpoint says whether e's targetRef names a pod of namespace, as the EndpointSlice controller
// writes it (kind Pod, the namespace set).
func podEndpoint(namespace string, e *discoveryv1.Endpoint) bool {
	return e.TargetRef != nil && e.TargetRef.Kind == "Pod" && e.TargetRef.Namespace == namespace
}
