package authz_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

const (
	ns    = "kubeflow-user-example-com"
	owner = "user@example.com"
)

// kfamBinding is a RoleBinding as kfam writes it for a contributor.
func kfamBinding(user, role string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{
		Name:        authz.ContributorPolicyName(user, role),
		Annotations: map[string]string{"user": user, "role": role},
	}}
}

var longUser = strings.Repeat("a-very-long-name.", 16) + "@example.com"

var goldenCases = []struct {
	name, config string
	contributors []*rbacv1.RoleBinding
}{
	{name: "sidecar-default", config: "mesh: {mode: sidecar}\n"},
	{name: "ambient-default"},
	{name: "custom-header-prefix-principals", config: `authorization:
  userIdHeader: x-goog-authenticated-user-email
  userIdPrefix: "accounts.google.com:"
  healthPaths: [/healthz]
  principals:
    ingressGateway: cluster.local/ns/gateways/sa/kubeflow-ingress
    pipelinesUI: cluster.local/ns/pipelines/sa/ui
    notebookController: cluster.local/ns/notebooks/sa/controller
    katibController: cluster.local/ns/katib/sa/controller
`},
	{name: "custom-trust-domain", config: "mesh: {trustDomain: corp.example}\n"},
	{name: "l4-exceptions", config: `authorization:
  l4Exceptions:
  - namespaces: [monitoring]
    ports: [15020, 9090]
  - serviceAccounts: [observability/otel-collector]
  - principals: [corp.example/ns/backup/sa/velero]
`},
	{name: "contributors-ambient", config: "authorization: {contributors: plugin}\n",
		contributors: []*rbacv1.RoleBinding{kfamBinding("bob@example.com", "edit"), kfamBinding(longUser, "view")}},
	{name: "contributors-sidecar", config: "mesh: {mode: sidecar}\nauthorization: {contributors: plugin}\n",
		contributors: []*rbacv1.RoleBinding{kfamBinding("bob@example.com", "edit"), kfamBinding(longUser, "view")}},
	{name: "none", config: "mesh: {mode: none}\n"},
	{name: "platform-callers-sidecar", config: platformCallersSidecar, contributors: []*rbacv1.RoleBinding{kfamBinding("bob@example.com", "edit")}},
	{name: "platform-callers-sidecar-mode", config: "mesh: {mode: sidecar}\n" + platformCallersSidecar},
	{name: "ip-blocks", config: `authorization:
  l4Exceptions:
  - ipBlocks: [10.8.0.0/24, 10.9.3.4, "fd00:10::/64"]
    ports: [9091]
`},
}

// platformCallersSidecar: the culler and Katib run sidecars (the kubeflow namespace is not yet
// ambient), the Pipelines UI and Knative's activator are ambient and forward for users.
const platformCallersSidecar = `authorization:
  contributors: plugin
  platformCallers:
  - {name: pipelines-ui, principal: cluster.local/ns/kubeflow/sa/ml-pipeline-ui, onBehalfOfUser: true}
  - {name: activator, principal: cluster.local/ns/knative-serving/sa/activator, onBehalfOfUser: true}
  - {name: notebook-controller, principal: cluster.local/ns/kubeflow/sa/notebook-controller-service-account, dataPlane: sidecar, methods: [GET], paths: ["*/api/kernels"]}
  - {name: katib-controller, principal: cluster.local/ns/kubeflow/sa/katib-controller, dataPlane: sidecar, ports: [6789]}
`

func generate(t *testing.T, cfg *config.Config, observed ...client.Object) *runner.Rendering {
	t.Helper()
	target := plugin.Target{Namespace: ns, Owner: owner, Observed: plugin.Observed{Objects: observed}}
	r, err := runner.Render(runner.NewScheme(), []plugin.Plugin{authz.New(cfg)}, target)
	require.NoError(t, err)
	return r
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fixture.Config(t, tc.config)
			var observed []client.Object
			for _, b := range tc.contributors {
				observed = append(observed, b)
			}
			r := generate(t, cfg, observed...)
			out, err := r.YAML()
			require.NoError(t, err)
			golden.Assert(t, "authz/"+tc.name+".yaml", out)
		})
	}
}

