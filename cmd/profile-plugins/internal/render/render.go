// Command render prints, as multi-document YAML, everything the plugins emit for one Profile: first
// the Namespace with exactly the labels the plugins own, then every object. It needs no cluster;
// its output applies with `kubectl apply -f -` where the Istio and Gateway API CRDs are installed.
//
//	go run ./examples/render                          # embedded sample Profile, ambient mode
//	go run ./examples/render -mode sidecar
//	go run ./examples/render -profile p.yaml -config c.yaml -pss-enforce restricted
//	go run ./examples/render -waypoint-ready=false    # before istiod has programmed the waypoint
//	go run ./examples/render -cluster                 # the cluster-wide objects, applied once:
//	                                                  # waypoint default-deny and class defaults
//	go run ./examples/render -config examples/render/configs/knative-activator.yaml
//	go run ./examples/render -kubeconfig ~/.kube/config # also check that cluster's platform
//
// Configuration warnings (such as a very wide L4 exception ipBlocks range) and the plugins' notes
// go to stderr, so the YAML on stdout stays applicable.
//
// Without -kubeconfig it reads no cluster. With it, it also runs the platform check
// (platform.Check) against that cluster, read-only, and prints each finding on
// stderr as a "platform:" line; stdout is the same either way.
//
// Bad input exits with status 1 and one line on stderr naming the file and the field.
package main

import (
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	psaapi "k8s.io/pod-security-admission/api"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

//go:embed profile.yaml
var sampleProfile []byte

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		// One line: the admin greps for it, and CI logs show it whole.
		fmt.Fprintln(os.Stderr, "render: "+strings.ReplaceAll(err.Error(), "\n", "; "))
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	profilePath := fs.String("profile", "", "a kubeflow.org/v1 Profile YAML file (default: an embedded sample)")
	configPath := fs.String("config", "", "a PluginConfig YAML file (default: the documented defaults)")
	mode := fs.String("mode", "", "shortcut for mesh.mode: ambient, sidecar or none")
	enforce := fs.String("pss-enforce", "", "shortcut for podSecurity.enforce.level: privileged, baseline or restricted")
	ready := fs.Bool("waypoint-ready", true, "render as if istiod had programmed the waypoint (false: the state before, without istio.io/use-waypoint)")
	cluster := fs.Bool("cluster", false, "render the cluster-wide objects instead of one namespace's")
	kubeconfig := fs.String("kubeconfig", "", "also check the platform of this cluster (read-only); default: no cluster is read")
	kubeContext := fs.String("context", "", "the kubeconfig context for -kubeconfig (default: the current one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	cfg := config.Default()
	if *configPath != "" {
		c, err := config.Load(*configPath)
		if err != nil {
			return err
		}
		cfg = c
	}
	if *mode != "" {
		cfg.Mesh.Mode = config.MeshMode(*mode)
	}
	if *enforce != "" {
		cfg.PodSecurity.Enforce.Level = psaapi.Level(*enforce)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%s: %w", flagSource(*configPath, *mode, *enforce), err)
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(stderr, "warning: %s: %s\n", flagSource(*configPath, *mode, *enforce), w)
	}

	if *kubeContext != "" && *kubeconfig == "" {
		return fmt.Errorf("-context %q: needs -kubeconfig", *kubeContext)
	}
	if *kubeconfig != "" {
		if err := checkPlatform(*kubeconfig, *kubeContext, cfg, stderr); err != nil {
			return err
		}
	}

	s := runner.NewScheme()
	if *cluster {
		return renderCluster(s, cfg, stdout)
	}

	profileName, data := "embedded sample profile", sampleProfile
	if *profilePath != "" {
		d, err := os.ReadFile(*profilePath)
		if err != nil {
			return err
		}
		profileName, data = *profilePath, d
	}
	profile, err := profilev1.ParseYAML(data)
	if err != nil {
		return fmt.Errorf("%s: %w", profileName, err)
	}

	target := plugin.Target{Namespace: profile.Name, Owner: profile.Spec.Owner.Name, Profile: profile}
	if *ready && cfg.Mesh.Mode == config.ModeAmbient {
		target.Observed.Objects = append(target.Observed.Objects, fixture.ProgrammedGateway(cfg, profile.Name))
	}
	ps, err := plugins.New(cfg)
	if err != nil {
		return err
	}
	r, err := runner.Render(s, ps, target)
	if err != nil {
		return fmt.Errorf("%s: %w", profileName, err)
	}
	if len(r.Errors) > 0 {
		return fmt.Errorf("%s: %w", profileName, errors.Join(r.Errors...))
	}
	out, err := r.YAML()
	if err != nil {
		return err
	}
	for _, w := range append(r.Warnings, r.Waiting...) {
		fmt.Fprintln(stderr, "note: "+w)
	}
	_, err = stdout.Write(out)
	return err
}

// renderCluster writes the cluster-wide objects an admin applies once: the waypoint default-deny
// in the root namespace and the waypoint class defaults (seccomp hardening of every waypoint pod)
// in istiod's namespace. It writes nothing when either cannot be made.
func renderCluster(s *runtime.Scheme, cfg *config.Config, stdout io.Writer) error {
	deny, err := waypoint.ClusterDefaultDeny(cfg)
	if err != nil {
		return fmt.Errorf("-cluster: %w", err)
	}
	defaults, err := waypoint.ClassDefaults(cfg)
	if err != nil {
		return fmt.Errorf("-cluster: %w", err)
	}
	out, err := runner.EncodeYAML(s, deny, defaults)
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// flagSource says where a bad configuration value came from: the file, or a shortcut flag.
func flagSource(configPath, mode, enforce string) string {
	var from []string
	if configPath != "" {
		from = append(from, configPath)
	} else {
		from = append(from, "default configuration")
	}
	if mode != "" {
		from = append(from, "-mode")
	}
	if enforce != "" {
		from = append(from, "-pss-enforce")
	}
	return strings.Join(from, " with ")
}
