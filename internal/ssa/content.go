package ssa

import "istio.io/api/annotation"

// contentRoots are the top-level fields that say what an object does: a policy's or Gateway's
// spec, and a ConfigMap's data and binaryData (istiod applies every key of the waypoint's patch
// ConfigMap to the waypoint's Deployment, Service, ServiceAccount, ...).
var contentRoots = []string{"spec", "data", "binaryData"}

// meaningAnnotations are the annotations that change what an object does, kept as desired like
// its spec: istio.io/dry-run "true" on an AuthorizationPolicy switches it off (istiod sends it to
// no ztunnel and turns it into shadow rules in proxies: istio/istio
// pilot/pkg/serviceregistry/ambient/authorization.go, convertAuthorizationPolicy, and
// pilot/pkg/security/authz/builder/builder.go, isDryRun). A plugin that sets one states its value
// in the object; a restore sets it to that value, or removes it when the plugin does not set it.
var meaningAnnotations = []string{annotation.IoIstioDryRun.Name}
