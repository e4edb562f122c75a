package guard

import (
	"regexp"
	"strings"

	"istio.io/api/label"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// WaypointPolicy protects the waypoint's workload and identity: the objects istiod deploys for
// the waypoint Gateway, the pods that run as its ServiceAccount, and every way to run code in
// them or to hold their identity.
const WaypointPolicy = "profile-plugins-guard-waypoint"

// The workload kinds whose pod template could make pods of the waypoint's: every kind the
// workloads and cronjobs policies judge.
var templateKinds = []string{"deployments", "replicasets", "statefulsets", "daemonsets", "jobs", "replicationcontrollers", "cronjobs"}

// waypointObjects are the kinds istiod writes for a waypoint Gateway, each under the Gateway's name
// (manifests/charts/istio-control/istio-discovery/files/waypoint.yaml: Deployment, Service,
// HorizontalPodAutoscaler, PodDisruptionBudget; the ServiceAccount is judged as an identity), and
// the Endpoints kube-controller-manager keeps for its Service.
var waypointObjects = []string{"deployments", "services", "horizontalpodautoscalers", "poddisruptionbudgets", "endpoints"}

// waypointWorkload is the waypoint policy. In a managed namespace only istiod
// (guard.meshServiceAccounts), the kubelets and the scheduler (for the pods they run and
// preempt, and the tokens of those pods) pass it, besides the guard's trusted writers, among them
// Kubernetes' controllers (the Deployment's ReplicaSets, the ReplicaSets' pods, garbage
// collection). It applies in both mesh modes, whether a waypoint exists or not: an idle on-demand
// namespace has none, and what a member prepares there (a Deployment under the waypoint's name
// with istiod's label, a token of its ServiceAccount) would be the waypoint's once it comes.
func (b builder) waypointWorkload() policySpec {
	all := []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete}
	s := b.spec(WaypointPolicy, "namespaceObject", []admissionv1.NamedRuleWithOperations{
		rule("apps", "v1", []string{"deployments", "deployments/scale", "replicasets", "replicasets/scale", "statefulsets", "daemonsets"}, all...),
		rule("batch", "v1", []string{"jobs", "cronjobs"}, all...),
		rule("", "v1", []string{"replicationcontrollers", "pods", "pods/status", "pods/ephemeralcontainers", "pods/resize", "services", "endpoints", "serviceaccounts", "serviceaccounts/token"}, all...),
		rule("", "v1", []string{"secrets"}, admissionv1.Create, admissionv1.Update),
		rule("", "v1", []string{"configmaps"}, all...),
		rule("", "v1", []string{"pods/exec", "pods/attach", "pods/portforward", "pods/proxy", "services/proxy"}, admissionv1.Connect),
		rule("autoscaling", "*", []string{"horizontalpodautoscalers"}, all...),
		rule("policy", "v1", []string{"poddisruptionbudgets"}, all...),
		rule("discovery.k8s.io", "v1", []string{"endpointslices"}, all...),
	}, admissionv1.Variable{Name: "writer", Expression: string(b.waypointWriter())},
		admissionv1.Variable{Name: "kubernetes", Expression: b.kubernetes()},
		// The object's name: a deletecollection reaches admission once per object, without a
		// request name (k8s.io/apiserver pkg/registry/generic/registry/store.go DeleteCollection).
		admissionv1.Variable{Name: "name", Expression: "has(request.name) && request.name != '' ? request.name : " +
			"(oldObject != null && has(oldObject.metadata.name) ? oldObject.metadata.name : (object != null && has(object.metadata) && has(object.metadata.name) ? object.metadata.name : ''))"})
	// Kubernetes' controllers create pods from templates a webhook may have changed since (a
	// PodDefault can set a pod's ServiceAccount and labels): their pod creations are judged too,
	// and pass only as istiod's template makes the waypoint's pods.
	s.untrusted = "!(" + b.trustedUsers() + " || ((" + b.kubernetes() + ") && !(request.resource.resource == 'pods' && request.operation == 'CREATE')))"
	for _, c := range b.waypointWorkloadChecks() {
		c.Expression = string(anyOf("!variables.managed", "variables.writer", expr(c.Expression)))
		s.add(c)
	}
	return s
}

