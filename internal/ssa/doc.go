// Package ssa reads server-side apply's bookkeeping for the runner: objects as the maps an apply
// body is compared with ([ToMap], [Holds], [Contains]), and the managedFields of an object as the
// fields each field manager owns. [ForeignFields] and [ApplyExtras] find content that someone
// other than the runner's own apply holds, [MissingMeaning] the meaning metadata someone removed,
// and [RestoredBody] builds the Update that takes it away. The runner decides drift, intactness
// and ownership from what this package answers; nothing here writes, and nothing here knows a
// plugin.
//
// # Content
//
// Content is what says what an object does: spec, data and binaryData, and its meaning metadata,
// every label and annotation whose key is in Istio's domain ([IsMeaningKey]: the prefix before
// '/' is istio.io or ends in .istio.io). Meaning metadata is kept exactly as the plugin's apply
// body says: a key the body does not set must be absent, a key it sets must have its value.
// Another writer setting, changing or removing one is drift, like a changed spec field. Other
// metadata (app labels, a GitOps tool's annotations) is left to whoever wrote it.
//
// # Why the domain, not a list
//
// What istiod reads on the objects the plugins write, from istio/istio (read at an Aug 2026
// commit; functions named so a reviewer can find them):
//
// AuthorizationPolicy:
//   - label istio.io/rev: a policy that carries it is read only by the istiod of exactly that
//     revision, tags not considered (pkg/config/model.go, LabelsInRevision; the informer filters
//     pilot/pkg/config/kube/crdclient/client.go, Client.inRevision, for sidecars and waypoints,
//     and pilot/pkg/serviceregistry/ambient/ambientindex.go, index.inRevision, for ztunnel). Any
//     value but an istiod's revision ("default" when none is given) switches the policy off for
//     that istiod, "off" for all of them; a policy without the label is read by every revision.
//   - annotation istio.io/dry-run: "true" sends the policy to no ztunnel
//     (pilot/pkg/serviceregistry/ambient/authorization.go, convertAuthorizationPolicy) and makes
//     shadow rules of it in proxies (pilot/pkg/security/authz/builder/builder.go, isDryRun).
//
// Gateway (the waypoint):
//   - label istio.io/rev: which istiod deploys the waypoint and writes its status
//     (pkg/revisions/tag_watcher.go, tagWatcher.IsMine, revision or tag, falling back to the
//     namespace's label; used by pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go,
//     DeploymentController.Reconcile, and pilot/pkg/status/collections.go). With "off" no istiod
//     updates the waypoint and its last status stands.
//   - label istio.io/waypoint-for: the traffic the waypoint takes, over its class's
//     (pilot/pkg/serviceregistry/ambient/waypoints.go, gatewayToWaypointTransform).
//   - label topology.istio.io/network (ambient/networks.go; deploymentcontroller.go,
//     setLabelOverrides, and the waypoint template's ISTIO_META_NETWORK).
//   - annotation ambient.istio.io/waypoint-inbound-binding (waypoints.go,
//     getGatewayOrGatewayClassAnnotation).
//   - annotations gateway.istio.io/name-override and gateway.istio.io/service-account: the names
//     of the waypoint's Deployment and ServiceAccount, so its identity (deploymentcontroller.go,
//     configureIstioGateway; pilot/pkg/config/kube/gateway/conversion.go, extractGatewayServices).
//   - annotation networking.istio.io/service-type: the waypoint Service's type, LoadBalancer
//     included (configureIstioGateway); networking.istio.io/address-type: the addresses its
//     status reports (conversion.go).
//   - annotation gateway.istio.io/controller-version: a number above istiod's makes istiod stop
//     managing the waypoint (deploymentcontroller.go, ManagedGatewayControllerVersion). istiod
//     writes it through gateways/status (setGatewayControllerVersion), which for a custom resource
//     keeps the old metadata (k8s.io/apiextensions-apiserver
//     pkg/registry/customresource/status_strategy.go, statusStrategy.PrepareForUpdate; seen on
//     the test API server too), so it never lands and no writer of the control plane needs an
//     exception.
//   - every other label and annotation: while spec.infrastructure sets none (the plugins' default)
//     istiod copies the Gateway's metadata onto the waypoint's Deployment, pod template, Service
//     and ServiceAccount (PILOT_ENABLE_GATEWAY_API_COPY_LABELS_ANNOTATIONS, on by default;
//     deploymentcontroller.go, extractInfrastructureMetadata; manifests/charts/istio-control/
//     istio-discovery/files/waypoint.yaml, where the copied labels override the template's
//     istio.io/dataplane-mode: none and sidecar.istio.io/inject: "false"), and the template reads
//     sidecar.istio.io/proxyImage and the log levels from the Gateway's own annotations. So every
//     pod- and Service-level key reaches the waypoint: sidecar.istio.io/*, proxy.istio.io/config,
//     istio.io/dataplane-mode, istio.io/use-waypoint (on the waypoint's Service and pods,
//     waypoints.go, GetUseWaypoint), traffic.sidecar.istio.io/*, ...
//   - Gateway API's own keys: istiod reads none on a Gateway's metadata. It drops
//     gateway.networking.k8s.io/ keys from spec.infrastructure (translateInfraMeta) and writes
//     gateway-name and gateway-class-name on what it generates after the copied metadata, so a
//     copy cannot override them; it reads gateway-name on pods, not Gateways (waypoints.go,
//     fetchWaypointForInstance; pilot/pkg/model/policyattachment.go, workloadGatewayName).
//
// The waypoint's patch ConfigMap and the class defaults ConfigMap: istiod reads the label
// gateway.istio.io/defaults-for-class, and only in its own namespace (deploymentcontroller.go,
// the ConfigMap handler of NewDeploymentController and render;
// pilot/pkg/config/kube/gatewaycommon/gateway_utils.go, GatewayClassDefaults); the patch ConfigMap
// is found by name through parametersRef (fetchParameters). Its ConfigMap informer is not
// filtered by revision, so istio.io/rev means nothing on either.
//
// Each of these is in the domain, and the list is not closed: istio.io/api's annotation and label
// packages name about a hundred keys, each release adds some (istio.io/use-waypoint-canary is in
// istiod before it is in istio.io/api 1.30), and through the Gateway's metadata copy every
// pod-level key is one a waypoint reads. A list of cases would miss the next one silently. The
// domain is what Istio reserves for its own meaning: what the plugins set there is part of what
// they want, and a key anyone else sets there can only change what the object does.
package ssa
