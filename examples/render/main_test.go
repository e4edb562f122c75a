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
	}{
		{"default", nil},
		{"sidecar", []string{"-mode", "sidecar"}},
		{"waypoint-not-ready", []string{"-waypoint-ready=false"}},
		{"cluster", []string{"-cluster"}},
		{"restricted", []string{"-pss-enforce", "restricted"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			require.NoError(t, run(tc.args, &stdout, &stderr), stderr.String())
			golden.Assert(t, "render/"+tc.name+".yaml", stdout.Bytes())
		})
	}
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
