package profileplugins

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/pss"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// Config is the admin's configuration of every plugin; see [config.Config].
type Config = config.Config

// Runner writes what the plugins want for one Profile at a time; see [runner.Runner].
type Runner = runner.Runner

// Result reports one Apply or Revoke; see [runner.Result].
type Result = runner.Result

// Option configures the Runner [NewRunner] returns; see [runner.Option].
type Option = runner.Option

// Integration runs the plugins from the profiles controller's reconciler; see [kubeflow.Integration].
type Integration = kubeflow.Integration

var (
	// WithManager makes the Runner read through a manager's cache, and past it for what the cache
	// options select; see [runner.WithManager].
	WithManager = runner.WithManager
	// WithWarnings returns a copy of a rest.Config whose API warnings also reach each Result; see
	// [runner.WithWarnings].
	WithWarnings func(cfg *rest.Config) *rest.Config = runner.WithWarnings
	// AddToScheme adds the types the plugins write and read (Kubernetes core, Istio security/v1,
	// Gateway API v1). It does not add a Profile type: the profiles controller has its own.
	AddToScheme func(s *runtime.Scheme) error = runner.AddToScheme
	// DefaultConfig is the configuration with every documented default; see [config.Default].
	DefaultConfig = config.Default
)

// CacheOptions are the manager cache options the given plugins ([New]'s for the same Config)
// need; see [runner.CacheOptions]. Given none, they are those of the plugins of [DefaultConfig],
// and NewRunner refuses them with mesh.waypoint.ignoredServices, whose label keys the EndpointSlice
// cache must keep.
func CacheOptions(plugins ...plugin.Plugin) cache.Options {
	return runner.CacheOptions(orDefault(plugins)...)
}

// CacheByObject is CacheOptions' ByObject, for a manager that sets other cache options too; see
// [runner.CacheByObject]. Given no plugin, it is that of the plugins of [DefaultConfig].
func CacheByObject(plugins ...plugin.Plugin) map[client.Object]cache.ByObject {
	return runner.CacheByObject(orDefault(plugins)...)
}

// orDefault is plugins, or the plugins of DefaultConfig when there are none.
func orDefault(plugins []plugin.Plugin) []plugin.Plugin {
	if len(plugins) > 0 {
		return plugins
	}
	ps, err := New(DefaultConfig())
	if err != nil {
		panic(fmt.Sprintf("profile-plugins: the default configuration: %v", err))
	}
	return ps
}

// LoadConfig reads and validates a PluginConfig file; see [config.Load]. An empty path means the
// documented defaults, so a controller's flag for the file may default to "".
func LoadConfig(path string) (*Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	return config.Load(path)
}

// New returns every plugin for cfg, in the order the runner must run them: access policies first,
// then the mesh (whose enrolment labels wait for the ztunnel policy the access plugin writes),
// then Pod Security. It returns cfg.Validate()'s error first: a Go caller that changed a loaded
// configuration (a mode, an L4 exception) must not get plugins for one validation refuses.
func New(cfg *Config) ([]plugin.Plugin, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("profile-plugins configuration: %w", err)
	}
	podSecurity, err := pss.New(cfg)
	if err != nil {
		return nil, err
	}
	return []plugin.Plugin{authz.New(cfg), waypoint.New(cfg), podSecurity}, nil
}

// NewRunner returns a runner of the full plugin set for cfg that writes through c and reads
// through c as well, configured by opts (with [WithManager], through the manager's cache). Its
// namespace policy follows cfg.Namespaces and refuses every namespace in
// cfg.ReservedNamespaces(). Like [New], it refuses a cfg that does not validate.
func NewRunner(c client.Client, cfg *Config, opts ...Option) (*Runner, error) {
	ps, err := New(cfg)
	if err != nil {
		return nil, err
	}
	r, err := runner.New(c, ps, opts...)
	if err != nil {
		return nil, err
	}
	r.Namespaces = ownership.Policy{
		RequireOwnerReference: cfg.Namespaces.Ownership == config.OwnershipReference,
		Reserved:              cfg.ReservedNamespaces(),
	}
	return r, nil
}
