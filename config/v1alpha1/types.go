package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
)

const (
	// APIVersion is the apiVersion of the configuration document.
	APIVersion = "profile-plugins.kubeflow-ambient.io/v1alpha1"
	// Kind is the kind of the configuration document.
	Kind = "PluginConfig"
)

// Config configures every plugin. The zero value is not valid; use [Default] or [Parse].
type Config struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`

	// Mesh selects the data plane user namespaces join and how.
	Mesh Mesh `json:"mesh,omitempty"`
	// Authorization shapes the owner and contributor access policies.
	Authorization Authorization `json:"authorization,omitempty"`
	// PodSecurity sets the Pod Security Standards labels of user namespaces.
	PodSecurity PodSecurity `json:"podSecurity,omitempty"`
	// Namespaces decides which namespaces are a Profile's to write into.
	Namespaces Namespaces `json:"namespaces,omitempty"`
	// Guard configures the admission guard (package guard): who, besides the controller, may
	// change what the plugins manage.
	Guard Guard `json:"guard,omitempty"`
}

// Guard configures the admission guard: ValidatingAdmissionPolicies that refuse, in the managed
// namespaces, every change of what the plugins manage by anyone but the controller and the
// break-glass group.
type Guard struct {
	// ControllerServiceAccount is the ServiceAccount the controller runs as, "namespace/name"; its
	// requests are never refused. Default: kubeflow/profile-plugins (the deployment's). A fork of
	// the profiles controller names its own, such as kubeflow/profiles-controller-service-account.
	ControllerServiceAccount string `json:"controllerServiceAccount,omitempty"`
	// BreakGlassGroup is the group whose members the guard never refuses: cluster admins repair
	// by impersonating it (kubectl --as=$USER --as-group=<group> --as-group=system:authenticated),
	// which needs the right to impersonate groups. Default: profile-plugins.kubeflow-ambient.io:break-glass.
	BreakGlassGroup string `json:"breakGlassGroup,omitempty"`
	// MeshServiceAccounts may create workloads whose pods opt out of the mesh: istiod, which
	// labels the waypoint pods istio.io/dataplane-mode=none. "namespace/name" each. Default:
	// [istio-system/istiod].
	MeshServiceAccounts []string `json:"meshServiceAccounts,omitempty"`
	// OptOutAllowed are the pods that may opt out of the mesh although their namespace is managed:
	// each entry names a namespace and the ServiceAccount the pods run as. Default: none.
	OptOutAllowed []OptOut `json:"optOutAllowed,omitempty"`
	// PolicyWriters may create and change ALLOW AuthorizationPolicies in the managed namespaces,
	// besides the controller: kfam, which writes a contributor's policy, and the stock profiles
	// controller beside the plugins. "namespace/name" each. Default:
	// [kubeflow/profiles-controller-service-account] (both run as it in kubeflow/manifests).
	PolicyWriters []string `json:"policyWriters,omitempty"`
	// MeshConfigAllowed are the objects of Istio's mesh configuration the guard lets into the
	// managed namespaces although they could widen what a namespace admits or skip its waypoint
	// (EnvoyFilters, WasmPlugins, ProxyConfigs, Sidecars, PeerAuthentications, ServiceEntries,
	// WorkloadEntries, WorkloadGroups, Gateways other than the waypoint, ALLOW policies of other
	// writers), each by kind and name. Default: none.
	MeshConfigAllowed []MeshObject `json:"meshConfigAllowed,omitempty"`
	// KatibControllerServiceAccount is the ServiceAccount Katib's controller runs as,
	// "namespace/name". In sidecar mode the Deployment it writes for an Experiment's Suggestion
	// (controlled by the Suggestion, its pod template labelled katib.kubeflow.org/suggestion), and
	// the pods kube-controller-manager makes of it, may carry Katib's sidecar.istio.io/inject=false,
	// and no other template may carry Katib's suggestion labels. Default: kubeflow/katib-controller
	// (Katib's manifests); "" turns the exemption off, and Katib's suggestions are then refused in
	// sidecar mode.
	KatibControllerServiceAccount *string `json:"katibControllerServiceAccount,omitempty"`
}

// KatibController is guard.katibControllerServiceAccount, "" when the exemption is off.
func (g Guard) KatibController() string {
	if g.KatibControllerServiceAccount == nil {
		return ""
	}
	return *g.KatibControllerServiceAccount
}

// MeshObject names an object of Istio's or the Gateway API's by kind (EnvoyFilter, Gateway, ...)
// and name, in every managed namespace.
type MeshObject struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// OptOut names pods that may opt out of the mesh: those running as ServiceAccount in Namespace.
type OptOut struct {
	Namespace      string `json:"namespace"`
	ServiceAccount string `json:"serviceAccount"`
}

// NamespaceOwnership is the rule by which a namespace belongs to a Profile.
type NamespaceOwnership string

const (
	// OwnershipReferenceOrAnnotation accepts a namespace the Profile controls (an owner reference
	// with the Profile's UID) or, when nothing controls it, one whose "owner" annotation equals
	// spec.owner.name: the profiles controller's own rule for namespaces an admin made beforehand.
	OwnershipReferenceOrAnnotation NamespaceOwnership = "ownerReferenceOrAnnotation"
	// OwnershipReference accepts only a namespace the Profile controls.
	OwnershipReference NamespaceOwnership = "ownerReference"
)

// Namespaces configures which namespaces the runner writes into.
type Namespaces struct {
	// Ownership is ownerReferenceOrAnnotation or ownerReference. Default: ownerReferenceOrAnnotation.
	Ownership NamespaceOwnership `json:"ownership,omitempty"`
	// Reserved are more namespaces (names or shell patterns such as "monitoring-*") that no
	// Profile may have, on top of those always reserved: kube-*, default, mesh.rootNamespace,
	// mesh.istiodNamespace, the ingress gateway's namespace, every platform caller's and every L4 exception's (by namespace,
	// principal or service account; an ipBlocks exception names none). Default: none.
	Reserved []string `json:"reserved,omitempty"`
}

// MeshMode is how user namespaces join the Istio mesh.
type MeshMode string

const (
	// ModeAmbient enrols namespaces in Istio's ambient mesh with a waypoint each.
	ModeAmbient MeshMode = "ambient"
	// ModeSidecar labels namespaces for sidecar injection, as Kubeflow always has.
	ModeSidecar MeshMode = "sidecar"
	// ModeNone manages no mesh objects or labels.
	ModeNone MeshMode = "none"
)

// Mesh configures the data plane.
type Mesh struct {
	// Mode is ambient, sidecar or none. Default: ambient.
	Mode MeshMode `json:"mode,omitempty"`
	// TrustDomain is the mesh's SPIFFE trust domain, used in every principal this module writes.
	// Default: cluster.local.
	TrustDomain string `json:"trustDomain,omitempty"`
	// Revision, when set, is written as the istio.io/rev label on namespaces and waypoints.
	// Default: none.
	Revision string `json:"revision,omitempty"`
	// RootNamespace is Istio's root namespace, home of mesh-wide policies. Default: istio-system.
	RootNamespace string `json:"rootNamespace,omitempty"`
	// IngressUseWaypoint sets istio.io/ingress-use-waypoint=true in ambient mode so that requests
	// from the ingress gateway pass the waypoint's L7 policy too. It must stay true in ambient
	// mode: the ztunnel policy admits the ingress only through the waypoint. Default: true.
	IngressUseWaypoint *bool `json:"ingressUseWaypoint,omitempty"`
	// IstioCNI says whether Istio's CNI node agent is installed, as Kubeflow's manifests install
	// it. Without it, sidecar injection adds an istio-init container that needs NET_ADMIN and
	// NET_RAW, which Pod Security baseline and restricted forbid, so sidecar mode with
	// istioCNI: false requires enforce "privileged". Ambient mode always runs on istio-cni.
	// Default: true.
	IstioCNI *bool `json:"istioCNI,omitempty"`
	// Waypoint configures the per-namespace waypoint in ambient mode.
	Waypoint Waypoint `json:"waypoint,omitempty"`
	// IstiodNamespace is the namespace istiod runs in (its POD_NAMESPACE): istiod reads the
	// waypoint class defaults (the ConfigMap labelled gateway.istio.io/defaults-for-class) only
	// there, not in the root namespace. Default: istio-system.
	IstiodNamespace string `json:"istiodNamespace,omitempty"`
	// TrustBundleName is the ConfigMap istiod writes in every namespace with the mesh's root
	// certificate, which the waypoint mounts (Istio's values.global.trustBundleName, istiod's
	// PILOT_CA_CERT_CONFIGMAP); the guard reserves it in managed namespaces.
	// Default: istio-ca-root-cert.
	TrustBundleName string `json:"trustBundleName,omitempty"`
}

// Waypoint configures the waypoint Gateway.
type Waypoint struct {
	// Name of the Gateway (and of its ServiceAccount). Default: waypoint.
	Name string `json:"name,omitempty"`
	// ClassName is the GatewayClass. Default: istio-waypoint.
	ClassName string `json:"className,omitempty"`
	// For is the istio.io/waypoint-for label: service or all ("workload" is refused: the ingress
	// sends only Service traffic to a waypoint). Default: service.
	For string `json:"for,omitempty"`
	// Namespace, when set, asks for one shared waypoint in that namespace instead of one per
	// user namespace. It is refused: see the validation message for why. Default: empty.
	Namespace string `json:"namespace,omitempty"`
	// SeccompPatch is an opt-in: a ConfigMap <name>-seccomp in each user namespace, referenced
	// from the Gateway's spec.infrastructure.parametersRef, that sets the waypoint pod's
	// seccompProfile to RuntimeDefault (istiod 1.26+ applies it as a strategic merge patch to the
	// waypoint Deployment). Namespace editors can write ConfigMaps there, and through this one the
	// waypoint's image and containers; the runner restores any change and keeps the namespace off
	// the waypoint until it has, but prefer the class defaults: one ConfigMap in
	// IstiodNamespace, written by admins only (`render -cluster`, waypoint.ClassDefaults), which
	// makes the waypoint admissible under Pod Security "restricted" without this. Default: false.
	SeccompPatch *bool `json:"seccompPatch,omitempty"`
	// Labels and Annotations go on the Gateway's spec.infrastructure, which istiod copies onto the
	// waypoint's Deployment, Pods, Service and ServiceAccount. Default: none.
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Provision is always (a waypoint in every user namespace, as before) or onDemand (a waypoint
	// only while the namespace has a Service endpoint, ready or not, and for IdleAfter after the
	// last one went). Idle or not, the ztunnel, owner and contributor policies and the
	// dataplane-mode label stay: only the Gateway and the routing labels come and go. See
	// docs/ondemand.md. Default: always, so that an upgrade changes nothing by itself.
	Provision WaypointProvision `json:"provision,omitempty"`
	// IdleAfter is how long a namespace with onDemand keeps its waypoint after its last Service
	// endpoint went: endpoints that come back within it find the waypoint still routed. Default: 30m.
	IdleAfter *metav1.Duration `json:"idleAfter,omitempty"`
	// IgnoredServices selects, by the Service's labels (which Kubernetes copies onto its
	// EndpointSlices), Services whose endpoints do not count as activity: servers a platform runs
	// in every namespace around the clock. While the namespace is idle their callers meet the
	// ztunnel policy alone, so only L4 exceptions and the namespace's own pods reach them.
	// An empty selector (which would ignore every Service) is refused. The controller's cache
	// keeps of each slice only the labels this selects on and those it decides by, so a program
	// builds its cache options from the plugins (runner.CacheOptions). Default: none.
	IgnoredServices *metav1.LabelSelector `json:"ignoredServices,omitempty"`

	// WaypointSizing (resources, replicas, podDisruptionBudget, autoscaling, sizingOverrides)
	// sits inline: its fields are mesh.waypoint's own.
	WaypointSizing `json:",inline"`
}

// WaypointProvision says when a user namespace has its waypoint.
type WaypointProvision string

const (
	// ProvisionAlways keeps a waypoint in every user namespace.
	ProvisionAlways WaypointProvision = "always"
	// ProvisionOnDemand keeps one only while the namespace has something it serves.
	ProvisionOnDemand WaypointProvision = "onDemand"
)

// Authorization configures the access policies.
type Authorization struct {
	// OwnerPolicyName is the owner's AuthorizationPolicy. Default: ns-owner-access-istio.
	OwnerPolicyName string `json:"ownerPolicyName,omitempty"`
	// ZtunnelPolicyName is the namespace-wide L4 policy of ambient mode, which admits only the
	// waypoint, the namespace itself and L4Exceptions. Default: ns-owner-access-istio-ztunnel.
	ZtunnelPolicyName string `json:"ztunnelPolicyName,omitempty"`
	// UserIDHeader carries the authenticated user at the ingress. Default: kubeflow-userid.
	UserIDHeader string `json:"userIdHeader,omitempty"`
	// UserIDPrefix is put before the user in that header. Default: empty.
	UserIDPrefix string `json:"userIdPrefix,omitempty"`
	// Principals of the Kubeflow components that call into user namespaces.
	Principals Principals `json:"principals,omitempty"`
	// HealthPaths are reachable without identity, for kubelet probes through the mesh.
	// Default: /healthz, /metrics, /wait-for-drain.
	HealthPaths []string `json:"healthPaths"`
	// L4Exceptions are sources the ambient ztunnel policy admits directly, without the waypoint,
	// such as a monitoring namespace that scrapes pod IPs. They bypass every L7 rule, so list
	// only what must. An exception that covers the ingress gateway or a platform caller with
	// onBehalfOfUser, such as the Pipelines UI (by namespace, principal or service account), is
	// refused: both are admitted only with the user-id header, which only the waypoint checks.
	// Default: none.
	L4Exceptions []L4Exception `json:"l4Exceptions,omitempty"`
	// Contributors says who writes the per-contributor policies: "kfam" (the access-management
	// service, as today) or "plugin" (this module, from kfam's RoleBindings, taking over the
	// policies kfam made under the same names). In ambient mode kfam's own policies lack
	// targetRefs and deny contributors, so choose "plugin" there. Default: kfam.
	Contributors ContributorsSource `json:"contributors,omitempty"`
	// KfamGracePeriod is how long, with contributors "plugin", the plugin leaves a contributor's
	// policy to kfam. kfam creates a contributor's RoleBinding and then POSTs the policy, and on
	// removal deletes the binding and then the policy; each answers the dashboard with an error
	// when the plugin made or deleted the policy first. So the plugin creates no policy for a
	// binding younger than this (kfam's POST comes first, and the plugin takes it over), and when
	// a binding goes it empties its policy at once, so it admits no one, and leaves the empty
	// policy for kfam's delete for this long before deleting it itself. Neither wait grants
	// access: a new contributor reaches the namespace once the policy is there, a removed one
	// loses access as soon as the binding is gone. 0s turns both waits off. At most 5m.
	// Default: 10s.
	KfamGracePeriod *metav1.Duration `json:"kfamGracePeriod,omitempty"`
	// AdoptOwnerPolicy lets the plugin take over an owner policy another writer made under
	// OwnerPolicyName (the profiles controller, before it used this module). Without it such a
	// policy is reported as a conflict and left alone. Default: false.
	AdoptOwnerPolicy bool `json:"adoptOwnerPolicy,omitempty"`
	// PlatformCallers are the Kubeflow services that call into user namespaces on their own
	// identity: who each is, what the owner policy lets it reach, and the data plane its own pods
	// run on. Setting the list replaces the defaults, and then principals.pipelinesUI,
	// notebookController, katibController and katibRule, which only build the default list, must
	// keep their defaults (a different value is an error saying that platformCallers wins).
	// Default: "pipelines-ui" (on behalf of a user), "notebook-controller" (the culler: GET
	// */api/kernels) and, with katibRule, "katib-controller" (any request), all "ambient", with the
	// principals of Principals. An empty list trusts no platform caller; the field is written out
	// even when empty (no omitempty), so that a configuration written back keeps that meaning
	// instead of turning into the defaults.
	PlatformCallers []PlatformCaller `json:"platformCallers"`
	// KatibRule adds the "katib-controller" platform caller to the default list, admitting
	// Principals.KatibController: Katib's controller calls the suggestion and early-stopping
	// services it runs in user namespaces. The profiles controller never wrote this rule; false
	// keeps the owner policy as it was. With platformCallers set it must stay true (leave the
	// entry out of the list instead). Default: true.
	KatibRule *bool `json:"katibRule,omitempty"`
}

// CallerDataPlane is how a platform caller's own pods join the mesh.
type CallerDataPlane string

const (
	// CallerAmbient callers are enrolled in ambient: their calls to a user namespace's Services
	// go through its waypoint, which applies the caller's L7 rule.
	CallerAmbient CallerDataPlane = "ambient"
	// CallerSidecar callers run Istio sidecars, which never send through a waypoint: their calls
	// reach the destination pod's ztunnel directly, so they need an L4 rule in the ztunnel policy,
	// where their methods and paths cannot be checked. Refused for an onBehalfOfUser caller in
	// ambient mode: the L4 rule would admit it without the user-id header, for every user.
	CallerSidecar CallerDataPlane = "sidecar"
)

// PlatformCaller is one Kubeflow service the owner policy trusts.
type PlatformCaller struct {
	// Name identifies the caller in messages, e.g. "notebook-controller". Required and unique.
	Name string `json:"name"`
	// Principal is the caller's SPIFFE principal (<trust domain>/ns/<namespace>/sa/<name>).
	Principal string `json:"principal"`
	// DataPlane is ambient or sidecar. Default: ambient.
	DataPlane CallerDataPlane `json:"dataPlane,omitempty"`
	// OnBehalfOfUser admits the caller only with the user-id header naming the owner (or, in a
	// contributor's policy, the contributor), as the ingress gateway is admitted: for a service
	// that forwards requests for any user, such as the Pipelines UI or Knative's activator. It
	// joins the ingress gateway in the header rule, so it takes no methods, paths or ports. Other
	// callers are admitted by the owner policy without the header, within their methods, paths
	// and ports. Default: false.
	OnBehalfOfUser bool `json:"onBehalfOfUser,omitempty"`
	// Methods (upper-case, such as GET) and Paths (absolute, or with one '*' at the start or end
	// for a suffix or prefix match, as Istio reads it) limit what the caller may request at the
	// waypoint. Empty means any.
	Methods []string `json:"methods,omitempty"`
	Paths   []string `json:"paths,omitempty"`
	// Ports limit the destination ports, at the waypoint and in a sidecar caller's L4 rule (where
	// ztunnel compares the pod's port, the Service's targetPort). Empty means every port.
	Ports []int32 `json:"ports,omitempty"`
}

// ContributorsSource says who writes contributor policies.
type ContributorsSource string

const (
	ContributorsByKfam   ContributorsSource = "kfam"
	ContributorsByPlugin ContributorsSource = "plugin"
)

// L4Exception is one source the ztunnel policy admits. Set exactly one of Namespaces, Principals,
// ServiceAccounts or IPBlocks (Istio refuses serviceAccounts mixed with the others in one source).
type L4Exception struct {
	// Namespaces admits every workload of these namespaces.
	Namespaces []string `json:"namespaces,omitempty"`
	// Principals admits these SPIFFE principals (<trust domain>/ns/<ns>/sa/<sa>).
	Principals []string `json:"principals,omitempty"`
	// ServiceAccounts admits these service accounts, as <namespace>/<name>, in any trust domain.
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`
	// IPBlocks admits connections whose source address is in these CIDR ranges (or single
	// addresses): the only way to name a client outside the mesh, such as a Prometheus without a
	// sidecar, whose connections carry no identity. A /0 is refused, and so are entries that
	// together (across every exception) cover all of IPv4 or all of IPv6, and IPv4-mapped IPv6
	// entries (::ffff:10.8.3.4: write 10.8.3.4); a range wider than /16 (IPv4) or /48 (IPv6) is a
	// warning (see [Config.Warnings]): every pod or waypoint whose IP falls in a range is admitted
	// too. platform.Check reports a range holding a pod IP of the ingress gateway or
	// of an onBehalfOfUser platform caller.
	IPBlocks []string `json:"ipBlocks,omitempty"`
	// Ports limits the exception to these destination ports. Empty means every port.
	Ports []int32 `json:"ports,omitempty"`
}

