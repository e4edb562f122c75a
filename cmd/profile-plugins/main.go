package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/check"
	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/cli"
	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/convert"
	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/plan"
	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/render"
	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/version"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// command is one subcommand: its name, a line for the root help, and how to run it.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// commands in the order the root help lists them.
var commands = []command{
	{"render", "print what the plugins emit for one Profile, as YAML (no cluster needed)",
		func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
			return render.Run(ctx, args, stdout, stderr)
		}},
	{"plan", "preview a rollout against a live cluster, every write a server-side dry run",
		func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
			return plan.Run(ctx, args, stdout, stderr)
		}},
	{"check", "run the platform check against a cluster, read-only",
		func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
			return check.Run(ctx, args, stdout, stderr)
		}},
	{"convert", "rewrite selector AuthorizationPolicies into their ambient (targetRefs) form",
		convert.Run},
	{"version", "print the version of profile-plugins",
		func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
			return version.Run(ctx, args, stdout, stderr)
		}},
}

// run dispatches args to a subcommand and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		// As kubectl does: no command is a request for the overview.
		writeHelp(stdout)
		return cli.ExitOK
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		writeHelp(stdout)
		return cli.ExitOK
	case "help":
		if len(rest) == 0 {
			writeHelp(stdout)
			return cli.ExitOK
		}
		// `help render` is `render --help`.
		name, rest = rest[0], []string{"--help"}
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, rest, stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\nRun '%s --help' for usage.\n", cli.Program, name, cli.Program)
	return cli.ExitError
}

func writeHelp(w io.Writer) {
	var list strings.Builder
	for _, c := range commands {
		fmt.Fprintf(&list, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, `%[1]s previews and checks what the profile plugins do to Kubeflow user namespaces on
Istio ambient (or sidecars) and under Pod Security Standards.

Usage:
  %[1]s <command> [flags]

Commands:
%[2]s
Examples:
  # What the plugins emit for the sample Profile, and the cluster-wide objects applied once
  %[1]s render
  %[1]s render -cluster | kubectl apply -f -

  # Before a rollout: the platform check, then the plan of every Profile
  %[1]s check --kubeconfig ~/.kube/config
  %[1]s plan -config new-config.yaml -o json | jq .summary

Flags are written -name or --name. Every command answers --help (or -h) with its flags, examples
and exit statuses: '%[1]s <command> --help', or '%[1]s help <command>'.

Exit status:
  0  done, nothing needs attention
  1  bad input (a flag, a file, the configuration), or the command could not finish
  2  plan and check only: done, and something needs attention (see their --help)
`, cli.Program, list.String())
}
