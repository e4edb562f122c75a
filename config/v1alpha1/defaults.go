package v1alpha1

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
)

// Defaults, as documented on each field.
const (
	DefaultTrustDomain       = "cluster.local"
	DefaultWaypointName      = "waypoint"
	DefaultWaypointClassName = "istio-waypoint"
	DefaultWaypointFor       = "service"
	DefaultOwnerPolicyName   = "ns-owner-access-istio"
	DefaultZtunnelPolicyName = "ns-owner-access-istio-ztunnel"
	// DefaultKfamGracePeriod is authorization.kfamGracePeriod's default: kfam sends its second
	// request milliseconds after the first, so this is ample, and short enough that a binding
	// made without kfam gets its policy soon.
	DefaultKfamGracePeriod = 10 * time.Second
	// MaxKfamGracePeriod bounds authorization.kfamGracePeriod.
	MaxKfamGracePeriod     = 5 * time.Minute
	DefaultRootNamespace   = "istio-system"
	DefaultUserIDHeader    = "kubeflow-userid"
	DefaultIstiodNamespace = "istio-system"
	// DefaultTrustBundleName is Istio's default name of the root-certificate ConfigMap.
	DefaultTrustBundleName = "istio-ca-root-cert"
	// DefaultIdleAfter outlasts the gaps of a namespace in use (a pod restarting, a rolling
	// update, a notebook stopped and started again) by far and a waypoint's start by two orders
	// of magnitude, and is short beside a working day: see docs/ondemand.md.
	DefaultIdleAfter = 30 * time.Minute
	// DefaultPolicyWriter is guard.policyWriters' default: the ServiceAccount kubeflow/manifests
	// runs the profiles controller and kfam as.
	DefaultPolicyWriter = "kubeflow/profiles-controller-service-account"
	// DefaultControllerServiceAccount is the ServiceAccount deploy/ runs the controller as.
	DefaultControllerServiceAccount = "kubeflow/profile-plugins"
	// DefaultKatibControllerServiceAccount is the ServiceAccount Katib's manifests run its
	// controller as.
	DefaultKatibControllerServiceAccount = "kubeflow/katib-controller"
	// DefaultBreakGlassGroup is the group the admission guard never refuses (see Guard).
	DefaultBreakGlassGroup = "profile-plugins.kubeflow-ambient.io:break-glass"
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
	setIfEmpty(&m.TrustBundleName, DefaultTrustBundleName)
	setIfNil(&m.IngressUseWaypoint, true)
	setIfNil(&m.IstioCNI, true)
	setIfNil(&m.Waypoint.SeccompPatch, false)
	setIfEmpty(&m.Waypoint.Provision, ProvisionAlways)
	setIfNil(&m.Waypoint.IdleAfter, metav1.Duration{Duration: DefaultIdleAfter})
	m.Waypoint.SetSizingDefaults()

	a := &c.Authorization
	setIfEmpty(&a.OwnerPolicyName, DefaultOwnerPolicyName)
	setIfEmpty(&a.ZtunnelPolicyName, DefaultZtunnelPolicyName)
	setIfEmpty(&a.UserIDHeader, DefaultUserIDHeader)
	setIfEmpty(&a.Contributors, ContributorsByKfam)
	setIfNil(&a.KatibRule, true)
	setIfNil(&a.KfamGracePeriod, metav1.Duration{Duration: DefaultKfamGracePeriod})
	if a.HealthPaths == nil {
		a.HealthPaths = append([]string(nil), DefaultHealthPaths...)
	}
	def := DefaultPrincipals(m.TrustDomain)
	setIfEmpty(&a.Principals.IngressGateway, def.IngressGateway)
	setIfEmpty(&a.Principals.PipelinesUI, def.PipelinesUI)
	setIfEmpty(&a.Principals.NotebookController, def.NotebookController)
	setIfEmpty(&a.Principals.KatibController, def.KatibController)
	if a.PlatformCallers == nil {
		a.PlatformCallers = a.DefaultCallers()
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

	g := &c.Guard
	setIfEmpty(&g.ControllerServiceAccount, DefaultControllerServiceAccount)
	setIfEmpty(&g.BreakGlassGroup, DefaultBreakGlassGroup)
	setIfNil(&g.KatibControllerServiceAccount, DefaultKatibControllerServiceAccount)
	if g.PolicyWriters == nil {
		g.PolicyWriters = []string{DefaultPolicyWriter}
	}
	if g.MeshServiceAccounts == nil {
		// Istio's chart names a revision's ServiceAccount istiod-<revision>
		// (manifests/charts/istio-control/istio-discovery/templates/serviceaccount.yaml).
		name := "istiod"
		if m.Revision != "" {
			name += "-" + m.Revision
		}
		g.MeshServiceAccounts = []string{m.IstiodNamespace + "/" + name}
	}
}

// DefaultPrincipals are the documented defaults of Principals in the trust domain td.
func DefaultPrincipals(td string) Principals {
	return Principals{
		IngressGateway:     Principal(td, "istio-system", "istio-ingressgateway-service-account"),
		PipelinesUI:        Principal(td, "kubeflow", "ml-pipeline-ui"),
		NotebookController: Principal(td, "kubeflow", "notebook-controller-service-account"),
		KatibController:    Principal(td, "kubeflow", "katib-controller"),
	}
}

// DefaultCallers is the platformCallers list that Principals and KatibRule build when the admin
// sets none: the callers the profiles controller's owner policy has always trusted, all on the
// ambient data plane. Code that changes Principals or KatibRule of an already defaulted Config
// sets PlatformCallers to this again; otherwise Validate reports the two as disagreeing.
func (a *Authorization) DefaultCallers() []PlatformCaller {
	callers := []PlatformCaller{
		{Name: CallerPipelinesUI, Principal: a.Principals.PipelinesUI, DataPlane: CallerAmbient, OnBehalfOfUser: true},
		{Name: CallerNotebookController, Principal: a.Principals.NotebookController, DataPlane: CallerAmbient,
			Methods: []string{"GET"}, Paths: []string{KernelsPath}},
	}
	if a.KatibRule == nil || *a.KatibRule {
		// Katib's controller calls the suggestion and early-stopping services that Katib runs in
		// the user namespace for each experiment.
		callers = append(callers, PlatformCaller{Name: CallerKatibController, Principal: a.Principals.KatibController, DataPlane: CallerAmbient})
	}
	return callers
}

// CallersAreDefault says whether PlatformCallers is the list Principals and KatibRule build
// ([Authorization.DefaultCallers]); an admin who writes exactly that list gets the same answer,
// which is harmless: the two cannot disagree.
func (a *Authorization) CallersAreDefault() bool {
	return slices.EqualFunc(a.PlatformCallers, a.DefaultCallers(), PlatformCaller.Equal)
}

// Equal says whether c and o are the same caller; an empty list equals a missing one.
func (c PlatformCaller) Equal(o PlatformCaller) bool {
	return c.Name == o.Name && c.Principal == o.Principal && c.DataPlane == o.DataPlane && c.OnBehalfOfUser == o.OnBehalfOfUser &&
		slices.Equal(c.Methods, o.Methods) && slices.Equal(c.Paths, o.Paths) && slices.Equal(c.Ports, o.Ports)
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
