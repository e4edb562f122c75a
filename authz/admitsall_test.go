package authz_test

import (
	"fmt"
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

// foreignWarning generates the authz plugin's output with one foreign policy named "open" and
// returns the warning that names it, or "".
func foreignWarning(t *testing.T, configBody, spec string) string {
	t.Helper()
	pol := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, yaml.UnmarshalStrict([]byte("metadata: {name: open, namespace: "+ns+"}\nspec: "+spec), pol))
	d, err := authz.New(fixture.Config(t, configBody)).Generate(plugin.Target{Namespace: ns, Owner: owner,
		Observed: plugin.Observed{Objects: []client.Object{pol}}})
	require.NoError(t, err)
	var found []string
	for _, w := range d.Warnings {
		if strings.Contains(w, "AuthorizationPolicy open ") {
			found = append(found, w)
		}
	}
	require.LessOrEqual(t, len(found), 1, "one warning per policy")
	if len(found) == 0 {
		return ""
	}
	return found[0]
}

// A foreign ALLOW policy is reported when it admits every caller, and that is found by evaluating
// it, not by its shape (attack review of Dec 1, finding 2): ipBlocks that cover a family,
// negative lists of names, a source.ip condition that covers every address all admit every caller
// the policy does not name, and reach ztunnel with their rules kept. A policy that refuses some
// caller (an address range kept out, a named source, a condition nobody meets, a secret header
// value, a JWT it asks for) is never reported. want is whom the warning says the policy admits,
// "" for no warning.
func TestForeignAllowPoliciesAreEvaluatedNotJudgedByShape(t *testing.T) {
	const sidecar = "mesh: {mode: sidecar}\n"
	cases := []struct {
		name, config, spec string
		want               string
	}{
		// The three shapes of the finding.
		{name: "ipBlocks covering both families", spec: "{rules: [{from: [{source: {ipBlocks: [0.0.0.0/0, '::/0']}}]}]}", want: "every caller"},
		{name: "notNamespaces with a name", spec: "{rules: [{from: [{source: {notNamespaces: [no-such-ns]}}]}]}", want: "every caller it does not name"},
		{name: "a source.ip condition covering IPv4", spec: "{rules: [{when: [{key: source.ip, values: [0.0.0.0/0]}]}]}", want: "every caller over IPv4"},

		// Addresses.
		{name: "ipBlocks covering IPv4", spec: "{rules: [{from: [{source: {ipBlocks: [0.0.0.0/0]}}]}]}", want: "every caller over IPv4"},
		{name: "ipBlocks covering IPv6", spec: "{rules: [{from: [{source: {ipBlocks: ['::/0']}}]}]}", want: "every caller over IPv6"},
		{name: "halves of both families", spec: "{rules: [{from: [{source: {ipBlocks: [0.0.0.0/1, 128.0.0.0/1, '::/1', '8000::/1']}}]}]}", want: "every caller"},
		{name: "half of IPv4", spec: "{rules: [{from: [{source: {ipBlocks: [0.0.0.0/1]}}]}]}"},
		{name: "all of IPv4 and part of IPv6", spec: "{rules: [{from: [{source: {ipBlocks: [0.0.0.0/0, '2001:db8::/32']}}]}]}"},
		{name: "a family in each source", spec: "{rules: [{from: [{source: {ipBlocks: [0.0.0.0/0]}}, {source: {ipBlocks: ['::/0']}}]}]}", want: "every caller"},
		{name: "a family in each rule", spec: "{rules: [{from: [{source: {ipBlocks: [0.0.0.0/0]}}]}, {when: [{key: source.ip, values: ['::/0']}]}]}", want: "every caller"},
		{name: "both families but a range", spec: "{rules: [{from: [{source: {ipBlocks: [0.0.0.0/0, '::/0'], notIpBlocks: [10.0.0.0/8]}}]}]}"},
		{name: "a range kept out of IPv4", spec: "{rules: [{from: [{source: {notIpBlocks: [10.0.0.0/8]}}]}]}"},
		{name: "a single address kept out", spec: "{rules: [{from: [{source: {notIpBlocks: ['fd00::1']}}]}]}"},
		{name: "both families in one condition", spec: "{rules: [{when: [{key: source.ip, values: [0.0.0.0/0, '::/0']}]}]}", want: "every caller"},
		{name: "both families in two conditions, which must both hold", spec: "{rules: [{when: [{key: source.ip, values: [0.0.0.0/0]}, {key: source.ip, values: ['::/0']}]}]}"},
		{name: "a source.ip range kept out", spec: "{rules: [{when: [{key: source.ip, notValues: [10.0.0.0/8]}]}]}"},
		{name: "an address ztunnel would skip is not judged", spec: "{rules: [{from: [{source: {ipBlocks: [not-an-ip, 0.0.0.0/0, '::/0']}}]}]}"},

		// Identities.
		{name: "notNamespaces", spec: "{rules: [{from: [{source: {notNamespaces: [kube-system, istio-system]}}]}]}", want: "every caller it does not name"},
		{name: "notNamespaces all", spec: "{rules: [{from: [{source: {notNamespaces: ['*']}}]}]}"},
		{name: "notPrincipals", spec: "{rules: [{from: [{source: {notPrincipals: [cluster.local/ns/a/sa/b]}}]}]}", want: "every caller it does not name"},
		{name: "notPrincipals all", spec: "{rules: [{from: [{source: {notPrincipals: ['*']}}]}]}"},
		{name: "notPrincipals of the trust domain", spec: "{rules: [{from: [{source: {notPrincipals: ['cluster.local/*']}}]}]}"},
		{name: "notServiceAccounts", spec: "{rules: [{from: [{source: {notServiceAccounts: [monitoring/prometheus]}}]}]}", want: "every caller it does not name"},
		{name: "serviceAccounts", spec: "{rules: [{from: [{source: {serviceAccounts: [monitoring/prometheus]}}]}]}"},
		{name: "any namespace but one", spec: "{rules: [{from: [{source: {namespaces: ['*'], notNamespaces: [a]}}]}]}", want: "every mesh caller it does not name"},
		{name: "a name and everyone else", spec: "{rules: [{from: [{source: {namespaces: [a]}}]}, {from: [{source: {notNamespaces: [a]}}]}]}", want: "every caller it does not name"},
		{name: "the trust domain's principals", spec: "{rules: [{from: [{source: {principals: ['cluster.local/*']}}]}]}", want: "every mesh caller"},
		{name: "every namespace's principals", spec: "{rules: [{from: [{source: {principals: ['cluster.local/ns/*']}}]}]}", want: "every mesh caller"},
		{name: "some namespaces' principals", spec: "{rules: [{from: [{source: {principals: ['cluster.local/ns/team-*']}}]}]}"},
		{name: "another trust domain", spec: "{rules: [{from: [{source: {principals: ['other.example/*']}}]}]}"},
		{name: "a configured trust domain", config: "mesh: {trustDomain: corp.example}\n", spec: "{rules: [{from: [{source: {principals: ['corp.example/*']}}]}]}", want: "every mesh caller"},
		{name: "the default trust domain under a configured one", config: "mesh: {trustDomain: corp.example}\n", spec: "{rules: [{from: [{source: {principals: ['cluster.local/*']}}]}]}"},
		{name: "a service account name in every namespace", spec: "{rules: [{from: [{source: {principals: ['*/sa/default']}}]}]}"},
		{name: "a principal with the spiffe scheme", spec: "{rules: [{from: [{source: {principals: ['spiffe://cluster.local/*']}}]}]}"},
		{name: "source.namespace notValues", spec: "{rules: [{when: [{key: source.namespace, notValues: [a]}]}]}", want: "every caller it does not name"},
		{name: "source.namespace any", spec: "{rules: [{when: [{key: source.namespace, values: ['*']}]}]}", want: "every mesh caller"},
		{name: "source.namespace empty, which only plaintext has at ztunnel", spec: "{rules: [{when: [{key: source.namespace, values: ['']}]}]}"},
		{name: "source.principal notValues", spec: "{rules: [{when: [{key: source.principal, notValues: [cluster.local/ns/a/sa/b]}]}]}", want: "every caller it does not name"},
		{name: "source.principal any", spec: "{rules: [{when: [{key: source.principal, values: ['*']}]}]}", want: "every mesh caller"},
		{name: "a named source", spec: "{rules: [{from: [{source: {principals: [cluster.local/ns/monitoring/sa/prometheus]}}]}]}"},

		// Destinations: the caller picks them, so they restrict what is reached, not who.
		{name: "a destination port", spec: "{rules: [{when: [{key: destination.port, values: ['8080']}]}]}", want: "every caller"},
		{name: "a destination port and its negation", spec: "{rules: [{when: [{key: destination.port, values: ['8080'], notValues: ['8080']}]}]}"},
		{name: "an operation port the condition refuses", spec: "{rules: [{to: [{operation: {ports: ['8080']}}], when: [{key: destination.port, notValues: ['8080']}]}]}"},
		{name: "an operation port the condition leaves", spec: "{rules: [{to: [{operation: {ports: ['8080', '9090']}}], when: [{key: destination.port, notValues: ['8080']}]}]}", want: "every caller"},
		{name: "every port but one", spec: "{rules: [{to: [{operation: {notPorts: ['15021']}}]}]}", want: "every caller"},
		{name: "a port name", spec: "{rules: [{to: [{operation: {ports: [http]}}]}]}"},
		{name: "port 0", spec: "{rules: [{to: [{operation: {ports: ['0']}}]}]}"},
		{name: "a destination address", spec: "{rules: [{when: [{key: destination.ip, values: [10.0.0.5]}]}]}", want: "every caller"},
		{name: "a destination range and its negation", spec: "{rules: [{when: [{key: destination.ip, values: [10.0.0.0/8], notValues: [10.0.0.0/8]}]}]}"},

		// Shapes whose reading differs, or that match nothing at ztunnel.
		{name: "an empty source", spec: "{rules: [{from: [{source: {}}]}]}"},
		{name: "an empty operation", spec: "{rules: [{to: [{operation: {}}]}]}"},
		{name: "a condition without values", spec: "{rules: [{when: [{key: source.ip}]}]}"},
		{name: "an L7 condition at ztunnel", spec: "{rules: [{when: [{key: 'request.headers[x-a]', values: ['*']}]}]}"},
		{name: "no rules", spec: "{}"},

		// Sidecars (Envoy) enforce L7 attributes too.
		{name: "sidecar, a header value that may be a secret", config: sidecar, spec: "{rules: [{when: [{key: 'request.headers[x-token]', values: [s3cr3t]}]}]}"},
		{name: "sidecar, a header's presence", config: sidecar, spec: "{rules: [{when: [{key: 'request.headers[x-a]', values: ['*']}]}]}", want: "every caller"},
		{name: "sidecar, a header kept out", config: sidecar, spec: "{rules: [{when: [{key: 'request.headers[x-a]', notValues: [bad]}]}]}", want: "every caller"},
		{name: "sidecar, a header both present and absent", config: sidecar,
			spec: "{rules: [{when: [{key: 'request.headers[x-a]', values: ['*']}, {key: 'request.headers[X-A]', notValues: ['*']}]}]}"},
		{name: "sidecar, a JWT claim", config: sidecar, spec: "{rules: [{when: [{key: 'request.auth.claims[iss]', values: [example.com]}]}]}"},
		{name: "sidecar, a JWT principal kept out", config: sidecar, spec: "{rules: [{when: [{key: request.auth.principal, notValues: [example.com/x]}]}]}", want: "every caller"},
		{name: "sidecar, requests without a JWT", config: sidecar, spec: "{rules: [{from: [{source: {notRequestPrincipals: ['*']}}]}]}", want: "every caller"},
		{name: "sidecar, a remote address is not judged", config: sidecar, spec: "{rules: [{when: [{key: remote.ip, values: [0.0.0.0/0, '::/0']}]}]}"},
		{name: "sidecar, SNI is not judged", config: sidecar, spec: "{rules: [{when: [{key: connection.sni, values: ['*']}]}]}"},
		{name: "sidecar, trust domains are not judged", config: sidecar, spec: "{rules: [{from: [{source: {trustDomains: ['*']}}]}]}"},
		{name: "sidecar, a path prefix but one", config: sidecar, spec: "{rules: [{to: [{operation: {paths: ['/api/*'], notPaths: [/api/admin]}}]}]}", want: "every caller"},
		{name: "sidecar, a path prefix and its negation", config: sidecar, spec: "{rules: [{to: [{operation: {paths: ['/api/*'], notPaths: ['/api/*']}}]}]}"},
		{name: "sidecar, any path but those under /", config: sidecar, spec: "{rules: [{to: [{operation: {paths: ['*'], notPaths: ['/*']}}]}]}"},
		{name: "sidecar, a host in another case", config: sidecar, spec: "{rules: [{to: [{operation: {hosts: [Example.COM], notHosts: [example.com]}}]}]}"},
		{name: "sidecar, a method and its negation", config: sidecar, spec: "{rules: [{to: [{operation: {methods: [GET], notMethods: [GET]}}]}]}"},
		{name: "sidecar, a path template is not judged", config: sidecar, spec: "{rules: [{to: [{operation: {paths: ['/{*}']}}]}]}"},
		{name: "sidecar, an unknown condition key", config: sidecar, spec: "{rules: [{when: [{key: experimental.envoy.filters.a, values: ['*']}]}]}"},

		// The waypoint enforces what is attached to it.
		{name: "at a Service, a header's presence", spec: "{targetRefs: [{kind: Service, name: app}], rules: [{when: [{key: 'request.headers[x-a]', values: ['*']}]}]}", want: "every caller"},
		{name: "at the waypoint, every namespace but one", spec: "{targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: waypoint}], rules: [{from: [{source: {notNamespaces: [a]}}]}]}",
			want: "every caller it does not name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := foreignWarning(t, tc.config, tc.spec)
			if tc.want == "" {
				assert.Empty(t, got, "the policy refuses some caller")
				return
			}
			require.NotEmpty(t, got, "the policy admits %s", tc.want)
			assert.Contains(t, got, "AuthorizationPolicy open (not made by this plugin) admits "+tc.want+" at ")
		})
	}
}

// A policy with more address ranges than the evaluation walks is named as not evaluated rather
// than passed over in silence.
func TestForeignPolicyTooLargeToEvaluateIsNamed(t *testing.T) {
	blocks := make([]string, 0, 1100)
	for i := range 1100 {
		blocks = append(blocks, fmt.Sprintf("'10.%d.%d.0/24'", i/256, i%256))
	}
	got := foreignWarning(t, "", "{rules: [{from: [{source: {ipBlocks: [0.0.0.0/0, '::/0', "+strings.Join(blocks, ", ")+"]}}]}]}")
	assert.Contains(t, got, "AuthorizationPolicy open (not made by this plugin) is enforced at ztunnel")
	assert.Contains(t, got, "names 1102 address ranges, more than the 1024 this plugin evaluates")
}
