package plan

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/cli"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Exit statuses.
const (
	exitOK        = cli.ExitOK
	exitError     = cli.ExitError
	exitAttention = cli.ExitAttention
)

// Help is the command's --help.
var Help = cli.Help{
	Command: "plan",
	Description: `Plan previews a rollout of the plugins against a live cluster, like 'terraform plan' or
'kubectl diff': for every Profile it runs exactly what the profiles controller's Apply would run,
with every write sent as a server-side dry run, so admission, Pod Security and CRD validation
answer as they would and nothing is persisted. It then prints, per namespace, the objects to
create, update or delete, the labels to add, change or remove, conflicts, refusals, pods the new
enforce level would reject, what the plugins would wait for, and the namespace's readiness for
ambient mode. Before the namespaces it prints the platform check's findings (as 'profile-plugins
check' does).

A plan shows one reconcile. What takes several (a waypoint becoming Programmed, then the namespace
getting istio.io/use-waypoint) shows as waiting, and the next plan after an apply shows the next
step.

-o json prints the plan as one JSON document (schemaVersion 1; its fields are documented on the
Report type of this command's source, cmd/profile-plugins/internal/plan/report.go); -o yaml prints
the same document as YAML. Every list is sorted and holds no timestamp or UID (outside -diff), so
two plans of the same cluster state are byte-identical. On a terminal a progress bar is drawn on
stderr.`,
	Examples: `# Every Profile, the current kubeconfig context, the documented defaults
profile-plugins plan

# A new configuration for two Profiles, with a diff of every object
profile-plugins plan -config c.yaml -profiles alice,bob -diff

# The summary for a script; a large cluster, 16 namespaces at once
profile-plugins plan -o json | jq .summary
profile-plugins plan -parallel 16`,
	ExitStatus: `0  nothing needs attention (changes and waits alone do not)
1  the plan could not be made, or some namespace's plan is incomplete (status "error")
2  some namespace has a conflict, a refusal, a violating pod or an ambient readiness issue that
   breaks traffic (status "attention"), or the platform check found something`,
}

// Run runs `profile-plugins plan` with args (the flags after "plan") and returns the exit status.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		Help.Write(stdout, newFlags(&options{}, new(string)))
		return exitOK
	}
	if err != nil {
		return exitError
	}
	cfg, err := restConfig(opts.kubeconfig, opts.context)
	if err != nil {
		cli.Errorf(stderr, Help.Command, err)
		return exitError
	}
	if f, ok := stderr.(*os.File); ok {
		opts.progress = newProgress(f)
	}
	return run(ctx, cfg, opts, stdout, stderr)
}

// options are the command's flags.
type options struct {
	kubeconfig, context string
	configPath          string
	profiles            []string
	diff                bool
	output              string
	parallel            int
	progress            *progress // nil: silent
}

func newFlags(o *options, profiles *string) *flag.FlagSet {
	fs := cli.NewFlagSet(Help.Command)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&o.configPath, "config", "", "a PluginConfig YAML file (default: the documented defaults)")
	fs.StringVar(profiles, "profiles", "", "comma-separated Profile names to plan (default: every Profile)")
	fs.BoolVar(&o.diff, "diff", false, "print a unified diff of every object to create or update")
	fs.StringVar(&o.output, "o", cli.Text, "output format: text, json or yaml")
	fs.IntVar(&o.parallel, "parallel", 4, "namespaces planned at once")
	return fs
}

// parseFlags reads args; a bad one is said on stderr. flag.ErrHelp means help was asked for.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var profiles string
	err := Help.Parse(newFlags(&o, &profiles), args)
	switch {
	case err == nil && o.parallel < 1:
		err = fmt.Errorf("-parallel %d: must be at least 1", o.parallel)
	case err == nil:
		err = cli.CheckFormat(o.output, cli.Text, cli.JSON, cli.YAML)
	}
	if errors.Is(err, flag.ErrHelp) {
		return o, err
	}
	if err != nil {
		Help.Fail(stderr, err)
		return o, err
	}
	for _, p := range strings.Split(profiles, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.profiles = append(o.profiles, p)
		}
	}
	return o, nil
}

// restConfig loads the kubeconfig as kubectl does, with API warnings collected per write.
func restConfig(kubeconfig, context string) (*rest.Config, error) {
	cfg, err := cli.RESTConfig(kubeconfig, context)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if cfg.QPS == 0 {
		// client-go's default of 5 requests a second would make a plan of thousands of
		// namespaces take an hour; like controller-runtime's GetConfig
		// (pkg/client/config/config.go), rely on the server's priority and fairness instead.
		cfg.QPS = -1
	}
	return cfg, nil
}

// run makes the plan and prints it; it returns the exit status.
func run(ctx context.Context, cfg *rest.Config, o options, stdout, stderr io.Writer) int {
	pcfg, err := loadConfig(o.configPath)
	if err != nil {
		cli.Errorf(stderr, Help.Command, err)
		return exitError
	}
	cfg = rest.CopyConfig(cfg)
	// Warnings (PodSecurity's among them) belong in the plan, not in a log line.
	cfg.WarningHandlerWithContext = runner.WarningHandler{}
	p, err := newPlanner(cfg, pcfg, o.diff)
	if err != nil {
		cli.Errorf(stderr, Help.Command, err)
		return exitError
	}
	report, err := p.plan(ctx, o.profiles, max(o.parallel, 1), o.progress)
	if err != nil {
		cli.Errorf(stderr, Help.Command, err)
		return exitError
	}
	if err := write(stdout, report, o.output); err != nil {
		cli.Errorf(stderr, Help.Command, err)
		return exitError
	}
	return report.exitStatus()
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	return config.Load(path)
}

func write(w io.Writer, r *Report, format string) error {
	switch format {
	case cli.JSON:
		return writeJSON(w, r)
	case cli.YAML:
		return writeYAML(w, r)
	}
	return writeText(w, r)
}