// waypointWriter is whether the request comes from istiod or from a node's kubelet or the
// scheduler, which run, delete and preempt the waypoint's pods and request their tokens (the
// Node authorizer confines a kubelet to the pods bound to its node).
func (b builder) waypointWriter() expr {
	var istiod []string
	for _, sa := range b.cfg.Guard.MeshServiceAccounts {
		ns, name, _ := strings.Cut(sa, "/")
		istiod = append(istiod, serviceAccountUser(ns, name))
	}
	return anyOf(in("request.userInfo.username", istiod...), "'system:nodes' in request.userInfo.groups", eq("request.userInfo.username", "system:kube-scheduler"))
}

// waypointWorkloadChecks are the waypoint policy's checks, each true when the request leaves the waypoint alone.
func (b builder) waypointWorkloadChecks() []Check {
	wp := b.cfg.Mesh.Waypoint.Name
	connect := expr("request.operation == 'CONNECT'")
	named := ("request.kind.kind + ' ' + request.namespace + '/' + request.name")
	return []Check{
		{ID: "objects", Asset: AssetWaypointWorkload,
			Passes:     "istiod; the kubelets and the scheduler",
			Source:     "istio pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go (canManage: istiod takes over an object of the Gateway's name that carries gateway.istio.io/managed, keeping other managers' fields)",
			Expression: string(anyOf(connect, not(allOf(in("request.resource.resource", waypointObjects...), eq("variables.name", wp))))),
			Message:    "the waypoint's Deployment, Service, autoscaler, disruption budget and endpoints are istiod's and Kubernetes' to write" + ask,
			MessageExpression: (named + " + ': istiod deploys the waypoint " + wp + " under this name, and the namespace\\'s policies run in it; " +
				"nobody else may create, change, scale or delete it, so choose another name" + ask + "'")},
		{ID: "service-account", Asset: AssetWaypointIdentity,
			Passes:     "istiod; the kubelets (tokens of the pods they run)",
			Source:     "the ztunnel policy admits the waypoint's ServiceAccount; istio security/pkg/server/ca authenticates a CSR by a token of it",
			Expression: string(anyOf(connect, not(allOf(eq("request.resource.resource", "serviceaccounts"), eq("variables.name", wp))))),
			Message:    "the waypoint's ServiceAccount and its tokens are istiod's and the kubelet's" + ask,
			MessageExpression: string("'ServiceAccount ' + request.namespace + '/' + request.name + (has(request.subResource) && request.subResource != '' ? ' (' + request.subResource + ')' : '') + " +
				"': the namespace\\'s ztunnel policy admits whoever holds this identity, and istiod certifies it for any token of it; " +
				"nobody else may create, change or delete it or request a token for it, so choose another name" + ask + "'")},
		{ID: "token-secret", Asset: AssetWaypointIdentity,
			Source:     "kubernetes pkg/controller/serviceaccount/tokens_controller.go fills a Secret of type " + string(corev1.SecretTypeServiceAccountToken) + " with a token of the ServiceAccount its annotation names",
			Expression: string(anyOf(expr("request.resource.resource != 'secrets'"), not(b.tokenSecretOf("object", wp)))),
			Message:    "a Secret may not hold a token of the waypoint's ServiceAccount" + ask,
			MessageExpression: string("'Secret ' + request.namespace + '/' + object.metadata.name + ': a Secret of type " + string(corev1.SecretTypeServiceAccountToken) +
				" naming the ServiceAccount " + wp + " is given its token, and with it the identity the namespace\\'s policies admit; name another ServiceAccount" + ask + "'")},
		{ID: "pods", Asset: AssetWaypointIdentity,
			Passes: "istiod; the kubelets and the scheduler; Kubernetes' controllers (the waypoint's ReplicaSet)",
			Source: "istio waypoint.yaml (the pods' serviceAccountName and labels), kube-gateway.yaml (an allowed Gateway's pods run as <name>-istio); the waypoint Service selects " + label.IoK8sNetworkingGatewayGatewayName.Name +
				"; projectcalico libcalico-go workloadendpoint.go annotates pods through pods/status",
			Expression: string(anyOf(expr("request.resource.resource != 'pods'"), connect,
				not(anyOf(b.waypointPod("object", wp), b.waypointPod("oldObject", wp))),
				allOf("variables.kubernetes", "request.operation == 'CREATE'", b.istiodsPod("object", wp)),
				// A CNI plugin annotates every pod through its status (Calico's podIP); the
				// status subresource keeps the spec, and the labels may not change there.
				allOf(eq("request.subResource", "status"), expr("object != null && oldObject != null"),
					expr("(has(object.metadata.labels) ? object.metadata.labels : {}) == (has(oldObject.metadata.labels) ? oldObject.metadata.labels : {})"),
					// Nor the status (istiod reads the pod's addresses and readiness from it:
					// pilot/pkg/serviceregistry/ambient/workloads.go), nor the finalizers.
					expr("(has(object.status) ? object.status : {}) == (has(oldObject.status) ? oldObject.status : {})"),
					expr("(has(object.metadata.finalizers) ? object.metadata.finalizers : []) == (has(oldObject.metadata.finalizers) ? oldObject.metadata.finalizers : [])")))),
			Message: "only Kubernetes' controllers make and change the waypoint's pods, and no other pod runs as its ServiceAccount or carries its labels" + ask,
			MessageExpression: (named + " + ': a pod that runs as the ServiceAccount " + wp + " or carries " + label.IoK8sNetworkingGatewayGatewayName.Name + " or " + label.GatewayManaged.Name +
				" holds the waypoint\\'s identity or takes its traffic; only the waypoint\\'s own ReplicaSet makes such pods, and nobody changes them, adds containers to them or deletes them; " +
				"run your pod as another ServiceAccount without those labels" + ask + "'")},
		{ID: "templates", Asset: AssetWaypointIdentity,
			Passes: "istiod (the waypoint's Deployment); Kubernetes' controllers (its ReplicaSets)",
			Source: "istio waypoint.yaml; kubernetes pkg/controller/replicaset makes a template's pods as kube-controller-manager",
			Expression: string(anyOf(not(in("request.resource.resource", templateKinds...)),
				not(anyOf(b.waypointTemplateOf("object", wp), b.waypointTemplateOf("oldObject", wp))))),
			Message: "only istiod's waypoint Deployment may have pods that run as the waypoint's ServiceAccount or carry its labels" + ask,
			MessageExpression: (named + " + ': its pod template runs as the ServiceAccount " + wp + " or carries " + label.IoK8sNetworkingGatewayGatewayName.Name + " or " + label.GatewayManaged.Name +
				", which would give its pods the waypoint\\'s identity or traffic; run them as another ServiceAccount without those labels" + ask + "'")},
		{ID: "endpoint-slices", Asset: AssetWaypointWorkload,
			Passes: "Kubernetes' EndpointSlice controller",
			Source: "istio pilot/pkg/serviceregistry/kube/controller/endpointslice.go reads every slice labelled " + discoveryv1.LabelServiceName,
			Expression: string(anyOf(expr("request.resource.resource != 'endpointslices'"),
				not(anyOf(allOf("object != null", labelIs("object.metadata", discoveryv1.LabelServiceName, wp)),
					allOf("oldObject != null", labelIs("oldObject.metadata", discoveryv1.LabelServiceName, wp)))))),
			Message: "the waypoint Service's endpoints are Kubernetes' to write" + ask,
			MessageExpression: (named + " + ': an EndpointSlice labelled " + discoveryv1.LabelServiceName + "=" + wp +
				" adds its addresses to the waypoint\\'s Service, which would send the namespace\\'s traffic there; label it for your own Service" + ask + "'")},
		{ID: "scaling", Asset: AssetWaypointWorkload,
			Passes: "istiod; Kubernetes' controllers (the Deployment controller scales the waypoint's ReplicaSets)",
			Source: "kubernetes pkg/controller/podautoscaler (an HPA scales the Deployment it names), pkg/controller/disruption (a PDB selecting the waypoint's pods holds their evictions), " +
				"pkg/registry/apps/replicaset (replicasets/scale); a waypoint ReplicaSet is named <waypoint>-<hash>",
			Expression: string(not(anyOf(
				allOf(eq("request.resource.resource", "replicasets"), eq("request.subResource", "scale"), expr("variables.name.startsWith("+quote(wp+"-")+")")),
				allOf(eq("request.resource.resource", "horizontalpodautoscalers"), expr("object != null"), field("object", "spec", "scaleTargetRef", "name"),
					// The waypoint's Deployment, or one of its ReplicaSets.
					anyOf(allOf(expr("!has(object.spec.scaleTargetRef.kind) || object.spec.scaleTargetRef.kind == 'Deployment'"), eq("object.spec.scaleTargetRef.name", wp)),
						allOf(expr("has(object.spec.scaleTargetRef.kind) && object.spec.scaleTargetRef.kind == 'ReplicaSet'"), expr("object.spec.scaleTargetRef.name.startsWith("+quote(wp+"-")+")")))),
				// A budget may select the waypoint's pods unless it requires a label they never
				// carry; a policy/v1 budget with an empty selector selects every pod of the namespace.
				allOf(eq("request.resource.resource", "poddisruptionbudgets"), expr("object != null"), anyOf(
					not(field("object", "spec", "selector")), not(b.selectorExcludesWaypoint("object.spec.selector")))),
			))),
			Message: "only istiod and Kubernetes scale the waypoint or budget its disruptions" + ask,
			MessageExpression: named + " + ': it scales the waypoint or holds its pods\\' evictions, which istiod sizes from the admin\\'s configuration; " +
				"target your own workloads" + ask + "'"},
		{ID: "service-selectors", Asset: AssetWaypointWorkload,
			Source: "kubernetes pkg/registry/core/service (services/proxy reaches the pods a Service selects); the waypoint's pods carry " + label.IoK8sNetworkingGatewayGatewayName.Name,
			Expression: string(not(allOf(eq("request.resource.resource", "services"), expr("object != null"), field("object", "spec", "selector"),
				not(b.mapExcludesWaypoint("object.spec.selector"))))),
			Message:           "a Service may not select the waypoint's pods" + ask,
			MessageExpression: named + " + ': its selector picks the waypoint\\'s pods, whose ports nobody but the mesh should reach; select your own pods" + ask + "'"},
		{ID: "trust-root", Asset: AssetWaypointWorkload,
			Passes:            "istiod (its namespace controller writes the ConfigMap in every namespace)",
			Source:            "istio pilot/pkg/bootstrap/namespacecontroller.go writes istio-ca-root-cert; waypoint.yaml mounts it, and pilot-agent verifies istiod by it",
			Expression:        string(not(allOf(eq("request.resource.resource", "configmaps"), eq("variables.name", b.cfg.Mesh.TrustBundleName)))),
			Message:           "the mesh's root certificate in this namespace is istiod's" + ask,
			MessageExpression: named + " + ': the waypoint and every sidecar of the namespace verify istiod by this root certificate, which istiod writes; leave it to istiod" + ask + "'"},
		{ID: "exec", Asset: AssetWaypointWorkload,
			Source: "kubernetes pkg/registry/core/pod/rest/subresources.go: exec, attach, port-forward and proxy are CONNECT requests naming the pod (a waypoint pod's name is the Deployment's, a ReplicaSet hash and a suffix)",
			Expression: string(anyOf(not(connect), not(anyOf(
				allOf(eq("request.resource.resource", "pods"), expr("request.name.split(':').exists(p, p.startsWith("+quote(wp+"-")+"))")),
				allOf(eq("request.resource.resource", "services"), expr(quote(wp)+" in request.name.split(':')")))))),
			Message: "nobody execs, attaches, port-forwards or proxies to the waypoint" + ask,
			MessageExpression: string("request.resource.resource + '/' + request.subResource + ' ' + request.namespace + '/' + request.name + " +
				"': the waypoint runs the namespace\\'s policies with the identity its ztunnel policy admits, so nobody may run commands in it or reach it past them; " +
				"pods named " + wp + "-* are taken for the waypoint\\'s, so name your own pods otherwise" + ask + "'")},
	}
}