// The split: no policy without targetRefs may need L7 attributes, and in ambient mode every rule
// with paths, methods or headers must sit in a policy with targetRefs. Checked on every golden case.
func TestL7RulesOnlyInTargetedPolicies(t *testing.T) {
	for _, tc := range goldenCases {
		cfg := fixture.Config(t, tc.config)
		var observed []client.Object
		for _, b := range tc.contributors {
			observed = append(observed, b)
		}
		d, err := authz.New(cfg).Generate(plugin.Target{Namespace: ns, Owner: owner, Observed: plugin.Observed{Objects: observed}})
		require.NoError(t, err)
		for _, o := range d.Objects {
			pol := o.(*istiosecurityv1.AuthorizationPolicy)
			l7 := authz.L7Attributes(&pol.Spec)
			if cfg.Mesh.Mode == config.ModeAmbient {
				if len(pol.Spec.TargetRefs) == 0 {
					assert.Empty(t, l7, "%s: %s is enforced by ztunnel but uses L7 attributes", tc.name, pol.Name)
					assert.Nil(t, pol.Spec.Selector, "%s: %s", tc.name, pol.Name)
				} else {
					assert.Nil(t, pol.Spec.Selector, "%s: %s: targetRefs and selector exclude each other", tc.name, pol.Name)
				}
			} else {
				assert.Empty(t, pol.Spec.TargetRefs, "%s: sidecar policies attach to pods", tc.name)
			}
		}
	}
}

func TestAmbientPolicies(t *testing.T) {
	r := generate(t, config.Default())
	require.Len(t, r.Objects, 2)
	owner, ztunnel := r.Objects[0], r.Objects[1]
	assert.Equal(t, "ns-owner-access-istio", owner.GetName())
	assert.Equal(t, "ns-owner-access-istio-ztunnel", ztunnel.GetName())

	ownerSpec := owner.Object["spec"].(map[string]any)
	assert.Equal(t, []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "waypoint"}}, ownerSpec["targetRefs"])

	zt := config.Default()
	pol := authz.ZtunnelPolicy(zt, ns)
	assert.Equal(t, []string{ns + "/waypoint"}, pol.Spec.Rules[0].From[0].Source.ServiceAccounts)
	assert.Equal(t, []string{ns}, pol.Spec.Rules[1].From[0].Source.Namespaces)
	for _, r := range pol.Spec.Rules {
		for _, f := range r.From {
			assert.NotContains(t, f.Source.Principals, zt.Authorization.Principals.IngressGateway, "the ingress must not bypass the waypoint")
			assert.NotContains(t, f.Source.Namespaces, "istio-system")
		}
	}
}

func TestBadOwnersAreRefused(t *testing.T) {
	cases := map[string]string{
		"empty":      "",
		"CR LF":      "alice@example.com\r\nkubeflow-userid: admin@example.com",
		"comma":      "alice@example.com,admin@example.com",
		"control":    "alice\x00@example.com",
		"too long":   strings.Repeat("a", 300) + "@example.com",
		"whitespace": " alice@example.com",
		"not UTF-8":  "alice\xdd@example.com",
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := authz.New(config.Default()).Generate(plugin.Target{Namespace: ns, Owner: o})
			require.NoError(t, err, "the namespace keeps its protection")
			require.Len(t, d.Errors, 1)
			assert.Contains(t, d.Errors[0].Error(), "spec.owner.name")
			assertNoUserRule(t, d)
		})
	}
}

func TestContributorValidation(t *testing.T) {
	_, err := authz.ContributorPolicy(config.Default(), ns, "bob@example.com,eve@example.com", "edit")
	assert.ErrorContains(t, err, "contributor.user")
	_, err = authz.ContributorPolicy(config.Default(), ns, "bob@example.com", "admin")
	assert.ErrorContains(t, err, `contributor.role: Unsupported value: "admin"`)
}

