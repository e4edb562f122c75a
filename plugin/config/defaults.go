package config

import psaapi "k8s.io/pod-security-admission/api"

// Defaults, as documented on each field.
const (
	DefaultTrustDomain       = "cluster.local"
	DefaultWaypointName      = "waypoint"
	DefaultWaypointClassName = "istio-waypoint"
	DefaultWaypointFor       = "service"
	DefaultOwnerPolicyName   = "ns-owner-access-istio"
	DefaultZtunnelPolicyName = "ns-owner-access-istio-ztunnel"
	DefaultRootNamespace     = "istio-system"
	DefaultUserIDHeader      = "kubeflow-userid"
	DefaultIstiodNamespace   = "istio-system"
)

// Names of the default platform callers.
const (
	CallerPipelinesUI        = "pipelines-ui"
	CallerNotebookController = "notebook-controller"
	CallerKatibController    = "katib-controller"
)

// KernelsPath is what the notebook controller's culler polls to find idle notebooks.
const KernelsPath = "*/api/kernels"

// DefaultHealthPaths are the paths the profiles controller has always left open.
var DefaultHealthPaths = []string{"/healthz", "/metrics", "/wait-for-drain"}

// Default returns the configuration used when the admin gives none.
func Default() *Config {
	c := &Config{APIVersion: APIVersion, Kind: Kind}
	c.SetDefaults()
	return c
}

// SetDefaults fills every empty field with its documented default.
func (c *Config) SetDefaults() {
	m := &c.Mesh
	setIfEmpty(&m.Mode, ModeAmbient)
	setIfEmpty(&m.TrustDomain, DefaultTrustDomain)
	setIfEmpty(&m.Waypoint.Name, DefaultWaypointName)
	setIfEmpty(&m.Waypoint.ClassName, DefaultWaypointClassName)
	setIfEmpty(&m.Waypoint.For, DefaultWaypointFor)
	setIfEmpty(&m.RootNamespace, DefaultRootNamespace)
	setIfEmpty(&m.IstiodNamespace, DefaultIstiodNamespace)
	setIfNil(&m.IngressUseWaypoint, true)
	setIfNil(&m.IstioCNI, true)
	setIfNil(&m.Waypoint.SeccompPatch, false)

	a := &c.Authorization
	setIfEmpty(&a.OwnerPolicyName, DefaultOwnerPolicyName)
	setIfEmpty(&a.ZtunnelPolicyName, DefaultZtunnelPolicyName)
	setIfEmpty(&a.UserIDHeader, DefaultUserIDHeader)
	setIfEmpty(&a.Contributors, ContributorsByKfam)
	setIfNil(&a.KatibRule, true)
	if a.HealthPaths == nil {
		a.HealthPaths = append([]string(nil), DefaultHealthPaths...)
	}
	td := m.TrustDomain
	setIfEmpty(&a.Principals.IngressGateway, Principal(td, "istio-system", "istio-ingressgateway-service-account"))
	setIfEmpty(&a.Principals.PipelinesUI, Principal(td, "kubeflow", "ml-pipeline-ui"))
	setIfEmpty(&a.Principals.NotebookController, Principal(td, "kubeflow", "notebook-controller-service-account"))
	setIfEmpty(&a.Principals.KatibController, Principal(td, "kubeflow", "katib-controller"))
	if a.PlatformCallers == nil {
		a.PlatformCallers = a.defaultCallers()
	}
	for i := range a.PlatformCallers {
		setIfEmpty(&a.PlatformCallers[i].DataPlane, CallerAmbient)
	}

	p := &c.PodSecurity
	setIfEmpty(&p.Enforce.Level, psaapi.LevelBaseline)
	setIfEmpty(&p.Audit.Level, psaapi.LevelRestricted)
	setIfEmpty(&p.Warn.Level, psaapi.LevelRestricted)
	setIfEmpty(&p.Preflight, PreflightApply)
	for _, lv := range []*LevelVersion{&p.Enforce, &p.Audit, &p.Warn} {
		setIfEmpty(&lv.Version, psaapi.VersionLatest)
	}

	setIfEmpty(&c.Namespaces.Ownership, OwnershipReferenceOrAnnotation)
}

// defaultCallers are the callers the profiles controller's owner policy has always trusted.
func (a *Authorization) defaultCallers() []PlatformCaller {
	callers := []PlatformCaller{
		{Name: CallerPipelinesUI, Principal: a.Principals.PipelinesUI, OnBehalfOfUser: true},
		{Name: CallerNotebookController, Principal: a.Principals.NotebookController, Methods: []string{"GET"}, Paths: []string{KernelsPath}},
	}
	if a.KatibRule == nil || *a.KatibRule {
		// Katib's controller calls the suggestion and early-stopping services that Katib runs in
		// the user namespace for each experiment.
		callers = append(callers, PlatformCaller{Name: CallerKatibController, Principal: a.Principals.KatibController})
	}
	return callers
}

// Principal formats the SPIFFE principal of a service account as Istio writes it in policies.
func Principal(trustDomain, namespace, serviceAccount string) string {
	return trustDomain + "/ns/" + namespace + "/sa/" + serviceAccount
}

func setIfEmpty[T ~string](field *T, value T) {
	if *field == "" {
		*field = value
	}
}

func setIfNil[T any](field **T, value T) {
	if *field == nil {
		*field = &value
	}
}
