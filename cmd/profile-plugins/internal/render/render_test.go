package render

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/cli"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
)

// Each case is one golden file under testdata/golden/render/.
func TestRenderGolden(t *testing.T) {
	optIn := filepath.Join(t.TempDir(), "seccomp-patch.yaml")
	require.NoError(t, os.WriteFile(optIn, []byte("apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\nmesh: {waypoint: {seccompPatch: true}}\n"), 0o644))
	cases := []struct {
		name string
		args []string
		// what the output must (not) show, so a blind -update cannot hide a regression
		want, not []string
		// stderr also has a golden file, render/<name>.stderr.txt: the warnings an admin reads.
		stderr bool
	}{
		{"default", nil, nil, []string{"parametersRef", "kind: ConfigMap"}, false},
		{"sidecar", []string{"-mode", "sidecar"}, nil, nil, false},
		{"waypoint-not-ready", []string{"-waypoint-ready=false"}, nil, nil, false},
		{"cluster", []string{"-cluster"}, []string{"name: waypoint-default-deny", "gateway.istio.io/defaults-for-class: istio-waypoint", "type: RuntimeDefault"}, nil, false},
		{"cluster-ha", []string{"-cluster", "-config", "configs/waypoint-ha.yaml"}, []string{"horizontalPodAutoscaler:", "minReplicas: 2", "maxUnavailable: 1",
			"topologyKey: kubernetes.io/hostname", "whenUnsatisfiable: ScheduleAnyway", "averageUtilization: 80", "memory: 512Mi", "cpu: \"2\""}, []string{"replicas: 2\n"}, false},
		{"restricted", []string{"-pss-enforce", "restricted"}, []string{"pod-security.kubernetes.io/enforce: restricted"}, []string{"parametersRef", "kind: ConfigMap"}, false},
		{"seccomp-patch", []string{"-config", optIn}, []string{"name: waypoint-seccomp", "parametersRef"}, nil, false},
		{"sidecar-callers", []string{"-config", "configs/sidecar-callers.yaml"}, nil, nil, true},
		{"ip-blocks", []string{"-config", "configs/ip-blocks.yaml"}, []string{"ipBlocks:"}, nil, true},
		{"knative-activator", []string{"-config", "configs/knative-activator.yaml"}, nil, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			require.NoError(t, run(t.Context(), tc.args, &stdout, &stderr), stderr.String())
			for _, w := range tc.want {
				assert.Contains(t, stdout.String(), w)
			}
			for _, n := range tc.not {
				assert.NotContains(t, stdout.String(), n)
			}
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
	require.NoError(t, run(t.Context(), []string{"-config", p}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "warning: "+p+`: authorization.l4Exceptions[0].ipBlocks[0]: "10.0.0.0/8" is a very wide range`)
	assert.Contains(t, stdout.String(), "- 10.0.0.0/8")
}

// The opt-in per-namespace patch is announced with what it costs; the default says nothing.
func TestRenderWarnsAboutThePerNamespacePatch(t *testing.T) {
	optIn := filepath.Join(t.TempDir(), "seccomp-patch.yaml")
	require.NoError(t, os.WriteFile(optIn, []byte("apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\nmesh: {waypoint: {seccompPatch: true}}\n"), 0o644))
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-config", optIn}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "note: waypoint: mesh.waypoint.seccompPatch is on: namespace editors")
	stderr.Reset()
	require.NoError(t, run(t.Context(), nil, &stdout, &stderr))
	assert.NotContains(t, stderr.String(), "seccompPatch")
}

// With a custom waypoint class, -cluster refuses: istiod would ignore the default-deny. The whole
// message is a golden file, read like any other output.
func TestRenderClusterRefusesACustomClass(t *testing.T) {
	customClass := filepath.Join(t.TempDir(), "class.yaml")
	require.NoError(t, os.WriteFile(customClass, []byte("apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\nmesh: {waypoint: {className: corp-waypoint}}\n"), 0o644))
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-cluster", "-config", customClass}, &stdout, &stderr)
	require.Error(t, err)
	assert.Empty(t, stdout.String(), "neither cluster-wide object is written")
	for _, w := range []string{"-cluster", `mesh.waypoint.className "corp-waypoint"`, `only for class "istio-waypoint"`, "pilot/pkg/model/policyattachment.go", "silently ignored"} {
		assert.Contains(t, err.Error(), w)
	}
	// What the admin reads is what Run writes on stderr, with its exit status.
	stderr.Reset()
	assert.Equal(t, cli.ExitError, Run(t.Context(), []string{"-cluster", "-config", customClass}, &stdout, &stderr))
	assert.Empty(t, stdout.String())
	golden.Assert(t, "render/cluster-custom-class-error.txt", stderr.Bytes())
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
			err := run(t.Context(), tc.args, &stdout, &stderr)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Empty(t, stdout.String(), "nothing on stdout when the input is bad")
			assert.NotContains(t, strings.TrimSpace(err.Error()), "\n\n")
		})
	}
}

// With provision onDemand, render prints a namespace in use, byte for byte what provision always
// prints, so every golden and check of a working namespace holds; -idle prints the idle form: no
// waypoint and no routing labels, the ztunnel and owner policies and dataplane-mode as always.
func TestRenderOnDemandIsTheNamespaceInUseUnlessIdle(t *testing.T) {
	onDemand := filepath.Join(t.TempDir(), "ondemand.yaml")
	require.NoError(t, os.WriteFile(onDemand, []byte("apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\nmesh: {waypoint: {provision: onDemand}}\n"), 0o644))
	var always, inUse, idle, stderr bytes.Buffer
	require.NoError(t, run(t.Context(), nil, &always, &stderr))
	require.NoError(t, run(t.Context(), []string{"-config", onDemand}, &inUse, &stderr), stderr.String())
	assert.Equal(t, always.String(), inUse.String(), "render without -idle is unchanged by onDemand")

	stderr.Reset()
	require.NoError(t, run(t.Context(), []string{"-config", onDemand, "-idle"}, &idle, &stderr), stderr.String())
	out := idle.String()
	assert.NotContains(t, out, "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway", "no waypoint (the owner policy still names it in targetRefs)")
	assert.NotContains(t, out, "istio.io/use-waypoint")
	assert.Contains(t, out, "istio.io/dataplane-mode: ambient")
	assert.Contains(t, out, "name: ns-owner-access-istio-ztunnel")
	assert.Contains(t, out, "name: ns-owner-access-istio\n")
	assert.Contains(t, out, "profile-plugins.kubeflow-ambient.io/waypoint-idle-since:")
	assert.Contains(t, stderr.String(), "note: waypoint: waypoint idle since")

	err := run(t.Context(), []string{"-idle"}, &idle, &stderr)
	assert.ErrorContains(t, err, "-idle: needs mesh.mode ambient and mesh.waypoint.provision onDemand")
}
