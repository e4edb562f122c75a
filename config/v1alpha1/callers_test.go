package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// culler is the notebook controller's default entry, written out as an admin would.
const culler = "{name: notebook-controller, principal: cluster.local/ns/kubeflow/sa/notebook-controller-service-account, methods: [GET], paths: ['*/api/kernels']"

func TestDefaultCallersAreTodaysThree(t *testing.T) {
	a := config.Default().Authorization
	require.Len(t, a.PlatformCallers, 3)
	assert.Equal(t, config.PlatformCaller{Name: "pipelines-ui", Principal: "cluster.local/ns/kubeflow/sa/ml-pipeline-ui", DataPlane: config.CallerAmbient, OnBehalfOfUser: true}, a.PlatformCallers[0])
	assert.Equal(t, config.PlatformCaller{Name: "notebook-controller", Principal: "cluster.local/ns/kubeflow/sa/notebook-controller-service-account",
		DataPlane: config.CallerAmbient, Methods: []string{"GET"}, Paths: []string{config.KernelsPath}}, a.PlatformCallers[1])
	assert.Equal(t, config.PlatformCaller{Name: "katib-controller", Principal: "cluster.local/ns/kubeflow/sa/katib-controller", DataPlane: config.CallerAmbient}, a.PlatformCallers[2])
	assert.True(t, a.CallersAreDefault())

	c, err := config.Parse([]byte(header + "mesh: {trustDomain: corp.example}\nauthorization: {katibRule: false, principals: {notebookController: corp.example/ns/nb/sa/nb}}\n"))
	require.NoError(t, err)
	require.Len(t, c.Authorization.PlatformCallers, 2, "katibRule false drops the Katib entry from the defaults")
	assert.Equal(t, "corp.example/ns/kubeflow/sa/ml-pipeline-ui", c.Authorization.PlatformCallers[0].Principal, "defaults follow the trust domain")
	assert.Equal(t, "corp.example/ns/nb/sa/nb", c.Authorization.PlatformCallers[1].Principal, "defaults follow the principals")
}

func TestExplicitCallersReplaceTheDefaults(t *testing.T) {
	c, err := config.Parse([]byte(header + `
authorization:
  platformCallers:
  - ` + culler + `, dataPlane: sidecar, ports: [8888]}
  - {name: activator, principal: cluster.local/ns/knative-serving/sa/activator, onBehalfOfUser: true}
`))
	require.NoError(t, err)
	a := c.Authorization
	require.Len(t, a.PlatformCallers, 2)
	assert.Equal(t, config.CallerSidecar, a.PlatformCallers[0].DataPlane)
	assert.Equal(t, config.CallerAmbient, a.PlatformCallers[1].DataPlane, "the data plane defaults to ambient")
	assert.False(t, a.CallersAreDefault())

	// An on-behalf-of-user caller on sidecars is fine where everything runs sidecars: the owner
	// policy on the pods checks its header.
	_, err = config.Parse([]byte(header + "mesh: {mode: sidecar}\nauthorization: {platformCallers: [{name: ui, principal: cluster.local/ns/kubeflow/sa/ml-pipeline-ui, onBehalfOfUser: true, dataPlane: sidecar}]}\n"))
	assert.NoError(t, err)

	c, err = config.Parse([]byte(header + "authorization: {platformCallers: []}\n"))
	require.NoError(t, err)
	assert.Empty(t, c.Authorization.PlatformCallers, "an explicit empty list trusts no platform caller")
}

