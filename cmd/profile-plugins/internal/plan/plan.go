// Command plan previews a rollout of the plugins against a live cluster, like `terraform plan` or
// `kubectl diff`: for every Profile it runs exactly what the profiles controller's Apply would run,
// with every write sent as a server-side dry run, so admission, Pod Security and CRD validation
// answer as they would and nothing is persisted. It then prints, per namespace, the objects to
// create, update or delete, the labels to add, change or remove, conflicts, refusals, pods the new
// enforce level would reject, what the plugins would wait for, and the namespace's readiness for
// ambient mode. Before the namespaces it prints the platform check's findings
// (platform.Check): platform callers on another data plane than configured, an
// ingress gateway without pods, a waypoint that Pod Security would reject.
//
//	go run ./examples/plan                                  # current kubeconfig context, defaults
//	go run ./examples/plan -config c.yaml -profiles alice,bob -diff
//	go run ./examples/plan -o json | jq .summary
//	go run ./examples/plan -parallel 16                     # a large cluster
//
// Exit status: 0 when nothing needs attention (changes and waits alone do not), 2 when some
// namespace has a conflict, a refusal, a violating pod or an ambient readiness issue that breaks
// traffic, or the platform check found something, 1 when the plan could not be made. The JSON
// schema is documented on [Report].
//
// A plan shows one reconcile. What takes several (a waypoint becoming Programmed, then the
// namespace getting istio.io/use-waypoint) shows as waiting, and the next plan after an apply
// shows the next step.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Exit statuses.
const (
	exitOK        = 0
	exitError     = 1
	exitAttention = 2
)

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(exitOK)
	}
	if err != nil {
		os.Exit(exitError)
	}
	cfg, err := restConfig(opts.kubeconfig, opts.context)
	if err != nil {
		fmt.Fprintln(os.Stderr, "plan: "+err.Error())
		os.Exit(exitError)
	}
	opts.progress = newProgress(os.Stderr)
	os.Exit(run(context.Background(), cfg, opts, os.Stdout, os.Stderr))
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

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&o.configPath, "config", "", "a PluginConfig YAML file (default: the documented defaults)")
	profiles := fs.String("profiles", "", "comma-separated Profile names to plan (default: every Profile)")
	fs.BoolVar(&o.diff, "diff", false, "print a unified diff of every object to create or update")
	fs.StringVar(&o.output, "o", "text", "output format: text or json")
	fs.IntVar(&o.parallel, "parallel", 4, "namespaces planned at once")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments %q", fs.Args())
		fmt.Fprintln(stderr, "plan: "+err.Error())
		return o, err
	}
	if o.parallel < 1 {
		err := fmt.Errorf("-parallel %d: must be at least 1", o.parallel)
		fmt.Fprintln(stderr, "plan: "+err.Error())
		return o, err
	}
	if o.output != "text" && o.output != "json" {
		err := fmt.Errorf("-o %q: must be text or json", o.output)
		fmt.Fprintln(stderr, "plan: "+err.Error())
		return o, err
	}
	for _, p := range strings.Split(*profiles, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.profiles = append(o.profiles, p)
		}
	}
	return o, nil
}

// restConfig loads the kubeconfig as kubectl does, with API warnings collected per write.
func restConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
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
		fmt.Fprintln(stderr, "plan: "+oneLine(err))
		return exitError
	}
	cfg = rest.CopyConfig(cfg)
	// Warnings (PodSecurity's among them) belong in the plan, not in a log line.
	cfg.WarningHandlerWithContext = runner.WarningHandler{}
	p, err := newPlanner(cfg, pcfg, o.diff)
	if err != nil {
		fmt.Fprintln(stderr, "plan: "+oneLine(err))
		return exitError
	}
	report, err := p.plan(ctx, o.profiles, max(o.parallel, 1), o.progress)
	if err != nil {
		fmt.Fprintln(stderr, "plan: "+oneLine(err))
		return exitError
	}
	if err := write(stdout, report, o.output); err != nil {
		fmt.Fprintln(stderr, "plan: "+oneLine(err))
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
	if format == "json" {
		return writeJSON(w, r)
	}
	return writeText(w, r)
}

// oneLine keeps an error on one line: the admin greps for it, and CI logs show it whole.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
