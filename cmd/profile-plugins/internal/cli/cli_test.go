package cli

import (
	"bytes"
	"errors"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJSONListKeepsEveryDocumentInOrder(t *testing.T) {
	got, err := JSONList([]byte("kind: B\nname: x <&>\n---\nkind: A\n---\n"))
	require.NoError(t, err)
	assert.Equal(t, `{
  "apiVersion": "v1",
  "kind": "List",
  "items": [
    {
      "kind": "B",
      "name": "x <&>"
    },
    {
      "kind": "A"
    }
  ]
}
`, string(got))

	empty, err := JSONList(nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"apiVersion": "v1", "kind": "List", "items": []}`, string(empty), "no objects is an empty list, not null")

	_, err = JSONList([]byte("kind: [\n"))
	assert.ErrorContains(t, err, "document 1")
}

func TestCheckFormatNamesTheChoices(t *testing.T) {
	require.NoError(t, CheckFormat("json", YAML, JSON))
	assert.EqualError(t, CheckFormat("xml", YAML, JSON), `-o "xml": must be yaml or json`)
	assert.EqualError(t, CheckFormat("", Text, YAML, JSON), `-o "": must be text, yaml or json`)
}

// Help goes to stdout with exit 0; a bad flag is one line on stderr with the hint, exit 1; any
// other error one line, without the hint (it is not about usage).
func TestHelpExit(t *testing.T) {
	h := Help{Command: "demo", Description: "Demo does nothing.", Examples: "# nothing\nprofile-plugins demo", ExitStatus: "0  always"}
	fs := NewFlagSet("demo")
	fs.Bool("quiet", false, "say nothing")
	var stdout, stderr bytes.Buffer

	assert.Equal(t, ExitOK, h.Exit(fs, h.Parse(fs, []string{"--help"}), &stdout, &stderr))
	assert.Equal(t, `Usage:
  profile-plugins demo [flags]

Demo does nothing.

Examples:
  # nothing
  profile-plugins demo

Flags (-name and --name are the same):
  -quiet
    	say nothing

Exit status:
  0  always
`, stdout.String())
	assert.Empty(t, stderr.String())

	stdout.Reset()
	err := h.Parse(fs, []string{"-quiet", "file"})
	assert.Equal(t, ExitError, h.Exit(fs, err, &stdout, &stderr))
	assert.Equal(t, "demo: unexpected arguments [\"file\"]\nRun 'profile-plugins demo --help' for usage.\n", stderr.String())

	stderr.Reset()
	withArgs := h
	withArgs.Args = "[FILE...]"
	require.NoError(t, withArgs.Parse(NewFlagSet("demo"), []string{"file"}))

	assert.Equal(t, ExitError, h.Exit(fs, errors.New("line one\nline two"), &stdout, &stderr))
	assert.Equal(t, "demo: line one; line two\n", stderr.String())
	assert.Empty(t, stdout.String())
	assert.Equal(t, ExitOK, h.Exit(fs, nil, &stdout, &stderr))
	assert.ErrorIs(t, h.Parse(NewFlagSet("demo"), []string{"-h"}), flag.ErrHelp)
}
