package check

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/cli"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Help is the command's --help.
var Help = cli.Help{
	Command: "check",
	Description: `Check runs the platform check against a cluster, read-only, and prints its findings: platform
callers whose pods run on another data plane than configured (or whose namespace is missing), an
ingress gateway principal no pod runs as, a trusted namespace that a user controls, an L4
exception that admits a forwarding caller's pods, and waypoint pods that Pod Security or istiod
would refuse. Each finding says what breaks and how to fix it. 'profile-plugins plan' prints the
same findings before its namespaces.

The cluster is chosen as kubectl chooses it: -kubeconfig, else $KUBECONFIG, else ~/.kube/config,
and -context, else the current context.`,
	Examples: `# The current context, the documented default configuration
profile-plugins check

# Another cluster and your configuration, with enforce restricted
profile-plugins check --kubeconfig prod.yaml --context admin -config c.yaml -pss-enforce restricted

# The findings for a script
profile-plugins check -o json | jq -r '.findings[].kind'`,
	ExitStatus: `0  no findings
1  bad input (a flag or the configuration), or the cluster could not be read
2  the check found something; every finding breaks traffic into user namespaces or their privacy`,
}

// timeout bounds the check's reads, so an unreachable cluster fails instead of hanging.
const timeout = 30 * time.Second

// Run runs `profile-plugins check` with args (the flags after "check") and returns the exit
// status.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	status, err := run(ctx, args, stdout, stderr)
	if err != nil {
		return Help.Exit(newFlags(&options{}), err, stdout, stderr)
	}
	return status
}

// options are the command's flags.
type options struct {
	kubeconfig, context string
	config              cli.ConfigFlags
	output              string
}

func newFlags(o *options) *flag.FlagSet {
	fs := cli.NewFlagSet(Help.Command)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context (default: the current one)")
	o.config.Register(fs)
	fs.StringVar(&o.output, "o", cli.Text, "output format: text, yaml or json")
	return fs
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	var o options
	if err := Help.Parse(newFlags(&o), args); err != nil {
		return 0, err
	}
	if err := cli.CheckFormat(o.output, cli.Text, cli.YAML, cli.JSON); err != nil {
		return 0, cli.UsageError{Err: err}
	}
	cfg, err := o.config.Load(stderr)
	if err != nil {
		return 0, err
	}
	restCfg, err := cli.RESTConfig(o.kubeconfig, o.context)
	if err != nil {
		return 0, fmt.Errorf("kubeconfig: %w", err)
	}
	report, err := Platform(ctx, restCfg, cfg)
	if err != nil {
		return 0, err
	}
	if err := write(stdout, report, o.output); err != nil {
		return 0, err
	}
	if len(report.Findings) > 0 {
		return cli.ExitAttention, nil
	}
	return cli.ExitOK, nil
}

// Platform runs platform.Check against the cluster of restCfg, reading the API server directly
// (a cache would hold every Pod of the cluster), for at most a timeout.
func Platform(ctx context.Context, restCfg *rest.Config, cfg *config.Config) (platform.Report, error) {
	c, err := client.New(restCfg, client.Options{Scheme: runner.NewScheme()})
	if err != nil {
		return platform.Report{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	report, err := platform.Check(ctx, c, cfg)
	if err != nil {
		return platform.Report{}, fmt.Errorf("platform check: %w", err)
	}
	return report, nil
}

// write prints the report: as text, one finding a line, or as the Report document.
func write(w io.Writer, r platform.Report, format string) error {
	if r.Findings == nil {
		r.Findings = []platform.Finding{} // "findings": [], not null, for jq
	}
	var out []byte
	var err error
	switch format {
	case cli.JSON:
		out, err = cli.MarshalJSON(r)
	case cli.YAML:
		out, err = cli.MarshalYAML(r)
	default:
		out = []byte(r.String() + "\n")
	}
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}
