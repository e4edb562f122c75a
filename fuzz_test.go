package profileplugins_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// FuzzGenerate runs every generator with fuzzed names, owners, contributors and options. An owner
// the policies cannot carry safely is refused naming spec.owner.name; otherwise every policy
// without targetRefs is L4-only, the owner's header value is exactly prefix+owner, no condition
// value starts or ends with Istio's wildcard '*', a refused contributor is an error naming its
// RoleBinding and gets no policy, every object name is valid, and the output is YAML that reads back.
func FuzzGenerate(f *testing.F) {
	f.Add("kubeflow-user-example-com", "user@example.com", "bob@example.com", "", "waypoint", true, true)
	f.Add("team-a", "First.Last+ml@corp.example", strings.Repeat("x", 240)+"@example.com", "accounts.google.com:", "wp", false, true)
	f.Add("a", "a\r\nb", "c,d", "p", "none", true, false)
	f.Fuzz(func(t *testing.T, ns, owner, contributor, prefix, waypointName string, ambient, pluginContributors bool) {
		if len(validation.IsDNS1123Label(ns)) > 0 {
			return // the API server refuses such a Profile name before any plugin sees it
		}
		cfg := config.Default()
		cfg.Mesh.Waypoint.Name = waypointName
		cfg.Authorization.UserIDPrefix = prefix
		if !ambient {
			cfg.Mesh.Mode = config.ModeSidecar
		}
		if pluginContributors {
			cfg.Authorization.Contributors = config.ContributorsByPlugin
		}
		if cfg.Validate() != nil {
			return // config errors are FuzzParseConfig's
		}
		ps, err := plugins.New(cfg)
		require.NoError(t, err)
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{
			Name:        authz.ContributorPolicyName(contributor, "edit"),
			Annotations: map[string]string{"user": contributor, "role": "edit"},
		}}
		target := plugin.Target{
			Namespace: ns, Owner: owner,
			Profile:  &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			Observed: plugin.Observed{Objects: []client.Object{binding, fixture.ProgrammedGateway(cfg, ns)}},
		}
		r, err := runner.Render(runner.NewScheme(), ps, target)
		require.NoError(t, err, "an owner or contributor the policies cannot carry never takes the namespace's protection down")
		// Only the owner and the contributor can be refused; a refused owner leaves the owner
		// policy without a user rule, a refused contributor only its own policy out.
		contributorPolicy := authz.ContributorPolicyName(contributor, "edit")
		ownerRefused, contributorRefused := false, false
		for _, e := range r.Errors {
			if strings.Contains(e.Error(), "spec.owner.name") {
				ownerRefused = true
				continue
			}
			require.Contains(t, e.Error(), "RoleBinding "+contributorPolicy+": ")
			contributorRefused = true
		}
		if ownerRefused {
			out, err := r.YAML()
			require.NoError(t, err)
			require.NotContains(t, string(out), "user: "+owner+"\n", "the refused owner is named nowhere")
		}
		for _, u := range r.Objects {
			require.Empty(t, validation.IsDNS1123Subdomain(u.GetName()), "object name %q", u.GetName())
			require.Equal(t, ns, u.GetNamespace())
			if u.GetKind() != "AuthorizationPolicy" {
				continue
			}
			pol := &istiosecurityv1.AuthorizationPolicy{}
			data, err := yaml.Marshal(u.Object)
			require.NoError(t, err)
			require.NoError(t, yaml.Unmarshal(data, pol))
			if len(pol.Spec.TargetRefs) == 0 && ambient {
				require.Empty(t, authz.L7Attributes(&pol.Spec), "%s is enforced by ztunnel", pol.Name)
			}
			if contributorRefused {
				require.NotEqual(t, contributorPolicy, pol.Name, "a refused contributor gets no policy")
			}
			for _, rule := range pol.Spec.Rules {
				for _, c := range rule.When {
					for _, v := range c.Values {
						require.False(t, strings.HasPrefix(v, "*") || strings.HasSuffix(v, "*"), "%s: %s %q is an Istio wildcard", pol.Name, c.Key, v)
					}
				}
			}
			if pol.Name == cfg.Authorization.OwnerPolicyName && !ownerRefused {
				require.Equal(t, []string{prefix + owner}, pol.Spec.Rules[0].When[0].Values)
			}
		}
		out, err := r.YAML()
		require.NoError(t, err)
		var back []any
		for _, doc := range strings.Split(string(out), "\n---\n") {
			var v any
			require.NoError(t, yaml.Unmarshal([]byte(doc), &v))
			back = append(back, v)
		}
		require.Len(t, back, len(r.Objects)+1)
	})
}
