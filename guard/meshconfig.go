package guard

import (
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
)

// MeshConfigPolicy refuses, in the managed namespaces, the mesh configuration that could widen
// what a namespace admits or let traffic skip its waypoint without touching the plugins' objects,
// unless the admin allows the object by kind and name (guard.meshConfigAllowed). Kubeflow's roles
// grant no write on Istio's or the Gateway API's objects (kubeflow-istio-edit leaves them
// commented out); this is for the admin who granted more, and for a controller that writes them.
const MeshConfigPolicy = "profile-plugins-guard-mesh-config"

// meshConfig is the mesh-config policy.
func (b builder) meshConfig() policySpec {
	ops := []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}
	s := b.spec(MeshConfigPolicy, "namespaceObject", []admissionv1.NamedRuleWithOperations{
		rule("networking.istio.io", "*", []string{"envoyfilters", "sidecars", "serviceentries", "workloadentries", "workloadgroups", "proxyconfigs", "gateways", "virtualservices"}, ops...),
		rule("extensions.istio.io", "*", []string{"wasmplugins"}, ops...),
		rule("security.istio.io", "*", []string{"peerauthentications", "authorizationpolicies"}, ops...),
		rule("gateway.networking.k8s.io", "*", []string{"gateways", "httproutes", "grpcroutes"}, ops...),
	}, admissionv1.Variable{Name: "allowed", Expression: string(b.meshConfigAllowed())})
	what := "request.kind.kind + ' ' + request.namespace + '/' + object.metadata.name"
	kindIn := func(kinds ...string) expr { return in("request.kind.kind", kinds...) }
	for _, c := range []Check{
		{ID: "proxy-configuration", Asset: AssetWaypointWorkload,
			Source: "istio pilot/pkg/networking/core/envoyfilter (an EnvoyFilter patches the proxies it selects, waypoints by targetRefs), pilot/pkg/model/wasm.go (a WasmPlugin runs code in them), " +
				"pilot/pkg/model/proxy_config.go (a ProxyConfig's environmentVariables reach the waypoint's template through deploymentcontroller.go), networking/v1 Sidecar (a sidecar's listeners)",
			Expression: string(not(kindIn("EnvoyFilter", "WasmPlugin", "ProxyConfig", "Sidecar"))),
			Message:    "EnvoyFilters, WasmPlugins, ProxyConfigs and Sidecars could rewrite the proxies that enforce this namespace's policies, its waypoint's among them" + ask,
			MessageExpression: what + " + ': it could change or replace the filters of the proxies that enforce this namespace\\'s policies, the waypoint\\'s among them; " +
				"an admin may allow it by kind and name in guard.meshConfigAllowed" + ask + "'"},
		{ID: "peer-authentication", Asset: AssetPodCapture,
			Source:     "istio security/v1 PeerAuthentication: PERMISSIVE or DISABLE lets plaintext past the proxies of the namespace",
			Expression: string(not(kindIn("PeerAuthentication"))),
			Message:    "PeerAuthentications could let plaintext into this namespace past its policies" + ask,
			MessageExpression: what + " + ': a PeerAuthentication decides whether the namespace\\'s proxies accept plaintext, which carries no identity for its policies; " +
				"an admin may allow it by kind and name in guard.meshConfigAllowed" + ask + "'"},
		{ID: "workload-registry", Asset: AssetServiceMembership,
			Source:     "istio pilot/pkg/serviceregistry/serviceentry (ServiceEntries, WorkloadEntries and WorkloadGroups add workloads and hosts with the identities they name)",
			Expression: string(not(kindIn("ServiceEntry", "WorkloadEntry", "WorkloadGroup"))),
			Message:    "ServiceEntries, WorkloadEntries and WorkloadGroups could add workloads to this namespace's Services under any identity" + ask,
			MessageExpression: what + " + ': it registers hosts or workloads in this namespace, with the identity it names, beside its pods; " +
				"an admin may allow it by kind and name in guard.meshConfigAllowed" + ask + "'"},
		{ID: "gateways", Asset: AssetWaypointRouting,
			Source:     "istio pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go deploys a Gateway's pods in its namespace, where the namespace's policies admit them as its own",
			Expression: string(anyOf(not(allOf(kindIn("Gateway"), eq("request.kind.group", "gateway.networking.k8s.io"))), eq("object.metadata.name", b.cfg.Mesh.Waypoint.Name))),
			Message:    "the namespace's only Gateway is its waypoint" + ask,
			MessageExpression: what + " + ': istiod would deploy this Gateway\\'s pods in the namespace, where its policies admit them as the namespace\\'s own, a way in past the waypoint; " +
				"an admin may allow it by kind and name in guard.meshConfigAllowed" + ask + "'"},
		{ID: "istio-gateways", Asset: AssetUserIdentity,
			Source:     "istio networking/v1 Gateway: its selector binds listeners on the gateway pods it picks in any namespace (PILOT_SCOPE_GATEWAY_TO_NAMESPACE off), the ingress gateway's among them",
			Expression: string(not(allOf(kindIn("Gateway"), eq("request.kind.group", "networking.istio.io")))),
			Message:    "an Istio Gateway in this namespace could open listeners on the platform's ingress gateway" + ask,
			MessageExpression: what + " + ': an Istio Gateway binds listeners on whatever gateway pods its selector picks, the ingress gateway\\'s too, ahead of every namespace\\'s policies; " +
				"an admin may allow it by kind and name in guard.meshConfigAllowed" + ask + "'"},
		{ID: "allow-policies", Asset: AssetAccess,
			Passes:     "guard.policyWriters (kfam, the stock profiles controller)",
			Source:     "istio security/v1 AuthorizationPolicy: an ALLOW policy adds to what the owner's and contributors' policies admit (pilot/pkg/security/authz/builder)",
			Expression: string(anyOf(not(kindIn("AuthorizationPolicy")), expr("(has(object.spec) && has(object.spec.action) && object.spec.action != 'ALLOW')"), b.policyWriter())),
			Message:    "only the owner's and contributors' policies admit anyone to this namespace" + ask,
			MessageExpression: what + " + ': an ALLOW policy admits whoever it names to the namespace, beside the owner and the contributors; " +
				"add contributors through the dashboard, or an admin may allow it by kind and name in guard.meshConfigAllowed" + ask + "'"},
	} {
		c.Expression = string(anyOf("!variables.managed", "variables.allowed", expr(c.Expression)))
		s.add(c)
	}
	// Not even an allowed route may write the user-id header: the ingress gateway's router sets
	// headers after its authentication (istio pilot/pkg/networking/core/route/route.go
	// translateAppendHeaders, overwrite-or-add), and every owner policy admits the user it names.
	s.add(b.userIDHeaderCheck(what))
	// Not even a Gateway the admin allows may be rendered as another: istiod names its objects
	// and ServiceAccount from these annotations and merges the parametersRef ConfigMap over its
	// template, labels, selector and ServiceAccount included (deploymentcontroller.go render,
	// applyOverlay), which a member who may write ConfigMaps could make the waypoint's.
	s.add(Check{ID: "gateway-rendering", Asset: AssetWaypointIdentity,
		Source: "istio pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go (gateway.istio.io/name-override, gateway.istio.io/service-account, spec.infrastructure.parametersRef)",
		Expression: string(anyOf("!variables.managed", not(kindIn("Gateway")), eq("object.metadata.name", b.cfg.Mesh.Waypoint.Name),
			not(anyOf(
				expr(hasKey("object.metadata", "annotations", "gateway.istio.io/name-override", "")),
				expr(hasKey("object.metadata", "annotations", "gateway.istio.io/service-account", "")),
				field("object", "spec", "infrastructure", "parametersRef"))))),
		Message: "a Gateway in this namespace may not rename what istiod deploys for it or overlay its template" + ask,
		MessageExpression: what + " + ': gateway.istio.io/name-override, gateway.istio.io/service-account and spec.infrastructure.parametersRef decide the names, " +
			"ServiceAccount and pod template istiod deploys, which could be made the waypoint\\'s; size allowed Gateways by their class defaults instead" + ask + "'"})
	return s
}

