package v1alpha1_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	psaapi "k8s.io/pod-security-admission/api"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

const header = "apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\n"

func TestDefaults(t *testing.T) {
	c, err := config.Parse([]byte(header))
	require.NoError(t, err)
	assert.Equal(t, config.Default(), c, "an empty document must mean the documented defaults")
	assert.Equal(t, config.ModeAmbient, c.Mesh.Mode)
	assert.Equal(t, "waypoint", c.Mesh.Waypoint.Name)
	assert.Equal(t, "istio-waypoint", c.Mesh.Waypoint.ClassName)
	assert.Equal(t, "service", c.Mesh.Waypoint.For)
	assert.Equal(t, "ns-owner-access-istio", c.Authorization.OwnerPolicyName)
	assert.Equal(t, "ns-owner-access-istio-ztunnel", c.Authorization.ZtunnelPolicyName)
	assert.Equal(t, "istio-system", c.Mesh.RootNamespace)
	assert.True(t, *c.Mesh.IngressUseWaypoint)
	assert.True(t, *c.Mesh.IstioCNI)
	assert.False(t, *c.Mesh.Waypoint.SeccompPatch, "the per-namespace patch is an opt-in: namespace editors can write it")
	assert.Equal(t, "istio-system", c.Mesh.IstiodNamespace)
	assert.Equal(t, "kubeflow-userid", c.Authorization.UserIDHeader)
	assert.Equal(t, "cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account", c.Authorization.Principals.IngressGateway)
	assert.Equal(t, "cluster.local/ns/kubeflow/sa/katib-controller", c.Authorization.Principals.KatibController)
	assert.Equal(t, []string{"/healthz", "/metrics", "/wait-for-drain"}, c.Authorization.HealthPaths)
	assert.Equal(t, config.LevelVersion{Level: psaapi.LevelBaseline, Version: "latest"}, c.PodSecurity.Enforce)
	assert.Equal(t, config.LevelVersion{Level: psaapi.LevelRestricted, Version: "latest"}, c.PodSecurity.Warn)
	assert.Equal(t, config.OwnershipReferenceOrAnnotation, c.Namespaces.Ownership)
	assert.Empty(t, c.Namespaces.Reserved)
}

func TestReservedNamespaces(t *testing.T) {
	assert.Equal(t, []string{"default", "istio-system", "kube-*", "kubeflow"}, config.Default().ReservedNamespaces(),
		"the root and istiod's namespace and the namespaces of the default principals")

	c, err := config.Parse([]byte(header + `
mesh: {rootNamespace: mesh-root, trustDomain: corp.example}
authorization:
  principals: {ingressGateway: corp.example/ns/gateways/sa/ingress, katibController: corp.example/ns/katib/sa/katib-controller}
  l4Exceptions:
  - namespaces: [monitoring]
  - principals: [corp.example/ns/tracing/sa/collector]
  - serviceAccounts: [logging/fluent-bit]
namespaces: {ownership: ownerReference, reserved: [auth, "knative-*", kubeflow]}
`))
	require.NoError(t, err)
	assert.Equal(t, config.OwnershipReference, c.Namespaces.Ownership)
	assert.Equal(t, []string{"auth", "default", "gateways", "istio-system", "katib", "knative-*", "kube-*", "kubeflow", "logging", "mesh-root", "monitoring", "tracing"},
		c.ReservedNamespaces(), "istio-system stays reserved as istiod's namespace (mesh.istiodNamespace), apart from the root namespace")
}

func TestPrincipalDefaultsFollowTheTrustDomain(t *testing.T) {
	c, err := config.Parse([]byte(header + "mesh: {trustDomain: corp.example}\n"))
	require.NoError(t, err)
	assert.Equal(t, "corp.example/ns/kubeflow/sa/ml-pipeline-ui", c.Authorization.Principals.PipelinesUI)
}

