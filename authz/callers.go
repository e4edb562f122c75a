package authz

import (
	"fmt"
	"strings"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// callerRule admits a platform caller that acts on its own behalf, within its methods, paths and
// ports: the notebook controller's culler (GET */api/kernels) and Katib's controller (anything) by
// default. It takes callerRuleSizes(c).
func callerRule(rules *rulesBuilder, c config.PlatformCaller) {
	r := rules.next()
	rules.source(r).Principals = rules.list(c.Principal)
	if len(c.Methods)+len(c.Paths)+len(c.Ports) > 0 {
		op := rules.operation(r)
		op.Methods, op.Paths, op.Ports = rules.list(c.Methods...), rules.list(c.Paths...), rules.ports(c.Ports)
	}
}

func callerRuleSizes(c config.PlatformCaller) sizes {
	limits := len(c.Methods) + len(c.Paths) + len(c.Ports)
	return sizes{rules: 1, sources: 1, operations: oneIf(limits > 0), strings: 1 + limits}
}

// sidecarCallers are the platform callers whose pods run Istio sidecars. Configuration validation
// refuses such a caller on behalf of users in ambient mode, so all of these act on their own
// behalf.
//
// A sidecar never sends through a waypoint (istio/istio pilot/pkg/xds/endpoints/endpoint_builder.go,
// buildEnvoyLbEndpoint: findServiceWaypoint is used for ingress and east-west gateways only), so
// its calls reach the user pod's ztunnel directly, as HBONE to the pod's port 15008 through the
// connect_originate cluster (pilot/pkg/networking/core/cluster.go, buildConnectOriginate in
// cluster_waypoint.go), authenticated with the sidecar's own workload certificate. ztunnel takes
// the source identity from that certificate (istio/ztunnel src/proxy/inbound.rs), so the rule
// names the caller's own principal. istiod configures this only with PILOT_ENABLE_SENDING_HBONE,
// which is on whenever PILOT_ENABLE_AMBIENT is; a sidecar whose proxy metadata sets
// DISABLE_HBONE_SEND sends plaintext to the app port instead, with no identity, and is denied.
func sidecarCallers(cfg *config.Config) []config.PlatformCaller {
	var out []config.PlatformCaller
	for _, c := range cfg.Authorization.PlatformCallers {
		if c.DataPlane == config.CallerSidecar && !c.OnBehalfOfUser {
			out = append(out, c)
		}
	}
	return out
}

// sidecarCallerLosses says, for each sidecar caller with L7 limits, exactly what it may reach that
// its rule at the waypoint would not let it: the ztunnel policy can check only its principal and
// ports. A sidecar caller without methods or paths loses nothing and is not reported.
func sidecarCallerLosses(cfg *config.Config) []string {
	var out []string
	for _, c := range sidecarCallers(cfg) {
		if len(c.Methods)+len(c.Paths) == 0 {
			continue
		}
		reach := "every port and path"
		if len(c.Ports) > 0 {
			reach = "every path on port " + strings.Join(portStrings(c.Ports), ", ")
		}
		out = append(out, fmt.Sprintf("platform caller %q (%s) runs sidecars, which never send through the waypoint, so the ztunnel policy admits it at L4 "+
			"and its methods and paths are not applied: it can reach %s of every pod in the namespace, not just %s; "+
			"run its namespace in ambient and set dataPlane \"ambient\" to keep the limits",
			c.Name, c.Principal, reach, describeOperation(c)))
	}
	return out
}

// describeOperation reads like "GET */api/kernels".
func describeOperation(c config.PlatformCaller) string {
	methods, paths := "any method", "any path"
	if len(c.Methods) > 0 {
		methods = strings.Join(c.Methods, "|")
	}
	if len(c.Paths) > 0 {
		paths = strings.Join(c.Paths, " or ")
	}
	return methods + " " + paths
}
