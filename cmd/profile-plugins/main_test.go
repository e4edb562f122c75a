package main

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
)

// invoke runs the program in-process with args and returns its exit status, stdout and stderr.
func invoke(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// Every subcommand answers -h, --help and `help <command>` alike: the help on stdout, with its
// usage line, examples and exit statuses, nothing on stderr, exit 0.
func TestEveryCommandAnswersHelp(t *testing.T) {
	require.Len(t, commands, 5)
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			code, help, stderr := invoke(t, c.name, "--help")
			assert.Equal(t, 0, code)
			assert.Empty(t, stderr)
			for _, want := range []string{"Usage:\n  profile-plugins " + c.name + " [flags]", "\nExamples:\n  ", "\nFlags (-name and --name are the same):\n  -", "\nExit status:\n  0  ", "\n  1  "} {
				assert.Contains(t, help, want)
			}
			for _, same := range [][]string{{c.name, "-h"}, {c.name, "-help"}, {"help", c.name}} {
				code, out, stderr := invoke(t, same...)
				assert.Equal(t, 0, code, same)
				assert.Empty(t, stderr, same)
				assert.Equal(t, help, out, "%v prints another help than --help", same)
			}
		})
	}
}

// plan and check state the status that means "needs attention"; plan keeps its three statuses.
func TestHelpStatesTheAttentionStatus(t *testing.T) {
	for _, name := range []string{"plan", "check"} {
		_, help, _ := invoke(t, name, "--help")
		assert.Contains(t, help, "\n  2  ", name)
	}
	_, help, _ := invoke(t, "plan", "--help")
	assert.Contains(t, help, "0  nothing needs attention (changes and waits alone do not)")
	assert.Contains(t, help, "schemaVersion 1")
}

// The root answers with the list of commands, whichever way help is asked for.
func TestRootHelpListsEveryCommand(t *testing.T) {
	_, want, _ := invoke(t, "--help")
	for _, c := range commands {
		assert.Contains(t, want, "\n  "+c.name+" ")
	}
	for _, args := range [][]string{nil, {"-h"}, {"-help"}, {"help"}} {
		code, out, stderr := invoke(t, args...)
		assert.Equal(t, 0, code, args)
		assert.Empty(t, stderr, args)
		assert.Equal(t, want, out, args)
	}
}

func TestUnknownCommandExitsOne(t *testing.T) {
	for _, args := range [][]string{{"apply"}, {"help", "apply"}, {"--render"}} {
		code, out, stderr := invoke(t, args...)
		assert.Equal(t, 1, code, args)
		assert.Empty(t, out, args)
		assert.Contains(t, stderr, `profile-plugins: unknown command "`, args)
		assert.Contains(t, stderr, "Run 'profile-plugins --help' for usage.", args)
	}
}

// A flag a command does not know is one line on stderr naming it, a hint to --help, and exit 1,
// before anything is read or printed.
func TestUnknownFlagExitsOne(t *testing.T) {
	for _, c := range commands {
		for _, flag := range []string{"-no-such-flag", "--no-such-flag"} {
			code, out, stderr := invoke(t, c.name, flag)
			assert.Equal(t, 1, code, c.name)
			assert.Empty(t, out, c.name)
			assert.Equal(t, c.name+": flag provided but not defined: -no-such-flag\nRun 'profile-plugins "+c.name+" --help' for usage.\n", stderr)
		}
	}
}

// `profile-plugins render` prints the golden render output (the files the command was moved with).
func TestRenderThroughTheDispatcher(t *testing.T) {
	code, out, _ := invoke(t, "render")
	assert.Equal(t, 0, code)
	golden.Assert(t, "render/default.yaml", []byte(out))
	code, out, _ = invoke(t, "render", "--cluster")
	assert.Equal(t, 0, code)
	golden.Assert(t, "render/cluster.yaml", []byte(out))
}

func TestVersionThroughTheDispatcher(t *testing.T) {
	code, out, stderr := invoke(t, "version")
	assert.Equal(t, 0, code)
	assert.Empty(t, stderr)
	assert.Regexp(t, `^profile-plugins \S+\n$`, out)
}

// No program under cmd/ links a package that imports testing: a test helper in a binary drags
// in the test flags and its code, and says the binary depends on what only tests should.
func TestProgramsLinkNoTestingPackage(t *testing.T) {
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to list the programs' dependencies")
	list := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}} {{.Name}}{{range .Imports}} {{.}}{{end}}", "./cmd/...")
	list.Dir = golden.ModuleRoot(t)
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	require.NoError(t, err, stderr.String())
	graph, programs := importGraph(string(out))
	require.Contains(t, programs, "github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins", "go list did not list the program")
	require.Contains(t, graph, "github.com/kubeflow-ambient/profile-plugins/runner", "go list did not list the program's dependencies")
	assert.Empty(t, pathsToTesting(graph, programs), "programs that link testing, with one import chain each")
}

// A program that links internal/fixture (which imports testing) is caught, with the chain of
// imports; a test helper package that no program links is not a program's dependency.
func TestPathsToTestingFindsTheImporter(t *testing.T) {
	graph, programs := importGraph(`fmt fmt
testing testing fmt
example.com/m/internal/fixture fixture testing fmt
example.com/m/cmd/tool main example.com/m/internal/fixture fmt
example.com/m/cmd/other main fmt
example.com/m/cmd/other/internal/helpertest helpertest testing
`)
	assert.Equal(t, []string{"example.com/m/cmd/other", "example.com/m/cmd/tool"}, programs)
	assert.Equal(t, []string{"example.com/m/cmd/tool -> example.com/m/internal/fixture -> testing"}, pathsToTesting(graph, programs))
	assert.Empty(t, pathsToTesting(graph, []string{"example.com/m/cmd/other"}))
}

// importGraph reads `go list -deps -f '{{.ImportPath}} {{.Name}}{{range .Imports}} {{.}}{{end}}'`:
// each package and what it imports, and the programs (package main), sorted.
func importGraph(list string) (graph map[string][]string, programs []string) {
	graph = map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		graph[fields[0]] = fields[2:]
		if fields[1] == "main" {
			programs = append(programs, fields[0])
		}
	}
	slices.Sort(programs)
	return graph, programs
}

// pathsToTesting gives, for each program that links testing, its shortest chain of imports to it.
func pathsToTesting(graph map[string][]string, programs []string) []string {
	var out []string
	for _, program := range programs {
		// Breadth first, so the chain is the shortest, and each package is visited once.
		via := map[string]string{program: ""}
		queue := []string{program}
		for len(queue) > 0 {
			pkg := queue[0]
			queue = queue[1:]
			if pkg == "testing" {
				chain := []string{}
				for p := pkg; p != ""; p = via[p] {
					chain = append([]string{p}, chain...)
				}
				out = append(out, strings.Join(chain, " -> "))
				break
			}
			for _, imp := range graph[pkg] {
				if _, seen := via[imp]; !seen {
					via[imp] = pkg
					queue = append(queue, imp)
				}
			}
		}
	}
	return out
}