func TestContributorPolicyName(t *testing.T) {
	// Worked by hand through kfam's getBindingName (kubeflow/dashboard
	// components/access-management/kfam/bindings.go): join "User", the user with runs of
	// non-alphanumerics as "-", "ClusterRole" and the role; lower-case; collapse the runs again.
	cases := map[string]string{
		"user1@example.com":          "user-user1-example-com-clusterrole-edit",
		"First.Last+ml@corp.example": "user-first-last-ml-corp-example-clusterrole-edit",
		"a.b@x.com":                  "user-a-b-x-com-clusterrole-edit",
		"a-b@x.com":                  "user-a-b-x-com-clusterrole-edit",
		"A.B@X.COM":                  "user-a-b-x-com-clusterrole-edit",
		"--bob--":                    "user-bob-clusterrole-edit",
		"*":                          "user-clusterrole-edit",
		"Zoë@example.com":            "user-zo-example-com-clusterrole-edit",
		"a%20b@x.com":                "user-a-20b-x-com-clusterrole-edit",
	}
	for user, want := range cases {
		assert.Equal(t, want, authz.ContributorPolicyName(user, "edit"), "user %q", user)
	}
	assert.Equal(t, "user-bob-example-com-clusterrole-view", authz.ContributorPolicyName("bob@example.com", "view"))

	// kfam does not shorten names, so neither does this: 240 letters make a 267-byte name.
	long := strings.Repeat("a", 240) + "@example.com"
	assert.Equal(t, "user-"+strings.Repeat("a", 240)+"-example-com-clusterrole-edit", authz.ContributorPolicyName(long, "edit"))
	_, err := authz.ContributorPolicy(config.Default(), ns, long, "edit")
	require.Error(t, err, "a name kfam could not create is reported, not made up")
	assert.ErrorContains(t, err, "contributor.user")
	assert.ErrorContains(t, err, "kfam cannot create the policy")
}

func TestContributorsFromKfamBindingsOnly(t *testing.T) {
	forged := kfamBinding("mallory@example.com", "edit")
	forged.Name = "my-binding"
	ownerBinding := kfamBinding(owner, "admin")
	got, ignored := authz.ContributorsFrom([]metav1.Object{kfamBinding("bob@example.com", "view"), forged, ownerBinding})
	assert.Equal(t, []authz.Contributor{{User: "bob@example.com", Role: "view"}}, got)
	require.Len(t, ignored, 1)
	assert.Contains(t, ignored[0], `RoleBinding my-binding has kfam's annotations (user "mallory@example.com", role "edit") but not kfam's name "user-mallory-example-com-clusterrole-edit"`)

	// Metadata is enough: this is what a metadata-only cache returns.
	meta := &metav1.PartialObjectMetadata{ObjectMeta: kfamBinding("carol@example.com", "edit").ObjectMeta}
	got, _ = authz.ContributorsFrom([]metav1.Object{meta})
	assert.Equal(t, []authz.Contributor{{User: "carol@example.com", Role: "edit"}}, got)
}

// Users that kfam folds to one name are a conflict: neither is granted, and the error names the
// binding and every user, so an admin can remove the wrong one.
func TestFoldedContributorsAreAConflict(t *testing.T) {
	in := []authz.Contributor{
		{User: "a.b@x.com", Role: "edit"}, {User: "bob@example.com", Role: "view"},
		{User: "a-b@x.com", Role: "edit"}, {User: "A.B@X.COM", Role: "edit"},
		{User: "a.b@x.com", Role: "view"}, {User: "bob@example.com", Role: "view"},
	}
	pols, errs := authz.ContributorPolicies(config.Default(), ns, in)
	var names []string
	for _, p := range pols {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"user-a-b-x-com-clusterrole-view", "user-bob-example-com-clusterrole-view"}, names,
		"the others are unaffected, a repeated entry is one contributor, and the view role does not collide with edit")
	require.Len(t, errs, 1)
	assert.Equal(t, `RoleBinding user-a-b-x-com-clusterrole-edit: contributor.user: users "A.B@X.COM" and "a-b@x.com" and "a.b@x.com" all get kfam's name "user-a-b-x-com-clusterrole-edit" (kfam lower-cases ids and turns every other character into '-'); one policy can match only one of them, so none is granted until all but one are removed`,
		errs[0].Error())
}