func TestExplicitValuesAreKept(t *testing.T) {
	c, err := config.Parse([]byte(header + `
mesh: {mode: sidecar, revision: canary, waypoint: {name: wp, className: my-class, for: all}}
authorization: {userIdHeader: x-user, userIdPrefix: "accounts.google.com:", healthPaths: []}
podSecurity: {enforce: {level: restricted, version: v1.35}}
`))
	require.NoError(t, err)
	assert.Equal(t, config.ModeSidecar, c.Mesh.Mode)
	assert.Equal(t, "canary", c.Mesh.Revision)
	assert.Equal(t, "wp", c.Mesh.Waypoint.Name)
	assert.Equal(t, "my-class", c.Mesh.Waypoint.ClassName)
	assert.Equal(t, "all", c.Mesh.Waypoint.For)
	assert.Equal(t, "accounts.google.com:", c.Authorization.UserIDPrefix)
	assert.Empty(t, c.Authorization.HealthPaths, "an explicit empty list closes the health paths")
	assert.Equal(t, config.LevelVersion{Level: psaapi.LevelRestricted, Version: "v1.35"}, c.PodSecurity.Enforce)
}

// Every bad input is refused with the field path and, where there is one, the bad value.
func TestBadConfig(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"wrong apiVersion", "apiVersion: v1\nkind: PluginConfig\n", []string{"apiVersion", `"v1"`}},
		{"wrong kind", "apiVersion: " + config.APIVersion + "\nkind: Config\n", []string{"kind", `"Config"`}},
		{"unknown top-level field", header + "meshh: {}\n", []string{`unknown field "meshh"`}},
		{"unknown nested field", header + "mesh: {waypoint: {nam: x}}\n", []string{`unknown field "mesh.waypoint.nam"`}},
		{"duplicate key", header + "mesh: {mode: ambient, mode: sidecar}\n", []string{`"mode"`}},
		{"wrong type", header + "mesh: {mode: [ambient]}\n", []string{"mesh.mode"}},
		{"mode", header + "mesh: {mode: hybrid}\n", []string{"mesh.mode", `"hybrid"`, "ambient", "sidecar", "none"}},
		{"trust domain", header + "mesh: {trustDomain: Corp.Example}\n", []string{"mesh.trustDomain", `"Corp.Example"`}},
		{"revision not a label", header + "mesh: {revision: Canary}\n", []string{"mesh.revision", `"Canary"`}},
		{"waypoint name too long", header + "mesh: {waypoint: {name: " + string(make64()) + "}}\n", []string{"mesh.waypoint.name", "63"}},
		{"waypoint name none", header + "mesh: {waypoint: {name: none}}\n", []string{"mesh.waypoint.name", `"none"`, "reserved"}},
		{"waypoint name upper case", header + "mesh: {waypoint: {name: Waypoint}}\n", []string{"mesh.waypoint.name", `"Waypoint"`}},
		{"waypoint class", header + "mesh: {waypoint: {className: 'a b'}}\n", []string{"mesh.waypoint.className", `"a b"`}},
		{"waypoint for none", header + "mesh: {waypoint: {for: none}}\n", []string{"mesh.waypoint.for", `"none"`, "never run"}},
		{"waypoint for other", header + "mesh: {waypoint: {for: pods}}\n", []string{"mesh.waypoint.for", `"pods"`}},
		{"policy name", header + "authorization: {ownerPolicyName: Owner_Policy}\n", []string{"authorization.ownerPolicyName", `"Owner_Policy"`}},
		{"header name", header + "authorization: {userIdHeader: 'user id'}\n", []string{"authorization.userIdHeader", `"user id"`}},
		{"prefix with newline", header + "authorization: {userIdPrefix: \"a\\r\\nb\"}\n", []string{"authorization.userIdPrefix", "control character"}},
		{"prefix wildcard", header + "authorization: {userIdPrefix: '*'}\n", []string{"authorization.userIdPrefix", `"*"`, "every caller"}},
		{"prefix leading star", header + "authorization: {userIdPrefix: '*:'}\n", []string{"authorization.userIdPrefix", `"*:"`, "suffix match"}},
		{"prefix zero-width space", header + "authorization: {userIdPrefix: \"accounts.google.com:\\u200b\"}\n", []string{"authorization.userIdPrefix", "U+200B", "invisible"}},
		{"principal wildcard", header + "authorization: {principals: {ingressGateway: '*'}}\n", []string{"authorization.principals.ingressGateway", `"*"`, "every caller"}},
		{"principal prefix wildcard", header + "authorization: {principals: {notebookController: 'cluster.local/ns/kubeflow/*'}}\n", []string{"authorization.principals.notebookController", "prefix match"}},
		{"l4 exception principal suffix wildcard", header + "authorization: {l4Exceptions: [{principals: ['*/sa/default']}]}\n", []string{"authorization.l4Exceptions[0].principals[0]", "suffix match"}},
		{"l4 exception namespace wildcard", header + "authorization: {l4Exceptions: [{namespaces: ['*']}]}\n", []string{"authorization.l4Exceptions[0].namespaces[0]", "every caller"}},
		{"l4 exception service account wildcard", header + "authorization: {l4Exceptions: [{serviceAccounts: ['monitoring/*']}]}\n", []string{"authorization.l4Exceptions[0].serviceAccounts[0]", "prefix match"}},
		{"l4 exception service account dot", header + "authorization: {l4Exceptions: [{serviceAccounts: [monitoring/prom.server]}]}\n", []string{"authorization.l4Exceptions[0].serviceAccounts[0]", `"monitoring/prom.server"`, "any character"}},
		{"prefix with comma", header + "authorization: {userIdPrefix: 'a,b'}\n", []string{"authorization.userIdPrefix", "comma"}},
		{"principal shape", header + "authorization: {principals: {ingressGateway: istio-system/ingress}}\n", []string{"authorization.principals.ingressGateway", `"istio-system/ingress"`}},
		{"principal namespace", header + "authorization: {principals: {katibController: cluster.local/ns/Kubeflow/sa/katib}}\n", []string{"authorization.principals.katibController", "namespace"}},
		{"principal trust domain", header + "authorization: {principals: {pipelinesUI: CLUSTER/ns/kubeflow/sa/ui}}\n", []string{"authorization.principals.pipelinesUI", "trust domain"}},
		{"health path", header + "authorization: {healthPaths: [healthz]}\n", []string{"authorization.healthPaths[0]", `"healthz"`}},
		{"shared waypoint", header + "mesh: {waypoint: {namespace: istio-waypoints}}\n", []string{"mesh.waypoint.namespace", `"istio-waypoints"`, "not supported"}},
		{"waypoint label", header + "mesh: {waypoint: {labels: {'a b': x}}}\n", []string{"mesh.waypoint.labels", `"a b"`}},
		{"waypoint annotation", header + "mesh: {waypoint: {annotations: {'/x': y}}}\n", []string{"mesh.waypoint.annotations"}},
		{"root namespace", header + "mesh: {rootNamespace: Istio}\n", []string{"mesh.rootNamespace", `"Istio"`}},
		{"istiod namespace", header + "mesh: {istiodNamespace: Istio}\n", []string{"mesh.istiodNamespace", `"Istio"`}},
		{"ztunnel policy name", header + "authorization: {ztunnelPolicyName: 'a b'}\n", []string{"authorization.ztunnelPolicyName", `"a b"`}},
		{"ztunnel policy name same as owner", header + "authorization: {ztunnelPolicyName: ns-owner-access-istio}\n", []string{"authorization.ztunnelPolicyName", "must differ"}},
		{"contributors", header + "authorization: {contributors: both}\n", []string{"authorization.contributors", `"both"`}},
		{"kfam grace period negative", header + "authorization: {kfamGracePeriod: -1s}\n", []string{"authorization.kfamGracePeriod", `"-1s"`, "between 0s and 5m0s"}},
		{"kfam grace period too long", header + "authorization: {kfamGracePeriod: 1h}\n", []string{"authorization.kfamGracePeriod", `"1h0m0s"`}},
		{"l4 exception empty", header + "authorization: {l4Exceptions: [{ports: [15020]}]}\n", []string{"authorization.l4Exceptions[0]", "exactly one"}},
		{"l4 exception mixed", header + "authorization: {l4Exceptions: [{namespaces: [monitoring], principals: [cluster.local/ns/a/sa/b]}]}\n", []string{"authorization.l4Exceptions[0]", "exactly one"}},
		{"l4 exception ingress namespace", header + "authorization: {l4Exceptions: [{namespaces: [istio-system]}]}\n", []string{"authorization.l4Exceptions[0].namespaces[0]", `"istio-system"`, "skipping the owner's header check"}},
		{"l4 exception ingress principal", header + "authorization: {l4Exceptions: [{principals: [cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account]}]}\n", []string{"authorization.l4Exceptions[0].principals[0]", "ingress gateway"}},
		{"l4 exception ingress service account", header + "authorization: {l4Exceptions: [{serviceAccounts: [istio-system/istio-ingressgateway-service-account]}]}\n", []string{"authorization.l4Exceptions[0].serviceAccounts[0]", "ingress gateway"}},
		{"l4 exception service account shape", header + "authorization: {l4Exceptions: [{serviceAccounts: [prometheus]}]}\n", []string{"authorization.l4Exceptions[0].serviceAccounts[0]", `"prometheus"`}},
		{"l4 exception port", header + "authorization: {l4Exceptions: [{namespaces: [monitoring], ports: [70000]}]}\n", []string{"authorization.l4Exceptions[0].ports[0]", "70000"}},
		{"sidecar without cni", header + "mesh: {mode: sidecar, istioCNI: false}\n", []string{"podSecurity.enforce.level", `"baseline"`, "NET_ADMIN", "istioCNI"}},
		{"sidecar without cni restricted", header + "mesh: {mode: sidecar, istioCNI: false}\npodSecurity: {enforce: {level: restricted}}\n", []string{"podSecurity.enforce.level", `"restricted"`}},
		{"preflight", header + "podSecurity: {preflight: wait}\n", []string{"podSecurity.preflight", `"wait"`}},
		{"override matches nothing", header + "podSecurity: {overrides: [{minimumEnforce: privileged}]}\n", []string{"podSecurity.overrides[0].namespaceSelector", "matches nothing"}},
		{"override by profile name", header + "podSecurity: {overrides: [{profiles: ['gpu-*'], minimumEnforce: privileged}]}\n", []string{"podSecurity.overrides[0].profiles", "gpu-*", "a user chooses the name", "namespaceSelector"}},
		{"override empty selector", header + "podSecurity: {overrides: [{namespaceSelector: {}, minimumEnforce: privileged}]}\n", []string{"podSecurity.overrides[0].namespaceSelector", "matches nothing"}},
		{"override on a pss label", header + "podSecurity: {overrides: [{namespaceSelector: {matchLabels: {pod-security.kubernetes.io/enforce: privileged}}, minimumEnforce: privileged}]}\n", []string{"podSecurity.overrides[0].namespaceSelector", `"pod-security.kubernetes.io/enforce"`, "the Profile choose"}},
		{"override selector", header + "podSecurity: {overrides: [{namespaceSelector: {matchExpressions: [{key: a, operator: Like}]}, minimumEnforce: privileged}]}\n", []string{"podSecurity.overrides[0].namespaceSelector", "Like"}},
		{"override level", header + "podSecurity: {overrides: [{namespaceSelector: {matchLabels: {a: b}}, minimumEnforce: none}]}\n", []string{"podSecurity.overrides[0].minimumEnforce", `"none"`}},
		{"pss level", header + "podSecurity: {enforce: {level: strict}}\n", []string{"podSecurity.enforce.level", `"strict"`, "baseline"}},
		{"pss version", header + "podSecurity: {warn: {version: v1.30.1}}\n", []string{"podSecurity.warn.version", `"v1.30.1"`}},
		{"namespace ownership", header + "namespaces: {ownership: annotation}\n", []string{"namespaces.ownership", `"annotation"`, "ownerReferenceOrAnnotation", "ownerReference"}},
		{"reserved pattern", header + "namespaces: {reserved: ['team-[']}\n", []string{"namespaces.reserved[0]", `"team-["`}},
		{"reserved empty", header + "namespaces: {reserved: ['']}\n", []string{"namespaces.reserved[0]", `""`}},
		{"reserved upper case", header + "namespaces: {reserved: [Monitoring]}\n", []string{"namespaces.reserved[0]", `"Monitoring"`, "lowercase"}},
		{"reserved slash", header + "namespaces: {reserved: [a/b]}\n", []string{"namespaces.reserved[0]", `"a/b"`}},
		// A reversed range passes path.Match but breaks every policy of the guard (review A5-5).
		{"reserved reversed range", header + "namespaces: {reserved: [kubeflow, 'team-[z-a]']}\n", []string{"namespaces.reserved[1]", `"team-[z-a]"`, `"z-a"`, "reversed"}},
		{"reserved negated reversed range", header + "namespaces: {reserved: ['team-[^a-c9-0]']}\n", []string{"namespaces.reserved[0]", `"team-[^a-c9-0]"`, `"9-0"`}},
		{"pss version leading zero", header + "podSecurity: {audit: {version: v1.01}}\n", []string{"podSecurity.audit.version", `"v1.01"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.doc))
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	_, err := config.Load("testdata/does-not-exist.yaml")
	assert.ErrorContains(t, err, "testdata/does-not-exist.yaml")
}

func make64() []byte {
	b := make([]byte, 64)
	for i := range b {
		b[i] = 'a'
	}
	return b
}

// Enforce "restricted" no longer needs the per-namespace seccomp patch: the waypoint class
// defaults in mesh.istiodNamespace give the waypoint pod its seccompProfile, and whether they
// exist is for the platform check to tell at runtime, not for the configuration file.
func TestRestrictedWithoutThePerNamespacePatchIsValid(t *testing.T) {
	c, err := config.Parse([]byte("apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\npodSecurity: {enforce: {level: restricted}}\n"))
	require.NoError(t, err)
	assert.False(t, *c.Mesh.Waypoint.SeccompPatch)
	assert.Equal(t, "restricted", string(c.PodSecurity.Enforce.Level))
}

// The bounds validation names are inclusive: kfamGracePeriod may be 0s (no wait) and exactly its
// maximum, idleAfter exactly MinIdleAfter warns nothing, and a caller on behalf of a user refuses
// methods and paths together, and ports alone.
func TestBoundsAreInclusive(t *testing.T) {
	for _, doc := range []string{
		"authorization: {kfamGracePeriod: 0s}\n",
		"authorization: {kfamGracePeriod: " + config.MaxKfamGracePeriod.String() + "}\n",
	} {
		_, err := config.Parse([]byte(header + doc))
		assert.NoError(t, err, doc)
	}
	_, err := config.Parse([]byte(header + "authorization: {kfamGracePeriod: " + (config.MaxKfamGracePeriod + time.Second).String() + "}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "authorization.kfamGracePeriod")

	cfg, err := config.Parse([]byte(header + "mesh: {waypoint: {provision: onDemand, idleAfter: " + config.MinIdleAfter.String() + "}}\n"))
	require.NoError(t, err)
	for _, w := range cfg.Warnings() {
		assert.NotContains(t, w, "idleAfter", "exactly the minimum warns nothing")
	}

	for _, limits := range []string{"methods: [GET], paths: [/x]", "ports: [8080]"} {
		_, err = config.Parse([]byte(header + "authorization: {platformCallers: [{name: ui, principal: cluster.local/ns/kubeflow/sa/ui, onBehalfOfUser: true, " + limits + "}]}\n"))
		require.Error(t, err, limits)
		assert.Contains(t, err.Error(), "authorization.platformCallers[0].onBehalfOfUser", limits)
	}
}
