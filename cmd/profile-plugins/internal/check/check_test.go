package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/cli"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/platform"
)

func TestMain(m *testing.M) { envtest.Main(m) }

// check runs Run and returns its exit status, stdout and stderr.
func check(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(t.Context(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func kinds(r platform.Report) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, string(f.Kind)+": "+f.What)
	}
	return out
}

// An empty cluster has none of the platform a healthy install has: check says what is missing,
// in every format alike, and exits 2; once the platform is there it says so and exits 0.
func TestCheckReportsTheClusterFindings(t *testing.T) {
	env := envtest.Start(t)
	kubeconfig := env.Kubeconfig(t)

	code, js, stderr := check(t, "-kubeconfig", kubeconfig, "-o", "json")
	assert.Equal(t, cli.ExitAttention, code, stderr)
	var report platform.Report
	require.NoError(t, json.Unmarshal([]byte(js), &report))
	// The platform's findings, then one GuardMissing for each policy of the admission guard.
	assert.Equal(t, append([]string{
		"CallerNamespaceMissing: pipelines-ui", "CallerNamespaceMissing: notebook-controller",
		"CallerNamespaceMissing: katib-controller", "IngressGatewayMissing: ingress-gateway",
		"WaypointCannotStartIfRestricted: waypoint", "WaypointDefaultDenyMissing: waypoint",
		// No istiod runs as guard.meshServiceAccounts' istio-system/istiod.
		"MeshServiceAccountNotRunning: mesh-service-account",
	}, slices.Repeat([]string{"GuardMissing: guard"}, len(guard.Names()))...), kinds(report))

	code, text, stderr := check(t, "--kubeconfig", kubeconfig)
	assert.Equal(t, cli.ExitAttention, code)
	assert.Empty(t, stderr)
	assert.Equal(t, report.String()+"\n", text, "the text is the same report")
	assert.True(t, strings.HasPrefix(text, fmt.Sprintf("platform check: %d finding(s)\n  CallerNamespaceMissing: pipelines-ui (namespace kubeflow", len(report.Findings))), text)

	code, ym, _ := check(t, "-kubeconfig", kubeconfig, "-o", "yaml")
	assert.Equal(t, cli.ExitAttention, code)
	var fromYAML platform.Report
	require.NoError(t, yaml.Unmarshal([]byte(ym), &fromYAML))
	assert.Equal(t, report, fromYAML)

	fixture.Platform(t, env.Client, config.Default())
	code, text, _ = check(t, "-kubeconfig", kubeconfig, "-context", "envtest")
	assert.Equal(t, cli.ExitOK, code)
	assert.Equal(t, "platform check: no findings\n", text)
	code, js, _ = check(t, "-kubeconfig", kubeconfig, "-o", "json")
	assert.Equal(t, cli.ExitOK, code)
	assert.JSONEq(t, `{"findings": []}`, js, "an empty list, not null")

	// The configuration counts: a caller whose namespace the platform lacks is a finding again, and
	// the guard installed for the default configuration is stale under this one, which reserves
	// the caller's namespace: each policy is reported, to be rendered again (review admin5, A5-3).
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfgPath, "apiVersion: "+config.APIVersion+"\nkind: "+config.Kind+"\n"+
		"authorization: {platformCallers: [{name: reporter, principal: cluster.local/ns/reports/sa/reporter}]}\n")
	code, js, _ = check(t, "-kubeconfig", kubeconfig, "-config", cfgPath, "-o", "json")
	assert.Equal(t, cli.ExitAttention, code)
	report = platform.Report{}
	require.NoError(t, json.Unmarshal([]byte(js), &report))
	want := []string{"CallerNamespaceMissing: reporter"}
	for range guard.Names() {
		want = append(want, "GuardStale: guard")
	}
	assert.Equal(t, want, kinds(report))
}

// A cluster that cannot be reached or named is exit 1, with one line naming the kubeconfig.
func TestCheckWithoutACluster(t *testing.T) {
	env := envtest.Start(t)
	code, out, stderr := check(t, "-kubeconfig", env.Kubeconfig(t), "-context", "nowhere")
	assert.Equal(t, cli.ExitError, code)
	assert.Empty(t, out)
	assert.Regexp(t, `^check: kubeconfig: [^\n]*"nowhere"[^\n]*\n$`, stderr)

	code, _, stderr = check(t, "-kubeconfig", filepath.Join(t.TempDir(), "missing"))
	assert.Equal(t, cli.ExitError, code)
	assert.True(t, strings.HasPrefix(stderr, "check: kubeconfig: "), stderr)
}

// Bad flags and configuration are refused before any cluster is read.
func TestCheckRefusesBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"output format", []string{"-o", "table"}, "check: -o \"table\": must be text, yaml or json\nRun 'profile-plugins check --help' for usage.\n"},
		{"stray argument", []string{"extra"}, "check: unexpected arguments [\"extra\"]\nRun 'profile-plugins check --help' for usage.\n"},
		{"mode", []string{"-mode", "hybrid", "-kubeconfig", "/nonexistent"}, "check: default configuration with -mode: mesh.mode"},
		{"enforce", []string{"-pss-enforce", "strict", "-kubeconfig", "/nonexistent"}, "check: default configuration with -pss-enforce: podSecurity.enforce.level"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr := check(t, c.args...)
			assert.Equal(t, cli.ExitError, code)
			assert.Empty(t, out)
			assert.True(t, strings.HasPrefix(stderr, c.want), stderr)
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}