func TestPluginAdoptsKfamContributorPolicies(t *testing.T) {
	cfg := fixture.Config(t, "authorization: {contributors: plugin, adoptOwnerPolicy: true}\n")
	bad := kfamBinding("x", "edit")
	bad.Annotations["user"] = "a\nb"
	bad.Name = authz.ContributorPolicyName("a\nb", "edit")
	d, err := authz.New(cfg).Generate(plugin.Target{Namespace: ns, Owner: owner, Observed: plugin.Observed{Objects: []client.Object{kfamBinding("bob@example.com", "edit"), bad}}})
	require.NoError(t, err)
	var names []string
	for _, r := range d.Adopt {
		names = append(names, r.Name)
	}
	assert.ElementsMatch(t, []string{"ns-owner-access-istio", "user-bob-example-com-clusterrole-edit"}, names)
	require.Len(t, d.Errors, 1, "a bad binding is reported, and the rest still applies")
	assert.Contains(t, d.Errors[0].Error(), "RoleBinding user-a-b-clusterrole-edit: no contributor policy: contributor.user")
}

func TestKfamPoliciesWithoutTargetRefsAreReportedInAmbient(t *testing.T) {
	kfamPolicy := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{
		Name: "user-bob-example-com-clusterrole-edit", Annotations: map[string]string{"user": "bob@example.com", "role": "edit"},
	}}
	d, err := authz.New(config.Default()).Generate(plugin.Target{Namespace: ns, Owner: owner, Observed: plugin.Observed{Objects: []client.Object{kfamPolicy}}})
	require.NoError(t, err)
	require.Len(t, d.Warnings, 1)
	assert.Contains(t, d.Warnings[0], "bob@example.com is denied")
}

func TestConverter(t *testing.T) {
	cases := []struct {
		file, kind, target string
		wantL7             []string
	}{
		{"selector-l7", "Gateway", "waypoint", []string{"rules[1].to[0].operation.methods", "rules[1].to[0].operation.paths", `rules[2].when[0].key "request.headers[kubeflow-userid]"`}},
		{"selector-l4", "Service", "metadata-grpc-service", nil},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile("../testdata/authz/" + tc.file + ".yaml")
			require.NoError(t, err)
			in := &istiosecurityv1.AuthorizationPolicy{}
			require.NoError(t, yaml.Unmarshal(data, in))
			target := authz.GatewayTarget(tc.target)
			if tc.kind == "Service" {
				target = authz.ServiceTarget(tc.target)
			}
			out, rep, err := authz.ToAmbient(in, target)
			require.NoError(t, err)
			assert.Equal(t, tc.wantL7, rep.L7)
			assert.Nil(t, out.Spec.Selector)
			assert.NotNil(t, in.Spec.Selector, "the input is not modified")
			enc, err := runner.EncodeYAML(runner.NewScheme(), out)
			require.NoError(t, err)
			golden.Assert(t, "authz/convert-"+tc.file+".yaml", enc)

			_, _, err = authz.ToAmbient(out, target)
			assert.ErrorIs(t, err, authz.ErrAlreadyAmbient)
		})
	}
}

