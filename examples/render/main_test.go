package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
)

// Each case is one golden file under testdata/golden/render/.
func TestRenderGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
		// stderr also has a golden file, render/<name>.stderr.txt: the warnings an admin reads.
		stderr bool
	}{
		{"default", nil, false},
		{"sidecar", []string{"-mode", "sidecar"}, false},
		{"waypoint-not-ready", []string{"-waypoint-ready=false"}, false},
		{"cluster", []string{"-cluster"}, false},
		{"restricted", []string{"-pss-enforce", "restricted"}, false},
		{"sidecar-callers", []string{"-config", "configs/sidecar-callers.yaml"}, true},
		{"ip-blocks", []string{"-config", "configs/ip-blocks.yaml"}, true},
		{"knative-activator", []string{"-config", "configs/knative-activator.yaml"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			require.NoError(t, run(tc.args, &stdout, &stderr), stderr.String())
			golden.Assert(t, "render/"+tc.name+".yaml", stdout.Bytes())
			if tc.stderr {
				golden.Assert(t, "render/"+tc.name+".stderr.txt", stderr.Bytes())
			}
		})
	}
}

// A very wide ipBlocks range is allowed, but the admin is told on stderr what it admits; the YAML
// on stdout is unchanged by it.
func TestRenderWarnsAboutWideIPBlocks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "wide.yaml")
	require.NoError(t, os.WriteFile(p, []byte("apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\n"+
		"authorization: {l4Exceptions: [{ipBlocks: [10.0.0.0/8], ports: [9091]}]}\n"), 0o644))
	var stdout, stderr bytes.Buffer
	require.NoError(t, run([]string{"-config", p}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "warning: "+p+`: authorization.l4Exceptions[0].ipBlocks[0]: "10.0.0.0/8" is a very wide range`)
	assert.Contains(t, stdout.String(), "- 10.0.0.0/8")
}

func TestRenderRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	badProfile := write("profile.yaml", "apiVersion: kubeflow.org/v1\nkind: Profile\nmetadata: {name: a}\nspec: {owner: {name: a@b.c}, plugin: []}\n")
	badConfig := write("config.yaml", "apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\nmesh: {mode: hybrid}\n")
	customClass := write("class.yaml", "apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\nmesh: {waypoint: {className: corp-waypoint}}\n")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"profile field", []string{"-profile", badProfile}, []string{badProfile, `unknown field "spec.plugin"`}},
		{"config field", []string{"-config", badConfig}, []string{badConfig, "mesh.mode", `"hybrid"`}},
		{"mode flag", []string{"-mode", "hybrid"}, []string{"-mode", "mesh.mode", `"hybrid"`}},
		{"pss flag", []string{"-pss-enforce", "strict"}, []string{"-pss-enforce", "podSecurity.enforce.level", `"strict"`}},
		{"missing file", []string{"-profile", filepath.Join(dir, "nope.yaml")}, []string{"nope.yaml"}},
		{"stray argument", []string{"extra"}, []string{"extra"}},
		{"sidecar caller on behalf of users", []string{"-config", write("ui-sidecar.yaml", "apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\n"+
			"authorization: {platformCallers: [{name: pipelines-ui, principal: cluster.local/ns/kubeflow/sa/ml-pipeline-ui, onBehalfOfUser: true, dataPlane: sidecar}]}\n")},
			[]string{"ui-sidecar.yaml", "authorization.platformCallers[0].dataPlane", `"sidecar"`, "user-id header"}},
		{"ipBlocks /0", []string{"-config", write("all.yaml", "apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\n"+
			"authorization: {l4Exceptions: [{ipBlocks: [0.0.0.0/0]}]}\n")},
			[]string{"all.yaml", "authorization.l4Exceptions[0].ipBlocks[0]", `"0.0.0.0/0"`, "every address"}},
		{"custom class cluster", []string{"-cluster", "-config", customClass}, []string{"-cluster", `mesh.waypoint.className "corp-waypoint"`, "istio-waypoint"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(tc.args, &stdout, &stderr)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Empty(t, stdout.String(), "nothing on stdout when the input is bad")
			assert.NotContains(t, strings.TrimSpace(err.Error()), "\n\n")
		})
	}
}