// runsAs is whether the pod spec s (CEL) runs as the ServiceAccount sa; serviceAccount is the
// deprecated spelling the API server still reads.
func runsAs(s, sa string) string {
	e := expr(s)
	return string(anyOf(allOf(field(e, "serviceAccountName"), eq(e+".serviceAccountName", sa)), allOf(field(e, "serviceAccount"), eq(e+".serviceAccount", sa))))
}

// waypointPod is whether the pod o (CEL, possibly null) is, or passes for, one of the waypoint's:
// it runs as its ServiceAccount, or carries the Gateway API's gateway-name label, by which the
// waypoint Service selects its pods, or istiod's managed label.
func (b builder) waypointPod(o, sa string) expr {
	e := expr(o)
	return allOf(expr(o+" != null"), anyOf(
		allOf(field(e, "metadata", "labels"), expr(o+".metadata.labels.exists(k, k in "+string(list(label.IoK8sNetworkingGatewayGatewayName.Name, label.GatewayManaged.Name))+")")),
		allOf(field(e, "spec"), expr(runsAs(o+".spec", sa)))))
}

// istiodsPod is whether the pod o (CEL) is one istiod's templates make: istiod's managed label,
// and either the waypoint's ServiceAccount and Gateway name, or the name of a Gateway the admin
// allows (guard.meshConfigAllowed) and not the waypoint's ServiceAccount. No webhook a tenant
// feeds may add the managed label (the kubeflow policy refuses keys of Istio's domain on
// PodDefaults and Katib's objects), and no template but istiod's carries it.
func (b builder) istiodsPod(o, sa string) expr {
	e := expr(o)
	managed := allOf(field(e, "metadata", "labels"), lit(label.GatewayManaged.Name)+" in "+e+".metadata.labels")
	// The waypoint's own pod comes from a ReplicaSet of istiod's waypoint Deployment, whose name
	// is the waypoint's (waypoint.yaml), named <waypoint>-<pod-template-hash> by the Deployment
	// controller (a hash of letters and digits, no '-'): not from another Gateway's Deployment
	// rendered to look like it (an allowed Gateway's parametersRef overlay), nor from a
	// Deployment named <waypoint>-<anything> made before the guard (the final review of Dec 5).
	fromWaypointReplicaSet := allOf(field(e, "metadata", "ownerReferences"), expr(o+".metadata.ownerReferences.exists(r, r.kind == 'ReplicaSet' && has(r.controller) && r.controller && r.name.matches("+quote("^"+regexp.QuoteMeta(sa)+"-[a-z0-9]+$")+"))"))
	waypointsOwn := allOf(expr(runsAs(o+".spec", sa)), labelIs(e+".metadata", label.IoK8sNetworkingGatewayGatewayName.Name, sa), fromWaypointReplicaSet)
	var allowed []string
	for _, m := range b.cfg.Guard.MeshConfigAllowed {
		if m.Kind == "Gateway" {
			allowed = append(allowed, m.Name)
		}
	}
	gwName := label.IoK8sNetworkingGatewayGatewayName.Name
	allowedOwn := allOf(not(expr(runsAs(o+".spec", sa))), field(e, "metadata", "labels"), lit(gwName)+" in "+e+".metadata.labels",
		in(e+".metadata.labels["+lit(gwName)+"]", allowed...))
	return allOf(expr(o+" != null"), field(e, "spec"), managed, anyOf(waypointsOwn, allowedOwn))
}

// waypointTemplateOf is whether the workload o (CEL, possibly null) has a pod template of the
// waypoint's: spec.template, or a CronJob's spec.jobTemplate.spec.template.
func (b builder) waypointTemplateOf(o, sa string) expr {
	e := expr(o)
	cron := allOf(field(e, "spec", "jobTemplate", "spec", "template"), b.waypointPod(o+".spec.jobTemplate.spec.template", sa))
	other := allOf(field(e, "spec", "template"), b.waypointPod(o+".spec.template", sa))
	return allOf(expr(o+" != null"), expr("(request.resource.resource == 'cronjobs' ? "+string(cron)+" : "+string(other)+")"))
}

// tokenSecretOf is whether the Secret o (CEL) is a ServiceAccount token Secret naming sa.
func (b builder) tokenSecretOf(o, sa string) expr {
	e := expr(o)
	return allOf(expr(o+" != null"), field(e, "type"), eq(e+".type", string(corev1.SecretTypeServiceAccountToken)),
		field(e, "metadata", "annotations"), lit(corev1.ServiceAccountNameKey)+" in "+e+".metadata.annotations",
		eq(e+".metadata.annotations["+lit(corev1.ServiceAccountNameKey)+"]", sa))
}