// Principals are SPIFFE principals (<trust domain>/ns/<namespace>/sa/<service account>). Each
// default uses Mesh.TrustDomain. All but IngressGateway only build the default PlatformCallers.
type Principals struct {
	// IngressGateway forwards users' requests. Default: istio-system/istio-ingressgateway-service-account.
	IngressGateway string `json:"ingressGateway,omitempty"`
	// PipelinesUI reads pipeline artifacts for the user. Default: kubeflow/ml-pipeline-ui.
	PipelinesUI string `json:"pipelinesUI,omitempty"`
	// NotebookController polls notebook kernels. Default: kubeflow/notebook-controller-service-account.
	NotebookController string `json:"notebookController,omitempty"`
	// KatibController collects trial metrics. Default: kubeflow/katib-controller.
	KatibController string `json:"katibController,omitempty"`
}

// PodSecurity configures the pod-security.kubernetes.io labels.
type PodSecurity struct {
	// Enforce rejects violating pods. Default: baseline at latest.
	Enforce LevelVersion `json:"enforce,omitempty"`
	// Audit records violations in the audit log. Default: restricted at latest.
	Audit LevelVersion `json:"audit,omitempty"`
	// Warn warns the user who creates a violating pod. Default: restricted at latest.
	Warn LevelVersion `json:"warn,omitempty"`
	// Overrides let matching profiles choose a looser enforce level through a PodSecurity entry
	// in spec.plugins. Any profile may choose stricter levels; none may loosen audit or warn.
	// Default: none, so no profile can loosen anything.
	Overrides []PodSecurityOverride `json:"overrides,omitempty"`
	// Preflight decides what happens when enforce is tightened on a namespace whose running pods
	// would violate the new level: "apply" (tighten anyway and report the pods, as the API server
	// does) or "hold" (keep the current level and report until the pods comply). Default: apply.
	Preflight PreflightAction `json:"preflight,omitempty"`
}