// meshConfigAllowed is whether the request's object is one the admin allows by kind and name.
func (b builder) meshConfigAllowed() expr {
	var names []string
	for _, o := range b.cfg.Guard.MeshConfigAllowed {
		names = append(names, o.Kind+"/"+o.Name)
	}
	return expr("(request.kind.kind + '/' + object.metadata.name) in " + string(list(names...)))
}

// policyWriter is whether the request comes from one of guard.policyWriters.
func (b builder) policyWriter() expr {
	var users []string
	for _, sa := range b.cfg.Guard.PolicyWriters {
		ns, name, _ := strings.Cut(sa, "/")
		users = append(users, serviceAccountUser(ns, name))
	}
	return in("request.userInfo.username", users...)
}

// userIDHeaderCheck refuses routes that set, add or remove the user-id header (any case): a
// VirtualService's http[].headers and http[].route[].headers, and an HTTPRoute's or GRPCRoute's
// RequestHeaderModifier filters, on a rule or a backend. A VirtualService in a user namespace may
// name the platform's ingress gateway (the notebook controller's do), where its headers are set
// before any namespace's waypoint sees the request.
func (b builder) userIDHeaderCheck(what string) Check {
	h := lit(strings.ToLower(b.cfg.Authorization.UserIDHeader))
	names := func(m string) expr { // a map of header names (VirtualService set, add)
		return allOf(expr("has("+m+")"), expr(m+".exists(k, k.lowerAscii() == "+string(h)+")"))
	}
	removed := func(l string) expr { // a list of header names (remove)
		return allOf(expr("has("+l+")"), expr(l+".exists(k, k.lowerAscii() == "+string(h)+")"))
	}
	vsHeaders := func(o string) expr {
		return allOf(expr("has("+o+".headers)"), expr("has("+o+".headers.request)"),
			anyOf(names(o+".headers.request.set"), names(o+".headers.request.add"), removed(o+".headers.request.remove")))
	}
	virtualService := allOf(kindIs("VirtualService"), field("object", "spec", "http"),
		expr("object.spec.http.exists(h, "+string(anyOf(vsHeaders("h"), allOf("has(h.route)", expr("h.route.exists(r, "+string(vsHeaders("r"))+")"))))+")"))
	modifier := func(f string) expr { // a Gateway API filter
		m := f + ".requestHeaderModifier"
		named := func(l string) expr {
			return allOf(expr("has("+l+")"), expr(l+".exists(x, has(x.name) && x.name.lowerAscii() == "+string(h)+")"))
		}
		return allOf(expr("has("+m+")"), anyOf(named(m+".set"), named(m+".add"), removed(m+".remove")))
	}
	filters := func(o string) expr {
		return allOf(expr("has("+o+".filters)"), expr(o+".filters.exists(f, "+string(modifier("f"))+")"))
	}
	route := allOf(in("request.kind.kind", "HTTPRoute", "GRPCRoute"), field("object", "spec", "rules"),
		expr("object.spec.rules.exists(r, "+string(anyOf(filters("r"), allOf("has(r.backendRefs)", expr("r.backendRefs.exists(b, "+string(filters("b"))+")"))))+")"))
	return Check{ID: "user-id-header", Asset: AssetUserIdentity,
		Source:     "istio pilot/pkg/networking/core/route/route.go translateAppendHeaders (VirtualService headers); gateway-api HTTPRouteFilter RequestHeaderModifier",
		Expression: string(anyOf("!variables.managed", not(anyOf(virtualService, route)))),
		Message:    "a route may not set, add or remove the header " + b.cfg.Authorization.UserIDHeader + ask,
		MessageExpression: what + " + ': it sets, adds or removes the header " + b.cfg.Authorization.UserIDHeader +
			", which the ingress gateway sets for the signed-in user and every namespace\\'s policies trust; remove it from the route" + ask + "'"}
}

// kindIs is whether the request's kind is kind.
func kindIs(kind string) expr { return eq("request.kind.kind", kind) }
