// Package waypoint is the mesh plugin: it gives every user namespace its data plane, either
// Istio's ambient mesh with a waypoint proxy of its own, or the classic sidecar injection.
//
// In ambient mode it emits a waypoint Gateway (class istio-waypoint, one HBONE listener on 15008,
// exactly what istioctl waypoint generate writes) and the enrolment labels. The labels are the
// dangerous part: if istio.io/use-waypoint names a waypoint that is missing or not ready, ztunnel
// sends traffic straight to the pods and the owner's L7 policy never runs. So the plugin
//
//   - sets istio.io/dataplane-mode=ambient only once the authz plugin's ztunnel policy exists
//     (through [plugin.Desired.LabelRequires]), so the namespace is never in ambient without an L4
//     policy that admits only the waypoint;
//   - sets istio.io/use-waypoint and istio.io/ingress-use-waypoint only once the Gateway reports
//     Programmed=True for its current generation and has an address, and only while the owner
//     policy, the ztunnel policy and the Gateway are intact (the waypoint checks requests against
//     the owner policy alone), and until then says in the Result what it waits for; never while
//     the namespace's istio.io/use-waypoint-namespace label names another namespace, whose
//     waypoint would refuse it (that label is reported as an error);
//   - sets istio-injection=disabled, so a namespace never carries sidecar injection and ambient
//     enrolment at once (the profiles controller sets istio-injection=enabled at creation).
//
// Under Pod Security "restricted" the waypoint pod needs a seccompProfile that Istio's waypoint
// template sets only when the install configures one. [ClassDefaults] is that configuration for
// the whole cluster: a ConfigMap in istiod's namespace, labelled gateway.istio.io/defaults-for-class,
// whose "deployment" key istiod (1.26 and later) applies to every waypoint as a strategic merge
// patch setting seccompProfile RuntimeDefault. Only admins write there. The per-namespace form (a
// ConfigMap referenced by the Gateway's spec.infrastructure.parametersRef) is an opt-in,
// mesh.waypoint.seccompPatch, with a warning: namespace editors can write ConfigMaps, and istiod
// applies that one to the waypoint Deployment. Then routing requires the plugin's own, intact
// ConfigMap, and the Gateway references it only once it is the plugin's; when the opt-in is
// turned off, the ConfigMap goes only after the Gateway stopped referencing it.
//
// With mesh.waypoint.provision onDemand (a [plugin.EndpointObserver]) the Gateway exists only while
// the namespace has a Service endpoint that a pod of the namespace backs and that is not
// terminating (plugin.Serving: only the EndpointSlice controller's slices count; the waypoint's own
// and mesh.waypoint.ignoredServices' do not), and for mesh.waypoint.idleAfter after the last one
// went, recorded in [IdleSinceLabel] so that restarts keep the window; then the routing labels come
// off in one call and the Gateway is deleted in a later one. The policies and enrolment stay. The
// Result's notes say [Idle] ..., its waiting messages [Starting] ..., and it asks for a requeue at
// the window's end (plugin.Desired.RequeueAfter). See docs/ondemand.md.
//
// A Gateway without parametersRef is safe to route through, and the plugin still does not route
// through one while the opt-in is on. Safe: istiod then builds the waypoint Deployment from its
// own template and the cluster's class defaults only, so no ConfigMap a namespace editor can write
// shapes the pod traffic goes through; the property test (internal/safety, waypointProblem)
// accepts it under W-ROUTE for this reason. Not routed: the opt-in asks for the seccomp patch,
// which only the plugin's ConfigMap carries, and a waypoint pod built without it may be refused
// by restricted Pod Security; the plugin routes only through the Gateway that references its own
// ConfigMap (a liveness choice, which F-LIVE checks), and while the ConfigMap is missing or another
// writer's, it withdraws routing before it writes the Gateway without the reference. The model is
// the weaker of the two on purpose: it checks what must never happen, not what the plugin prefers.
//
// In sidecar mode it sets istio-injection=enabled (or istio.io/rev=<revision>) and nothing else;
// what ambient mode made is pruned by the runner. As a [plugin.DataPlane] it names the pods that
// ambient captures (Istio's CNI rule: no injected sidecar, not opted out, not host network), and the
// runner keeps istio.io/dataplane-mode=ambient and the ztunnel policy until none of them runs, so a
// switch to sidecar never leaves a pod outside both data planes. After a switch to ambient, pods that still carry
// an istio-proxy sidecar are listed as a warning: they move to ambient only when restarted. The
// waypoint's own pods ([IsWaypointPod]) run a container named istio-proxy too and are not listed;
// they still count for the owner policy a sidecar needs ([Plugin.ProtectedPods]).
//
// [ClusterDefaultDeny] and [ClassDefaults] are the cluster-wide objects: an allow-nothing policy
// for every waypoint of the istio-waypoint class, so a waypoint without its own policy denies
// instead of allowing, and the seccomp hardening of every waypoint pod.
package waypoint
