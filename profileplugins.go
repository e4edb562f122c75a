package profileplugins

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
	"github.com/kubeflow-ambient/profile-plugins/pss"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// Config is the admin's configuration of every plugin; see [config.Config].
type Config = config.Config

// Runner writes what the plugins want for one Profile at a time; see [plugin.Runner].
type Runner = plugin.Runner

// Result reports one Apply or Revoke; see [plugin.Result].
type Result = plugin.Result

// LoadConfig reads and validates a PluginConfig file; see [config.Load]. An empty path means the
// documented defaults, so a controller's flag for the file may default to "".
func LoadConfig(path string) (*Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	return config.Load(path)
}

// WithWarnings returns a copy of cfg whose API warnings also reach each Result, keeping the
// handler cfg had (controller-runtime's warning logger by default); see [plugin.WithWarnings].
func WithWarnings(cfg *rest.Config) *rest.Config { return plugin.WithWarnings(cfg) }

// DefaultConfig is the configuration with every documented default; see [config.Default].
func DefaultConfig() *Config { return config.Default() }

// AddToScheme adds the types the plugins write and read (Kubernetes core, Istio security/v1,
// Gateway API v1) to s. It does not add a Profile type: the profiles controller has its own.
func AddToScheme(s *runtime.Scheme) error { return plugin.AddToScheme(s) }

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
// through c as well (set Runner.Reader to read through a cache). Its namespace policy follows
// cfg.Namespaces and refuses every namespace in cfg.ReservedNamespaces(). Like [New], it refuses
// a cfg that does not validate.
func NewRunner(c client.Client, cfg *Config) (*Runner, error) {
	ps, err := New(cfg)
	if err != nil {
		return nil, err
	}
	r, err := plugin.NewRunner(c, ps...)
	if err != nil {
		return nil, err
	}
	r.Namespaces = plugin.NamespacePolicy{
		RequireOwnerReference: cfg.Namespaces.Ownership == config.OwnershipReference,
		Reserved:              cfg.ReservedNamespaces(),
	}
	return r, nil
}
