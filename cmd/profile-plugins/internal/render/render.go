package render

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/cli"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/preview"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

//go:embed profile.yaml
var sampleProfile []byte

// Help is the command's --help.
var Help = cli.Help{
	Command: "render",
	Description: `Render prints, as multi-document YAML, everything the plugins emit for one Profile: first the
Namespace with exactly the labels the plugins own, then every object. It needs no cluster; its
output applies with 'kubectl apply -f -' where the Istio and Gateway API CRDs are installed.

Configuration warnings (such as a very wide L4 exception ipBlocks range) and the plugins' notes go
to stderr, so the output on stdout stays applicable.

Without -kubeconfig it reads no cluster. With it, it also runs the platform check against that
cluster, read-only, and prints each finding on stderr as a "platform:" line; stdout is the same
either way. 'profile-plugins check' runs the check on its own.`,
	Examples: `# The embedded sample Profile, ambient mode
profile-plugins render

# Sidecar mode; or a Profile and configuration of your own, with enforce restricted
profile-plugins render -mode sidecar
profile-plugins render -profile p.yaml -config c.yaml -pss-enforce restricted

# Before istiod has programmed the waypoint (no istio.io/use-waypoint yet)
profile-plugins render -waypoint-ready=false

# With mesh.waypoint.provision onDemand, a namespace idle past idleAfter (no waypoint)
profile-plugins render -config c.yaml -idle

# The cluster-wide objects, applied once: the waypoint default-deny and class defaults
profile-plugins render -cluster | kubectl apply -f -

# As a JSON List; and with the platform check of a cluster on stderr
profile-plugins render -o json
profile-plugins render --kubeconfig ~/.kube/config`,
	ExitStatus: `0  the objects were printed
1  bad input (a flag, the Profile or the configuration; one line on stderr names the file and
   the field), or the platform check could not read the cluster; nothing is printed on stdout`,
}

// Run runs `profile-plugins render` with args (the flags after "render") and returns the exit
// status.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return Help.Exit(newFlags(&options{}), run(ctx, args, stdout, stderr), stdout, stderr)
}

// options are the command's flags.
type options struct {
	profilePath         string
	config              cli.ConfigFlags
	ready, cluster      bool
	idle                bool
	output              string
	kubeconfig, context string
}

func newFlags(o *options) *flag.FlagSet {
	fs := cli.NewFlagSet(Help.Command)
	fs.StringVar(&o.profilePath, "profile", "", "a kubeflow.org/v1 Profile YAML file (default: an embedded sample)")
	o.config.Register(fs)
	fs.BoolVar(&o.ready, "waypoint-ready", true, "render as if istiod had programmed the waypoint (false: the state before, without istio.io/use-waypoint)")
	fs.BoolVar(&o.idle, "idle", false, "with mesh.waypoint.provision onDemand, render the namespace idle past mesh.waypoint.idleAfter (no Service endpoint: no waypoint, no routing labels); default: in use")
	fs.BoolVar(&o.cluster, "cluster", false, "render the cluster-wide objects instead of one namespace's")
	fs.StringVar(&o.output, "o", cli.YAML, "output format: yaml, or json (one v1 List)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "also check the platform of this cluster (read-only); default: no cluster is read")
	fs.StringVar(&o.context, "context", "", "the kubeconfig context for -kubeconfig (default: the current one)")
	return fs
}

// run parses args and renders; it returns what Run reports.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	if err := Help.Parse(newFlags(&o), args); err != nil {
		return err
	}
	if err := cli.CheckFormat(o.output, cli.YAML, cli.JSON); err != nil {
		return err
	}

	cfg, err := o.config.Load(stderr)
	if err != nil {
		return err
	}
	if o.context != "" && o.kubeconfig == "" {
		return fmt.Errorf("-context %q: needs -kubeconfig", o.context)
	}
	if o.kubeconfig != "" {
		if err := checkPlatform(ctx, o.kubeconfig, o.context, cfg, stderr); err != nil {
			return err
		}
	}

	s := runner.NewScheme()
	if o.cluster {
		return renderCluster(s, cfg, o.output, stdout)
	}

	profileName, data := "embedded sample profile", sampleProfile
	if o.profilePath != "" {
		d, err := os.ReadFile(o.profilePath)
		if err != nil {
			return err
		}
		profileName, data = o.profilePath, d
	}
	profile, err := profilev1.ParseYAML(data)
	if err != nil {
		return fmt.Errorf("%s: %w", profileName, err)
	}

	if o.idle && !cfg.Mesh.OnDemand() {
		return errors.New("-idle: needs mesh.mode ambient and mesh.waypoint.provision onDemand (with always every namespace keeps its waypoint)")
	}
	target := plugin.Target{Namespace: profile.Name, Owner: profile.Spec.Owner.Name, Profile: profile}
	if o.ready && cfg.Mesh.Mode == config.ModeAmbient && !o.idle {
		target.Observed.Objects = append(target.Observed.Objects, preview.ProgrammedGateway(cfg, profile.Name))
	}
	if cfg.Mesh.OnDemand() && !o.idle {
		// A namespace in use, as with provision always: the same objects, the same goldens.
		target.Observed.EndpointSlices = append(target.Observed.EndpointSlices, preview.ServingEndpointSlice(profile.Name))
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
	if out, err = encode(out, o.output); err != nil {
		return err
	}
	for _, w := range slices.Concat(r.Warnings, r.Waiting, r.Notes) {
		fmt.Fprintln(stderr, "note: "+w)
	}
	_, err = stdout.Write(out)
	return err
}

// renderCluster writes the cluster-wide objects an admin applies once: the waypoint default-deny
// in the root namespace, the waypoint class defaults (seccomp hardening of every waypoint pod)
// in istiod's namespace, and the admission guard's policies and bindings (package guard). It
// writes nothing when any cannot be made.
func renderCluster(s *runtime.Scheme, cfg *config.Config, output string, stdout io.Writer) error {
	deny, err := waypoint.ClusterDefaultDeny(cfg)
	if err != nil {
		return fmt.Errorf("-cluster: %w", err)
	}
	defaults, err := waypoint.ClassDefaults(cfg)
	if err != nil {
		return fmt.Errorf("-cluster: %w", err)
	}
	objs := []client.Object{deny, defaults}
	guarded, err := guard.Objects(cfg)
	if err != nil {
		return fmt.Errorf("-cluster: %w", err)
	}
	out, err := runner.EncodeYAML(s, append(objs, guarded...)...)
	if err != nil {
		return err
	}
	if out, err = encode(out, output); err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// encode is the YAML stream as it is, or as a JSON List for -o json.
func encode(stream []byte, output string) ([]byte, error) {
	if output == cli.JSON {
		return cli.JSONList(stream)
	}
	return stream, nil
}
