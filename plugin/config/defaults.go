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
)

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
	setIfNil(&m.IngressUseWaypoint, true)
	setIfNil(&m.IstioCNI, true)
	setIfNil(&m.Waypoint.SeccompPatch, true)

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
