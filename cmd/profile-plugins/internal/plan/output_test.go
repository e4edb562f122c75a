package plan

import (
	"bytes"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow-ambient/profile-plugins/platform"
)

// -o yaml is the -o json document, field for field.
func TestYAMLIsTheJSONDocument(t *testing.T) {
	r := &Report{SchemaVersion: SchemaVersion, Namespaces: []NamespacePlan{{
		Namespace: "alice", Profile: "alice", Status: statusChanges,
		Objects:   []ObjectChange{{Action: actionCreate, Kind: "Gateway.gateway.networking.k8s.io", Name: "waypoint", Plugin: "waypoint"}},
		Labels:    []LabelChange{{Action: actionAdd, Key: "istio.io/dataplane-mode", New: ptr.To("ambient"), Plugin: "mesh"}},
		Readiness: []ReadinessFinding{{Kind: "Service", Name: "ui", Severity: severityBreaks, Reason: "r <&>", Fix: "f"}},
	}}, Platform: []platform.Finding{{Kind: platform.FindingIngressGatewayMissing, What: "ingress-gateway", Namespace: "istio-system", Problem: "p", Fix: "f"}}}
	r.summarize()

	var js, ym bytes.Buffer
	require.NoError(t, write(&js, r, "json"))
	require.NoError(t, write(&ym, r, "yaml"))
	fromJSON, err := yaml.JSONToYAML(js.Bytes())
	require.NoError(t, err)
	assert.Equal(t, string(fromJSON), ym.String())

	var back Report
	require.NoError(t, yaml.Unmarshal(ym.Bytes(), &back))
	assert.Equal(t, *r, back)
	assert.Contains(t, js.String(), `"schemaVersion": 1,`)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(js.Bytes(), &doc))
	assert.Equal(t, []string{"namespaces", "platform", "schemaVersion", "summary"}, slices.Sorted(maps.Keys(doc)))
}

// Run refuses bad flags and an unusable kubeconfig with exit 1 and nothing on stdout.
func TestRunExitsOneWithoutAPlan(t *testing.T) {
	for _, args := range [][]string{
		{"-o", "xml"},
		{"-parallel", "0"},
		{"extra"},
		{"-kubeconfig", filepath.Join(t.TempDir(), "missing")},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, exitError, Run(t.Context(), args, &stdout, &stderr), args)
		assert.Empty(t, stdout.String(), args)
		assert.True(t, strings.HasPrefix(stderr.String(), "plan: "), "%v: %s", args, stderr.String())
	}
}