func TestBadPlatformCallers(t *testing.T) {
	pc := func(entries ...string) string {
		return header + "authorization:\n  platformCallers:\n  - " + strings.Join(entries, "\n  - ") + "\n"
	}
	const p = "principal: cluster.local/ns/kubeflow/sa/x"
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"name missing", pc("{" + p + "}"), []string{"authorization.platformCallers[0].name", `""`}},
		{"name not a label", pc("{name: Culler, " + p + "}"), []string{"authorization.platformCallers[0].name", `"Culler"`}},
		{"name twice", pc("{name: a, "+p+"}", "{name: a, principal: cluster.local/ns/kubeflow/sa/y}"), []string{"authorization.platformCallers[1].name", "Duplicate", "platformCallers[0]"}},
		{"principal missing", pc("{name: a}"), []string{"authorization.platformCallers[0].principal", "Required"}},
		{"principal wildcard", pc("{name: a, principal: 'cluster.local/ns/kubeflow/*'}"), []string{"authorization.platformCallers[0].principal", "prefix match"}},
		{"principal shape", pc("{name: a, principal: kubeflow/x}"), []string{"authorization.platformCallers[0].principal", `"kubeflow/x"`}},
		{"data plane", pc("{name: a, " + p + ", dataPlane: hybrid}"), []string{"authorization.platformCallers[0].dataPlane", `"hybrid"`, "ambient", "sidecar"}},
		{"method lower case", pc("{name: a, " + p + ", methods: [get]}"), []string{"authorization.platformCallers[0].methods[0]", `"get"`, "upper-case"}},
		{"method wildcard", pc("{name: a, " + p + ", methods: ['G*']}"), []string{"authorization.platformCallers[0].methods[0]", `"G*"`}},
		{"path relative", pc("{name: a, " + p + ", paths: [api/kernels]}"), []string{"authorization.platformCallers[0].paths[0]", `"api/kernels"`, "absolute"}},
		{"path star alone", pc("{name: a, " + p + ", paths: ['*']}"), []string{"authorization.platformCallers[0].paths[0]", "leave paths empty"}},
		{"path star inside", pc("{name: a, " + p + ", paths: ['/a/*/b']}"), []string{"authorization.platformCallers[0].paths[0]", `"/a/*/b"`}},
		{"path stars both ends", pc("{name: a, " + p + ", paths: ['*/a*']}"), []string{"authorization.platformCallers[0].paths[0]", `"*/a*"`}},
		{"path query", pc("{name: a, " + p + ", paths: ['/a?b=c']}"), []string{"authorization.platformCallers[0].paths[0]", "query"}},
		{"path template", pc("{name: a, " + p + ", paths: ['/a/{*}']}"), []string{"authorization.platformCallers[0].paths[0]", "template"}},
		{"path space", pc("{name: a, " + p + ", paths: ['/a b']}"), []string{"authorization.platformCallers[0].paths[0]", "white space"}},
		{"port", pc("{name: a, " + p + ", ports: [0]}"), []string{"authorization.platformCallers[0].ports[0]", "1 to 65535"}},
		{"on behalf of user with limits", pc("{name: a, " + p + ", onBehalfOfUser: true, methods: [GET]}"), []string{"authorization.platformCallers[0].onBehalfOfUser", "leave them empty"}},
		{"ingress without the header", pc("{name: gw, principal: cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account}"), []string{"authorization.platformCallers[0].principal", "the ingress gateway", "without the header"}},
		{"header-only principal also without the header", pc("{name: ui, principal: cluster.local/ns/kubeflow/sa/ui, onBehalfOfUser: true}", "{name: ui-direct, principal: cluster.local/ns/kubeflow/sa/ui}"),
			[]string{"authorization.platformCallers[1].principal", `platform caller "ui"`}},
		{"on behalf of user on sidecars in ambient", pc("{name: activator, principal: cluster.local/ns/knative-serving/sa/activator, onBehalfOfUser: true, dataPlane: sidecar}"),
			[]string{"authorization.platformCallers[0].dataPlane", `"sidecar"`, `caller "activator"`, "user-id header", "knative-serving", "ambient"}},
		{"principal and callers", header + "authorization:\n  principals: {notebookController: cluster.local/ns/nb/sa/nb}\n  platformCallers: [" + culler + "}]\n",
			[]string{"authorization.principals.notebookController", `"cluster.local/ns/nb/sa/nb"`, "platformCallers is set, so it wins", `"notebook-controller"`}},
		{"katib rule and callers", header + "authorization:\n  katibRule: false\n  platformCallers: [" + culler + "}]\n",
			[]string{"authorization.katibRule", "platformCallers is set, so it wins", `leave the "katib-controller" entry out`}},
		{"l4 exception for a caller on behalf of users", header + "authorization:\n  platformCallers: [{name: activator, principal: cluster.local/ns/knative-serving/sa/activator, onBehalfOfUser: true}]\n  l4Exceptions: [{namespaces: [knative-serving]}]\n",
			[]string{"authorization.l4Exceptions[0].namespaces[0]", `"knative-serving"`, `platform caller "activator"`, "header check"}},
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

