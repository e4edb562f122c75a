package kubeflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// The profiles controller's service mesh modes (its -service-mesh-mode flag).
const (
	ServiceMeshSidecar = "istio-sidecar"
	ServiceMeshAmbient = "istio-ambient"
)

// The environment variables the profiles controller reads its principals from.
const (
	EnvIngressGatewayPrincipal     = "ISTIO_INGRESS_GATEWAY_PRINCIPAL"
	EnvNotebookControllerPrincipal = "NOTEBOOK_CONTROLLER_PRINCIPAL"
	EnvPipelinesUIPrincipal        = "KFP_UI_PRINCIPAL"
)

// ControllerSettings are the profiles controller's own flags and environment, as its main.go has
// them (kubeflow/dashboard components/profile-controller/main.go and controllers/
// profile_controller.go, getAuthorizationPolicy).
type ControllerSettings struct {
	// UserIDHeader is -userid-header (the controller's default: x-goog-authenticated-user-email).
	UserIDHeader string
	// UserIDPrefix is -userid-prefix (the controller's default: accounts.google.com:).
	UserIDPrefix string
	// ServiceMeshMode is -service-mesh-mode: istio-sidecar (also when empty) or istio-ambient.
	ServiceMeshMode string
	// WaypointName is -waypoint-name; empty keeps the PluginConfig's.
	WaypointName string
	// WaypointNamespace is -waypoint-namespace. A shared waypoint is refused (see
	// config.Waypoint.Namespace), so it must be empty.
	WaypointNamespace string
	// Env reads the controller's environment, usually os.Getenv. An unset or empty variable
	// keeps the PluginConfig's principal, as the controller keeps its default. Nil reads nothing.
	Env func(string) string
	// Base holds every other setting (LoadConfig of the admin's file); nil means DefaultConfig.
	// It is not changed.
	Base *config.Config
}

// source is one controller setting and the PluginConfig field it becomes.
type source struct {
	name  string // the flag or variable, as an admin knows it
	path  *field.Path
	value string
	field func(*config.Config) *string
}

func (s ControllerSettings) sources() ([]source, error) {
	auth := field.NewPath("authorization")
	pr := auth.Child("principals")
	env := s.Env
	if env == nil {
		env = func(string) string { return "" }
	}
	mode, err := meshMode(s.ServiceMeshMode)
	if err != nil {
		return nil, err
	}
	out := []source{
		{"-userid-header", auth.Child("userIdHeader"), s.UserIDHeader, func(c *config.Config) *string { return &c.Authorization.UserIDHeader }},
		{"-userid-prefix", auth.Child("userIdPrefix"), s.UserIDPrefix, func(c *config.Config) *string { return &c.Authorization.UserIDPrefix }},
		{"-service-mesh-mode", field.NewPath("mesh", "mode"), string(mode), func(c *config.Config) *string { return (*string)(&c.Mesh.Mode) }},
		{EnvIngressGatewayPrincipal, pr.Child("ingressGateway"), env(EnvIngressGatewayPrincipal), func(c *config.Config) *string { return &c.Authorization.Principals.IngressGateway }},
		{EnvNotebookControllerPrincipal, pr.Child("notebookController"), env(EnvNotebookControllerPrincipal), func(c *config.Config) *string { return &c.Authorization.Principals.NotebookController }},
		{EnvPipelinesUIPrincipal, pr.Child("pipelinesUI"), env(EnvPipelinesUIPrincipal), func(c *config.Config) *string { return &c.Authorization.Principals.PipelinesUI }},
		{"-waypoint-name", field.NewPath("mesh", "waypoint", "name"), s.WaypointName, func(c *config.Config) *string { return &c.Mesh.Waypoint.Name }},
		{"-waypoint-namespace", field.NewPath("mesh", "waypoint", "namespace"), s.WaypointNamespace, func(c *config.Config) *string { return &c.Mesh.Waypoint.Namespace }},
	}
	return out, nil
}

