// Package harness runs the real istiod (pilot-discovery, built from Istio's source) and the
// reference controller against the project's test API server, and stands in for what a cluster has
// and a bare API server lacks: pod readiness (the scheduler, kubelet and EndpointSlice controller)
// and garbage collection (kube-controller-manager's). Nothing else is played: istiod writes the
// waypoint's Deployment, Service and ServiceAccount and the Gateway's status itself.
//
// What it stands in, exactly (see [StandIn]):
//   - for each Deployment in a watched namespace, as many Pods from its template as its replicas
//     (owned by the Deployment, no ReplicaSet), created through the API server, so Pod Security
//     admission judges the template;
//   - each Pod of a watched namespace marked Running and Ready with an IP, as a kubelet would;
//   - for each Service with a selector, one EndpointSlice of the Pods it selects, labelled as the
//     EndpointSlice controller labels its own;
//   - deletion of the objects whose owner (by ownerReferences UID) is gone, and the removal of Pods
//     that are terminating, as the garbage collector and a kubelet would.
//
// The binaries come from `make test-istiod` through the environment: ISTIOD_BIN (pilot-discovery),
// ISTIO_CHART (the istio-discovery chart of the same source) and PP_BIN (the directory holding
// profile-plugins and profile-plugins-controller).
package harness
