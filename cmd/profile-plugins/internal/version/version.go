package version

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/cli"
	"github.com/kubeflow-ambient/profile-plugins/internal/buildinfo"
)

// Help is the command's --help.
var Help = cli.Help{
	Command: "version",
	Description: `Version prints the version of profile-plugins: the one a release build set with
-ldflags "-X github.com/kubeflow-ambient/profile-plugins/internal/buildinfo.Version=...",
else the module version the go command recorded, else "(devel)".`,
	Examples: `profile-plugins version
profile-plugins version -o json`,
	ExitStatus: `0  the version was printed
1  a bad flag`,
}

// Info is what -o json and -o yaml print.
type Info = buildinfo.Info

// Run runs `profile-plugins version` with args (the flags after "version") and returns the exit
// status.
func Run(_ context.Context, args []string, stdout, stderr io.Writer) int {
	return Help.Exit(newFlags(new(string)), run(args, buildinfo.Read(), stdout), stdout, stderr)
}

func newFlags(output *string) *flag.FlagSet {
	fs := cli.NewFlagSet(Help.Command)
	fs.StringVar(output, "o", cli.Text, "output format: text, yaml or json")
	return fs
}

func run(args []string, info Info, stdout io.Writer) error {
	var output string
	if err := Help.Parse(newFlags(&output), args); err != nil {
		return err
	}
	if err := cli.CheckFormat(output, cli.Text, cli.YAML, cli.JSON); err != nil {
		return cli.UsageError{Err: err}
	}
	var out []byte
	var err error
	switch output {
	case cli.JSON:
		out, err = cli.MarshalJSON(info)
	case cli.YAML:
		out, err = cli.MarshalYAML(info)
	default:
		out = fmt.Appendf(nil, "%s %s\n", cli.Program, info.Version)
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}