func meshMode(flag string) (config.MeshMode, error) {
	switch flag {
	case "", ServiceMeshSidecar:
		return config.ModeSidecar, nil
	case ServiceMeshAmbient:
		return config.ModeAmbient, nil
	}
	return "", fmt.Errorf("-service-mesh-mode %q: must be %q or %q", flag, ServiceMeshSidecar, ServiceMeshAmbient)
}

// ConfigFromController builds the PluginConfig that keeps the meaning of the profiles
// controller's flags and environment, so a fork that switches to the plugins locks no owner out:
// the owner policy keeps the controller's header, prefix and principals, and the mesh mode stays.
// The header and prefix are always taken, because the controller always had them (its defaults
// are Google IAP's, not the PluginConfig's); a principal, the waypoint name and namespace only
// when set.
//
// Everything else comes from s.Base. A field that s.Base sets to something other than its
// default and the controller sets differently is an error naming both, so the two places cannot
// silently disagree. The result is validated; an error names the PluginConfig field, its value
// and the flag or variable it came from.
func ConfigFromController(s ControllerSettings) (*config.Config, error) {
	srcs, err := s.sources()
	if err != nil {
		return nil, err
	}
	cfg, err := clone(s.Base)
	if err != nil {
		return nil, err
	}
	defaults := config.Default()
	followsPrincipals := defaultShapedCallers(cfg.Authorization)
	var errs field.ErrorList
	for _, src := range srcs {
		always := src.name == "-userid-header" || src.name == "-userid-prefix" || src.name == "-service-mesh-mode"
		if src.value == "" && !always {
			continue
		}
		have, def := src.field(cfg), *src.field(defaults)
		if *have != def && *have != src.value {
			errs = append(errs, field.Invalid(src.path, *have, fmt.Sprintf("the PluginConfig sets it, but the controller's %s is %q; set it in one place", src.name, src.value)))
			continue
		}
		*have = src.value
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	if followsPrincipals {
		// The platform callers were built from the principals (and katibRule) when s.Base was
		// defaulted; they follow the principals the controller set, as the controller's own
		// owner policy does.
		cfg.Authorization.PlatformCallers = cfg.Authorization.DefaultCallers()
	}
	if err := cfg.Validate(); err != nil {
		return nil, namingSources(err, srcs)
	}
	return cfg, nil
}

// defaultShapedCallers says whether a's platform callers are the list its principals build, with
// or without the Katib entry: then they were defaulted from those principals, and Base may have
// had katibRule changed since (in Go; a file is defaulted after it is read). A list the admin
// wrote in another shape or with other principals is kept as it is.
func defaultShapedCallers(a config.Authorization) bool {
	hasKatib := slices.ContainsFunc(a.PlatformCallers, func(c config.PlatformCaller) bool { return c.Name == config.CallerKatibController })
	probe := config.Authorization{Principals: a.Principals, PlatformCallers: a.PlatformCallers, KatibRule: ptr.To(hasKatib)}
	return probe.CallersAreDefault()
}

// clone copies base through its JSON form (Config has slices and maps that must not be shared).
func clone(base *config.Config) (*config.Config, error) {
	if base == nil {
		return config.Default(), nil
	}
	data, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	c := &config.Config{}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	return c, nil
}

// namingSources appends to each validation error of a field that came from the controller the
// flag or variable it came from.
func namingSources(err error, srcs []source) error {
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		return err
	}
	out := make([]error, 0, len(agg.Errors()))
	for _, e := range agg.Errors() {
		var fe *field.Error
		if errors.As(e, &fe) {
			for _, src := range srcs {
				if fe.Field == src.path.String() && src.value != "" {
					e = fmt.Errorf("%w (from the controller's %s)", fe, src.name)
				}
			}
		}
		out = append(out, e)
	}
	return utilerrors.NewAggregate(out)
}
