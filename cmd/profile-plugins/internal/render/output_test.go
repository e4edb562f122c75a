package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/cli"
)

// -o json is the YAML stream's objects, in order, as one v1 List; stderr is the same.
func TestRenderJSONIsTheYAMLAsAList(t *testing.T) {
	for _, args := range [][]string{nil, {"-cluster"}, {"-mode", "sidecar"}} {
		var yamlOut, yamlErr, jsonOut, jsonErr bytes.Buffer
		require.NoError(t, run(t.Context(), args, &yamlOut, &yamlErr))
		require.NoError(t, run(t.Context(), append([]string{"-o", "json"}, args...), &jsonOut, &jsonErr))
		assert.Equal(t, yamlErr.String(), jsonErr.String(), args)

		var list struct {
			APIVersion, Kind string
			Items            []map[string]any
		}
		require.NoError(t, json.Unmarshal(jsonOut.Bytes(), &list), args)
		assert.Equal(t, "v1", list.APIVersion)
		assert.Equal(t, "List", list.Kind)
		docs := strings.Split(yamlOut.String(), "---\n")
		require.Len(t, list.Items, len(docs), args)
		for i, doc := range docs {
			var want map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(doc), &want))
			assert.Equal(t, want, list.Items[i], "%v: item %d", args, i)
		}
	}
}

func TestRenderRefusesAnUnknownOutputFormat(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, cli.ExitError, Run(t.Context(), []string{"-o", "table"}, &stdout, &stderr))
	assert.Empty(t, stdout.String())
	assert.Equal(t, "render: -o \"table\": must be yaml or json\n", stderr.String())
}

// Run reports bad input as one "render:" line and exit 1, and nothing on stdout.
func TestRunExitsOneOnBadInput(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, cli.ExitError, Run(t.Context(), []string{"-mode", "hybrid"}, &stdout, &stderr))
	assert.Empty(t, stdout.String())
	assert.Regexp(t, `^render: default configuration with -mode: .*mesh\.mode.*"hybrid"[^\n]*\n$`, stderr.String())

	stdout.Reset()
	stderr.Reset()
	assert.Equal(t, cli.ExitOK, Run(t.Context(), nil, &stdout, &stderr))
	assert.NotEmpty(t, stdout.String())
}
