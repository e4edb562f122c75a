package convert

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
)

func TestConvertWritesYAMLAndReport(t *testing.T) {
	authzData := filepath.Join(golden.ModuleRoot(t), "testdata", "authz")
	l7, err := os.ReadFile(filepath.Join(authzData, "selector-l7.yaml"))
	require.NoError(t, err)
	l4, err := os.ReadFile(filepath.Join(authzData, "selector-l4.yaml"))
	require.NoError(t, err)
	in := string(l7) + "---\n" + string(l4)

	var stdout, stderr bytes.Buffer
	require.NoError(t, run([]string{"-service", "ml-pipeline"}, strings.NewReader(in), &stdout, &stderr))
	golden.Assert(t, "convert/service-target.yaml", stdout.Bytes())
	golden.Assert(t, "convert/service-target.report.txt", stderr.Bytes())
	assert.Contains(t, stderr.String(), "L7, waypoint only: rules[1].to[0].operation.paths")
}

func TestConvertReadsLists(t *testing.T) {
	list := `apiVersion: v1
kind: List
items:
- apiVersion: security.istio.io/v1
  kind: AuthorizationPolicy
  metadata: {name: a, namespace: kubeflow}
  spec: {selector: {matchLabels: {app: a}}, rules: [{from: [{source: {namespaces: [kubeflow]}}]}]}
- apiVersion: security.istio.io/v1
  kind: AuthorizationPolicy
  metadata: {name: b, namespace: kubeflow}
  spec: {targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}]}
`
	var stdout, stderr bytes.Buffer
	require.NoError(t, run([]string{"-gateway", "waypoint"}, strings.NewReader(list), &stdout, &stderr))
	assert.Contains(t, stdout.String(), "name: a")
	assert.NotContains(t, stdout.String(), "name: b")
	assert.Contains(t, stderr.String(), "kubeflow/b: skipped, it has targetRefs already")
}

func TestConvertRefusesBadInput(t *testing.T) {
	cases := []struct {
		name, in string
		args     []string
		want     string
	}{
		{"no target", "", nil, "exactly one of -gateway"},
		{"two targets", "", []string{"-gateway", "a", "-service", "b"}, "exactly one of -gateway"},
		{"not a policy", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", []string{"-gateway", "w"}, `document 1: kind "ConfigMap"`},
		{"unknown field", "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: x}\nspec: {rulez: [x]}\n", []string{"-gateway", "w"}, "rulez"},
		{"bad target", "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: x}\n", []string{"-gateway", "Bad_Name"}, `"Bad_Name"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(tc.args, strings.NewReader(tc.in), &stdout, &stderr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Empty(t, stdout.String())
		})
	}
}

// -o json is the same policies as one v1 List; the report on stderr does not change.
func TestConvertJSONIsTheYAMLAsAList(t *testing.T) {
	l7, err := os.ReadFile(filepath.Join(golden.ModuleRoot(t), "testdata", "authz", "selector-l7.yaml"))
	require.NoError(t, err)
	var yamlOut, yamlErr, jsonOut, jsonErr bytes.Buffer
	require.NoError(t, run([]string{"-gateway", "waypoint"}, bytes.NewReader(l7), &yamlOut, &yamlErr))
	require.NoError(t, run([]string{"-gateway", "waypoint", "-o", "json"}, bytes.NewReader(l7), &jsonOut, &jsonErr))
	assert.Equal(t, yamlErr.String(), jsonErr.String())
	var want map[string]any
	require.NoError(t, yaml.Unmarshal(yamlOut.Bytes(), &want))
	var list struct{ Items []map[string]any }
	require.NoError(t, json.Unmarshal(jsonOut.Bytes(), &list))
	assert.Equal(t, []map[string]any{want}, list.Items)
}

// Run says what is wrong on one line of stderr, exits 1 and writes no policy.
func TestRunExitsOneOnBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		in   string
		want string
	}{
		{nil, "", "convert: give exactly one of -gateway NAME or -service NAME\nRun 'profile-plugins convert --help' for usage.\n"},
		{[]string{"-gateway", "w", "-o", "table"}, "", "convert: -o \"table\": must be yaml or json\nRun 'profile-plugins convert --help' for usage.\n"},
		{[]string{"-gateway", "w"}, "apiVersion: v1\nkind: ConfigMap\n", "convert: stdin: document 1: kind \"ConfigMap\" (apiVersion \"v1\") is not a security.istio.io AuthorizationPolicy\n"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 1, Run(t.Context(), c.args, strings.NewReader(c.in), &stdout, &stderr), c.args)
		assert.Empty(t, stdout.String())
		assert.Equal(t, c.want, stderr.String())
	}
}
