package authz_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// A foreign ALLOW policy that admits every caller where the plugin's policies decide voids them
// (ALLOW policies add up) and is reported by name; one that admits only some callers, selects
// some pods, is in dry-run or denies is not.
func TestForeignAllowAllPoliciesAreNamed(t *testing.T) {
	cases := []struct {
		name, config, meta, policy string
		want                       string // "" for no warning
	}{
		{name: "ambient, namespace-wide allow all", policy: "spec: {rules: [{}]}", want: "admits every caller at ztunnel"},
		{name: "ambient, namespace-wide allow all on some ports", policy: "spec: {rules: [{to: [{operation: {ports: ['8080']}}]}]}", want: "at ztunnel"},
		{name: "ambient, an L7 rule is dropped by ztunnel", policy: "spec: {rules: [{to: [{operation: {paths: ['/']}}]}]}"},
		{name: "ambient, a rule with sources", policy: "spec: {rules: [{from: [{source: {namespaces: [monitoring]}}]}]}"},
		{name: "ambient, any namespace", policy: "spec: {rules: [{from: [{source: {namespaces: [monitoring]}}, {source: {namespaces: ['*']}}]}]}", want: "at ztunnel"},
		{name: "ambient, any principal", policy: "spec: {rules: [{from: [{source: {principals: ['*']}}]}]}", want: "at ztunnel"},
		{name: "ambient, any principal but one", policy: "spec: {rules: [{from: [{source: {principals: ['*'], notPrincipals: [x]}}]}]}",
			want: "admits every mesh caller it does not name at ztunnel"},
		{name: "ambient, a condition", policy: "spec: {rules: [{when: [{key: source.namespace, values: [monitoring]}]}]}"},
		{name: "ambient, at the waypoint", policy: "spec: {targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: waypoint}], rules: [{to: [{operation: {paths: ['/']}}]}]}",
			want: "admits every caller at the waypoint"},
		{name: "ambient, at a Service", policy: "spec: {targetRefs: [{kind: Service, name: app}], rules: [{}]}", want: "at the waypoint"},
		{name: "ambient, at another Gateway", policy: "spec: {targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: other}], rules: [{}]}"},
		{name: "sidecar, namespace-wide allow all", config: "mesh: {mode: sidecar}\n", policy: "spec: {rules: [{}]}", want: "admits every caller at every sidecar"},
		{name: "sidecar, targetRefs are not for sidecars", config: "mesh: {mode: sidecar}\n", policy: "spec: {targetRefs: [{kind: Service, name: app}], rules: [{}]}"},
		{name: "selector", policy: "spec: {selector: {matchLabels: {app: x}}, rules: [{}]}"},
		{name: "dry-run", meta: ", annotations: {istio.io/dry-run: 'true'}", policy: "spec: {rules: [{}]}"},
		{name: "deny", policy: "spec: {action: DENY, rules: [{}]}"},
		{name: "allow nothing", policy: "spec: {}"},
		{name: "ambient, namespace-wide voids the ztunnel policy", policy: "spec: {rules: [{}]}", want: "so ns-owner-access-istio-ztunnel restricts nothing"},
		{name: "ambient, at the waypoint voids the owner policy", policy: "spec: {targetRefs: [{kind: Service, name: app}], rules: [{}]}", want: "so ns-owner-access-istio restricts nothing"},
		{name: "sidecar, namespace-wide voids the owner policy", config: "mesh: {mode: sidecar}\n", policy: "spec: {rules: [{}]}", want: "so ns-owner-access-istio restricts nothing"},
		{name: "sidecar, an L7 rule is enforced by the sidecar", config: "mesh: {mode: sidecar}\n", policy: "spec: {rules: [{to: [{operation: {paths: ['/']}}]}]}", want: "at every sidecar"},
		{name: "ambient, the deprecated targetRef", policy: "spec: {targetRef: {kind: Service, name: app}, rules: [{}]}", want: "at the waypoint"},
		{name: "ambient, a Gateway of another group", policy: "spec: {targetRefs: [{group: networking.istio.io, kind: Gateway, name: waypoint}], rules: [{}]}"},
		{name: "ambient, a Service of another group", policy: "spec: {targetRefs: [{group: example.com, kind: Service, name: app}], rules: [{}]}"},
		{name: "ambient, another kind named like the waypoint", policy: "spec: {targetRefs: [{group: gateway.networking.k8s.io, kind: GatewayClass, name: waypoint}], rules: [{}]}"},
		{name: "not in dry-run", meta: ", annotations: {istio.io/dry-run: 'false'}", policy: "spec: {rules: [{}]}", want: "at ztunnel"},
		{name: "unreadable dry-run is enforced", meta: ", annotations: {istio.io/dry-run: 'maybe'}", policy: "spec: {rules: [{}]}", want: "at ztunnel"},
		{name: "the plugin's own", meta: ", labels: {app.kubernetes.io/managed-by: profile-plugins, profile-plugins.kubeflow-ambient.io/plugin: authz}", policy: "spec: {rules: [{}]}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pol := &istiosecurityv1.AuthorizationPolicy{}
			require.NoError(t, yaml.UnmarshalStrict([]byte("metadata: {name: open, namespace: "+ns+tc.meta+"}\n"+tc.policy), pol))
			d, err := authz.New(fixture.Config(t, tc.config)).Generate(plugin.Target{Namespace: ns, Owner: owner,
				Observed: plugin.Observed{Objects: []client.Object{pol}}})
			require.NoError(t, err)
			all := strings.Join(d.Warnings, "\n")
			if tc.want == "" {
				assert.NotContains(t, all, "open")
				return
			}
			assert.Contains(t, all, "AuthorizationPolicy open (not made by this plugin)")
			assert.Contains(t, all, tc.want)
		})
	}
}