func TestConverterRefusesBadTargets(t *testing.T) {
	in := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "kubeflow"}}
	for name, tc := range map[string]struct {
		kind, name, ns, want string
	}{
		"kind":         {"Pod", "x", "", "Gateway or Service"},
		"name":         {"Gateway", "Bad_Name", "", `"Bad_Name"`},
		"cross-namesp": {"Gateway", "waypoint", "other", "across namespaces"},
	} {
		t.Run(name, func(t *testing.T) {
			target := authz.GatewayTarget(tc.name)
			target.Kind, target.Namespace = tc.kind, tc.ns
			_, _, err := authz.ToAmbient(in, target)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// The ztunnel policy follows the mode, and the ambient label while the runner holds it: after a
// switch away from ambient the runner keeps the label while pods depend on it, and the policy that
// protects them there stays intact meanwhile.
func TestZtunnelPolicyStaysWhileAmbientIsHeld(t *testing.T) {
	held := plugin.Observed{Held: map[string]string{"istio.io/dataplane-mode": "ambient"}}
	other := plugin.Observed{Held: map[string]string{"istio.io/dataplane-mode": "none"}}
	names := func(d plugin.Desired) []string {
		var out []string
		for _, o := range d.Objects {
			out = append(out, o.GetName())
		}
		return out
	}
	cases := []struct {
		mode    config.MeshMode
		obs     plugin.Observed
		objects []string
	}{
		{config.ModeAmbient, held, []string{"ns-owner-access-istio", "ns-owner-access-istio-ztunnel"}},
		{config.ModeAmbient, other, []string{"ns-owner-access-istio", "ns-owner-access-istio-ztunnel"}},
		{config.ModeSidecar, held, []string{"ns-owner-access-istio", "ns-owner-access-istio-ztunnel"}},
		{config.ModeSidecar, other, []string{"ns-owner-access-istio"}},
		{config.ModeSidecar, plugin.Observed{Labels: map[string]string{"istio.io/dataplane-mode": "ambient"}}, []string{"ns-owner-access-istio"}},
		{config.ModeNone, held, []string{"ns-owner-access-istio-ztunnel"}},
		{config.ModeNone, other, nil},
	}
	for _, tc := range cases {
		cfg := config.Default()
		cfg.Mesh.Mode = tc.mode
		d, err := authz.New(cfg).Generate(plugin.Target{Namespace: ns, Owner: owner, Observed: tc.obs})
		require.NoError(t, err)
		assert.Equal(t, tc.objects, names(d), "%s with %v", tc.mode, tc.obs)
		assert.Empty(t, d.Waiting)
	}
}

// assertNoUserRule checks the owner policy of d admits no user: what stands in while the owner is
// refused.
func assertNoUserRule(t *testing.T, d plugin.Desired) {
	t.Helper()
	for _, o := range d.Objects {
		pol, ok := o.(*istiosecurityv1.AuthorizationPolicy)
		if !ok || pol.Name != config.Default().Authorization.OwnerPolicyName {
			continue
		}
		assert.NotContains(t, pol.Annotations, authz.UserAnnotation)
		for _, r := range pol.Spec.Rules {
			for _, c := range r.When {
				assert.NotContains(t, c.Key, "request.headers", "no user may reach the namespace while its owner is refused")
			}
		}
		assert.NotEmpty(t, pol.Spec.TargetRefs, "still attached to the waypoint")
		return
	}
	t.Fatal("no owner policy")
}

// In the runner, RoleBindings arrive as metadata (RoleBindingMetadataList): those grant
// contributors, and metadata of any other kind with kfam's annotations does not.
func TestContributorsFromRoleBindingMetadataOnly(t *testing.T) {
	cfg := fixture.Config(t, "authorization: {contributors: plugin}\n")
	asMetadata := func(b *rbacv1.RoleBinding, kind string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: b.ObjectMeta}
		m.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind(kind))
		return m
	}
	carol := asMetadata(kfamBinding("carol@example.com", "edit"), "RoleBinding")
	dave := asMetadata(kfamBinding("dave@example.com", "edit"), "ClusterRoleBinding")
	d, err := authz.New(cfg).Generate(plugin.Target{Namespace: ns, Owner: owner, Observed: plugin.Observed{Objects: []client.Object{carol, dave}}})
	require.NoError(t, err)
	var names []string
	for _, o := range d.Objects {
		names = append(names, o.GetName())
	}
	assert.Equal(t, []string{"ns-owner-access-istio", "ns-owner-access-istio-ztunnel", "user-carol-example-com-clusterrole-edit"}, names)
}