// PreflightAction is what to do when tightening enforce would leave violating pods behind.
type PreflightAction string

const (
	PreflightApply PreflightAction = "apply"
	PreflightHold  PreflightAction = "hold"
)

// PodSecurityOverride allows the profiles whose namespace's labels match NamespaceSelector a looser
// enforce level. Only labels the admin controls may grant it: users cannot edit Namespaces in
// Kubeflow, and the profiles controller copies the labels of its namespace-labels.yaml onto every
// namespace. Validation refuses keys whose value follows the Profile: kubernetes.io/metadata.name
// (the API server sets it to the namespace's, that is the Profile's, name),
// istio.io/use-waypoint-namespace and the labels the plugins write.
type PodSecurityOverride struct {
	// Profiles is refused by validation: a Profile's name is chosen by the user who registers it,
	// so it cannot grant anything. The field stays so that such a configuration gets an error
	// that says so, rather than an unknown-field error.
	Profiles []string `json:"profiles,omitempty"`
	// NamespaceSelector matches the labels of the Profile's namespace. Required.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// MinimumEnforce is the loosest enforce level a matching profile may choose.
	MinimumEnforce psaapi.Level `json:"minimumEnforce"`
}

// LevelVersion is a Pod Security level and the version of its checks.
type LevelVersion struct {
	// Level is privileged, baseline or restricted.
	Level psaapi.Level `json:"level,omitempty"`
	// Version is latest or v1.<minor>. Default: latest.
	Version string `json:"version,omitempty"`
}
