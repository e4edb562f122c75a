package profileplugins_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

const plainProfile = `apiVersion: kubeflow.org/v1
kind: Profile
metadata: {name: alice}
spec:
  owner: {kind: User, name: alice@example.com}
`

func renderProfile(t *testing.T, cfg *config.Config, doc string) *runner.Rendering {
	t.Helper()
	p, err := profilev1.ParseYAML([]byte(doc))
	require.NoError(t, err)
	ps, err := plugins.New(cfg)
	require.NoError(t, err)
	target := plugin.Target{Namespace: p.Name, Owner: p.Spec.Owner.Name, Profile: p,
		Observed: plugin.Observed{Objects: []client.Object{fixture.ProgrammedGateway(cfg, p.Name)}}}
	r, err := runner.Render(runner.NewScheme(), ps, target)
	require.NoError(t, err)
	return r
}

// A user who edits their own Profile cannot widen access or loosen Pod Security: nothing in a
// Profile but the owner and the PodSecurity entry reaches the plugins, and that entry is bounded by
// the admin's configuration. Each case must render exactly what the plain Profile renders.
func TestAProfileCannotEscalate(t *testing.T) {
	cfg := config.Default()
	want, err := renderProfile(t, cfg, plainProfile).YAML()
	require.NoError(t, err)

	cases := map[string]string{
		"loosen pod security": plainProfile + `  plugins:
  - kind: PodSecurity
    spec: {enforce: privileged, audit: privileged, warn: privileged}
`,
		"add principals and L4 exceptions through look-alike plugin kinds": plainProfile + `  plugins:
  - kind: AuthorizationPolicy
    spec: {principals: [cluster.local/ns/attacker/sa/default], l4Exceptions: [{namespaces: [attacker]}]}
  - kind: Authorization
    spec: {ownerPolicyName: not-the-owner-policy, healthPaths: ["/"]}
  - kind: PluginConfig
    spec: {authorization: {principals: {ingressGateway: cluster.local/ns/attacker/sa/default}}}
`,
		"point use-waypoint elsewhere": plainProfile + `  plugins:
  - kind: Waypoint
    spec: {name: attacker-waypoint, namespace: attacker}
  - kind: Mesh
    spec: {mode: none}
`,
		"grow the waypoint without a sizing override": plainProfile + `  plugins:
  - kind: Waypoint
    spec: {replicas: 50, resources: {requests: {cpu: "64", memory: 256Gi}, limits: {cpu: "64", memory: 256Gi}}}
`,
		"annotations and labels on the Profile": `apiVersion: kubeflow.org/v1
kind: Profile
metadata:
  name: alice
  annotations: {istio.io/use-waypoint: attacker, pod-security.kubernetes.io/enforce: privileged, owner: admin@example.com}
  labels: {istio.io/dataplane-mode: none, app.kubernetes.io/managed-by: profile-plugins}
spec:
  owner: {kind: User, name: alice@example.com}
`,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			r := renderProfile(t, cfg, doc)
			got, err := r.YAML()
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got))
			switch name {
			case "loosen pod security":
				require.Len(t, r.Errors, 3, "each refused level is reported")
				assert.Contains(t, r.Errors[0].Error(), `profile "alice": spec.plugins[0].spec.enforce: level "privileged" refused`)
			case "point use-waypoint elsewhere":
				// Waypoint is the sizing entry (waypoint.ProfileKind): its name and namespace are not fields of it.
				require.Len(t, r.Errors, 1)
				assert.Contains(t, r.Errors[0].Error(), `spec.plugins[0].spec: unknown field "name"`)
			case "grow the waypoint without a sizing override":
				require.Len(t, r.Errors, 1)
				assert.Contains(t, r.Errors[0].Error(), "no mesh.waypoint.sizingOverrides entry matches")
			default:
				assert.Empty(t, r.Errors)
			}
		})
	}
}

// The owner is the one field that does reach the policies; a value that could forge or split the
// header match is refused.
func TestHostileOwnersAreRefused(t *testing.T) {
	for name, owner := range map[string]string{
		"CR LF header injection": `"alice@example.com\r\nkubeflow-userid: admin@example.com"`,
		"comma joins values":     `"alice@example.com,admin@example.com"`,
		"control character":      `"alice@example.com\u0007"`,
		"excessive length":       `"` + longName + `@example.com"`,
	} {
		t.Run(name, func(t *testing.T) {
			p, err := profilev1.ParseYAML([]byte("apiVersion: kubeflow.org/v1\nkind: Profile\nmetadata: {name: alice}\nspec:\n  owner: {kind: User, name: " + owner + "}\n"))
			require.NoError(t, err)
			ps, err := plugins.New(config.Default())
			require.NoError(t, err)
			r, err := runner.Render(runner.NewScheme(), ps, plugin.Target{Namespace: "alice", Owner: p.Spec.Owner.Name, Profile: p})
			require.NoError(t, err, "the namespace keeps its protection")
			require.NotEmpty(t, r.Errors)
			assert.Contains(t, errors.Join(r.Errors...).Error(), "spec.owner.name")
			out, err := r.YAML()
			require.NoError(t, err)
			assert.NotContains(t, string(out), "kubeflow-userid", "no user rule while the owner is refused")
			assert.NotContains(t, string(out), "admin@example.com")
		})
	}
}

var longName = func() string {
	b := make([]byte, 300)
	for i := range b {
		b[i] = 'a'
	}
	return string(b)
}()