// Paths Istio reads as the admin means them: exact, prefix (trailing '*') and suffix (leading '*').
func TestCallerPathsIstioAccepts(t *testing.T) {
	for _, path := range []string{"/api/kernels", "/api/*", "*/api/kernels", "*.json", "/"} {
		_, err := config.Parse([]byte(header + "authorization: {platformCallers: [{name: a, principal: cluster.local/ns/x/sa/y, paths: ['" + path + "']}]}\n"))
		assert.NoError(t, err, path)
	}
}

func TestReservedNamespacesFollowTheCallers(t *testing.T) {
	c, err := config.Parse([]byte(header + `
authorization:
  platformCallers:
  - {name: activator, principal: cluster.local/ns/knative-serving/sa/activator, onBehalfOfUser: true}
  - {name: culler, principal: cluster.local/ns/notebooks/sa/culler, dataPlane: sidecar}
`))
	require.NoError(t, err)
	assert.Equal(t, []string{"default", "istio-system", "knative-serving", "kube-*", "kubeflow", "notebooks"}, c.ReservedNamespaces(),
		"every caller's namespace, and the namespaces of the identities the guard trusts (the controller's, kfam's: kubeflow)")

	withBlocks, err := config.Parse([]byte(header + "authorization: {l4Exceptions: [{ipBlocks: [10.8.0.0/24, 'fd00::1']}]}\n"))
	require.NoError(t, err)
	assert.Equal(t, config.Default().ReservedNamespaces(), withBlocks.ReservedNamespaces(), "an ipBlocks exception names no namespace")
}

func TestIPBlocks(t *testing.T) {
	for _, b := range []string{"10.8.0.0/24", "10.8.3.4", "10.8.3.4/32", "fd00:10::/64", "fd00::1", "10.0.0.0/8", "::/1"} {
		_, err := config.Parse([]byte(header + "authorization: {l4Exceptions: [{ipBlocks: ['" + b + "'], ports: [9091]}]}\n"))
		assert.NoError(t, err, b)
	}
	for b, want := range map[string]string{
		"0.0.0.0/0":    "a /0 admits every address",
		"::/0":         "a /0 admits every address",
		"10.8.3.0/16":  "the range it means is 10.8.0.0/16",
		"10.8.0.0/33":  "CIDR range",
		"monitoring":   "CIDR range",
		"fe80::1%eth0": "zone",
		"":             "CIDR range",
	} {
		_, err := config.Parse([]byte(header + "authorization: {l4Exceptions: [{ipBlocks: ['" + b + "']}]}\n"))
		if assert.Error(t, err, b) {
			assert.Contains(t, err.Error(), "authorization.l4Exceptions[0].ipBlocks[0]", b)
			assert.Contains(t, err.Error(), `"`+b+`"`, b)
			assert.Contains(t, err.Error(), want, b)
		}
	}
	_, err := config.Parse([]byte(header + "authorization: {l4Exceptions: [{ipBlocks: [10.8.0.0/24], namespaces: [monitoring]}]}\n"))
	assert.ErrorContains(t, err, "set exactly one of namespaces, principals, serviceAccounts or ipBlocks")
}

func TestWarningsOnWideIPBlocks(t *testing.T) {
	assert.Empty(t, config.Default().Warnings())
	c, err := config.Parse([]byte(header + `
authorization:
  l4Exceptions:
  - {ipBlocks: [10.0.0.0/8, 10.8.0.0/16, 10.9.1.2]}
  - {ipBlocks: ['fd00::/32', 'fd00:1::/48']}
`))
	require.NoError(t, err)
	w := c.Warnings()
	require.Len(t, w, 2, "only ranges wider than /16 (IPv4) and /48 (IPv6): %q", w)
	assert.Contains(t, w[0], `authorization.l4Exceptions[0].ipBlocks[0]: "10.0.0.0/8"`)
	assert.Contains(t, w[1], `authorization.l4Exceptions[1].ipBlocks[0]: "fd00::/32"`)
	for _, s := range []string{"past the waypoint", "mesh pods whose IPs fall in it", "every waypoint", "waypoint pod's IP"} {
		assert.Contains(t, w[0], s)
	}
}