// Each field of a source that matches any identity is evaluated on its own. One that keeps out an
// address range, or asks for a JWT, refuses someone; a negative list of names keeps out only
// those names, so the source still admits every caller it does not name (attack review of Dec 1,
// finding 2). Checked in sidecar mode, where L7 sources are enforced too.
func TestForeignSourceFieldsAreEvaluatedEachOnItsOwn(t *testing.T) {
	cfg := fixture.Config(t, "mesh: {mode: sidecar}\n")
	warning := func(source string) string {
		pol := &istiosecurityv1.AuthorizationPolicy{}
		require.NoError(t, yaml.UnmarshalStrict([]byte("metadata: {name: open, namespace: "+ns+"}\nspec: {rules: [{from: [{source: "+source+"}]}]}"), pol))
		d, err := authz.New(cfg).Generate(plugin.Target{Namespace: ns, Owner: owner, Observed: plugin.Observed{Objects: []client.Object{pol}}})
		require.NoError(t, err)
		for _, w := range d.Warnings {
			if strings.Contains(w, "AuthorizationPolicy open") {
				return w
			}
		}
		return ""
	}
	require.Contains(t, warning("{principals: ['*']}"), "admits every mesh caller at every sidecar", "the unrestricted source is reported")
	for _, f := range []string{"ipBlocks", "remoteIpBlocks", "notIpBlocks", "notRemoteIpBlocks"} {
		assert.Empty(t, warning("{principals: ['*'], "+f+": ['10.0.0.0/8']}"), "%s keeps out addresses", f)
	}
	assert.Empty(t, warning("{principals: ['*'], requestPrincipals: ['*']}"), "a caller without a JWT is refused")
	for _, f := range []string{"notPrincipals", "notNamespaces", "notServiceAccounts"} {
		assert.Contains(t, warning("{principals: ['*'], "+f+": [monitoring/x]}"), "admits every mesh caller it does not name at every sidecar", f)
	}
	assert.Contains(t, warning("{principals: ['*'], notRequestPrincipals: [example.com/x]}"), "admits every mesh caller at every sidecar",
		"a caller that sends no JWT passes notRequestPrincipals")
	for _, f := range []string{"principals", "namespaces"} {
		assert.Contains(t, warning("{"+f+": ['*']}"), "admits every mesh caller", "%s: ['*'] admits every caller with an identity", f)
		other := "namespaces: [monitoring]"
		if f == "namespaces" {
			other = "principals: [cluster.local/ns/monitoring/sa/prometheus]"
		}
		assert.Empty(t, warning("{"+f+": ['*'], "+other+"}"), "%s: ['*'] with a named peer", f)
	}
	assert.Empty(t, warning("{serviceAccounts: ['*']}"), "serviceAccounts take no wildcard: '*' names one service account")
	assert.Empty(t, warning("{requestPrincipals: ['*']}"), "only requests with a JWT")
}
