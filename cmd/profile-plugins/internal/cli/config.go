package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"

	psaapi "k8s.io/pod-security-admission/api"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// ConfigFlags are -config and its two shortcuts, -mode and -pss-enforce, as render and check take
// them.
type ConfigFlags struct {
	Path, Mode, Enforce string
}

// Register adds the three flags to fs.
func (c *ConfigFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.Path, "config", "", "a PluginConfig YAML file (default: the documented defaults)")
	fs.StringVar(&c.Mode, "mode", "", "shortcut for mesh.mode: ambient, sidecar or none")
	fs.StringVar(&c.Enforce, "pss-enforce", "", "shortcut for podSecurity.enforce.level: privileged, baseline or restricted")
}

// Load reads the configuration (the defaults without -config), applies the shortcuts, validates
// the result and writes its warnings to stderr. Errors and warnings name where the value came
// from: the file, or a shortcut flag.
func (c *ConfigFlags) Load(stderr io.Writer) (*config.Config, error) {
	cfg := config.Default()
	if c.Path != "" {
		loaded, err := config.Load(c.Path)
		if err != nil {
			return nil, err
		}
		cfg = loaded
	}
	if c.Mode != "" {
		cfg.Mesh.Mode = config.MeshMode(c.Mode)
	}
	if c.Enforce != "" {
		cfg.PodSecurity.Enforce.Level = psaapi.Level(c.Enforce)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", c.source(), err)
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(stderr, "warning: %s: %s\n", c.source(), w)
	}
	return cfg, nil
}

// source says where a configuration value came from: the file, or a shortcut flag.
func (c *ConfigFlags) source() string {
	from := []string{"default configuration"}
	if c.Path != "" {
		from[0] = c.Path
	}
	if c.Mode != "" {
		from = append(from, "-mode")
	}
	if c.Enforce != "" {
		from = append(from, "-pss-enforce")
	}
	return strings.Join(from, " with ")
}