// An explicit empty list must survive being written back: with omitempty it would vanish, and the
// parsed copy would get the defaults again, reopening paths or trusting callers the admin removed.
func TestEmptyListsRoundTrip(t *testing.T) {
	c, err := config.Parse([]byte(header + "authorization: {platformCallers: [], healthPaths: []}\n"))
	require.NoError(t, err)
	out, err := yaml.Marshal(c)
	require.NoError(t, err)
	again, err := config.Parse(out)
	require.NoError(t, err, string(out))
	assert.Empty(t, again.Authorization.PlatformCallers)
	assert.Empty(t, again.Authorization.HealthPaths, string(out))
}

// A caller on behalf of users is refused on the sidecar data plane in ambient mode, also when a
// valid sidecar-mode configuration is switched to ambient in Go.
func TestOnBehalfOfUserCallerOnSidecarsIsRefusedInAmbient(t *testing.T) {
	body := `authorization:
  platformCallers:
  - {name: pipelines-ui, principal: cluster.local/ns/kubeflow/sa/ml-pipeline-ui, dataPlane: sidecar, onBehalfOfUser: true}
`
	c, err := config.Parse([]byte(header + "mesh: {mode: sidecar}\n" + body))
	require.NoError(t, err, "in sidecar mode every rule runs in the user pods' sidecars")
	c.Mesh.Mode = config.ModeAmbient
	assert.ErrorContains(t, c.Validate(), "authorization.platformCallers[0].dataPlane")
	_, err = config.Parse([]byte(header + body))
	assert.ErrorContains(t, err, "authorization.platformCallers[0].dataPlane")
}

// A caller that is not on behalf of users may not use the ingress gateway's or an on-behalf
// caller's principal, on either data plane, and caller names are DNS labels, so no two differ by
// case only.
func TestCallersThatWouldOverlapAreRefused(t *testing.T) {
	for name, callers := range map[string]string{
		"ingress, sidecar":      "- {name: x, principal: cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account, dataPlane: sidecar}\n",
		"ingress, ambient":      "- {name: x, principal: cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account}\n",
		"pipelines-ui, sidecar": "- {name: ui, principal: cluster.local/ns/kubeflow/sa/ml-pipeline-ui, onBehalfOfUser: true}\n- {name: ui-l4, principal: cluster.local/ns/kubeflow/sa/ml-pipeline-ui, dataPlane: sidecar, ports: [3000]}\n",
		"name by case":          "- {name: Katib, principal: cluster.local/ns/kubeflow/sa/katib-controller}\n",
		"duplicate name":        "- {name: katib, principal: cluster.local/ns/kubeflow/sa/katib-controller}\n- {name: katib, principal: cluster.local/ns/kubeflow/sa/other, dataPlane: sidecar}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.Parse([]byte(header + "authorization:\n  platformCallers:\n" + strings.ReplaceAll("  "+callers, "\n-", "\n  -")))
			assert.ErrorContains(t, err, "authorization.platformCallers[")
		})
	}
}

// The guard trusts its identities in every managed namespace, so none may live in a namespace a
// Profile could have (a member may run pods as any ServiceAccount of their namespace).
func TestTheGuardsIdentitiesNamespacesAreReserved(t *testing.T) {
	c, err := config.Parse([]byte(header + `
guard:
  controllerServiceAccount: ops/controller
  meshServiceAccounts: [mesh/istiod-canary]
  policyWriters: [team-ci/ci]
`))
	require.NoError(t, err)
	for _, ns := range []string{"ops", "mesh", "team-ci"} {
		assert.Contains(t, c.ReservedNamespaces(), ns)
	}
}
