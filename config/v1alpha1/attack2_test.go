package v1alpha1_test

// Attack tests of the second security review (internal/safety/FINDINGS-2.md): a careless admin's PluginConfig.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

func parseIPBlocks(blocks string) (*config.Config, error) {
	return config.Parse([]byte(header + "authorization: {l4Exceptions: [{ipBlocks: [" + blocks + "], ports: [9091]}]}\n"))
}

// FINDING (silent-bad-config). An IPv4-mapped IPv6 range is accepted without an error or a
// warning: "::ffff:0.0.0.0/96" is every IPv4 address (the /0 the validation refuses, written
// another way), "::ffff:10.0.0.0/104" is 10.0.0.0/8 (warned when written as IPv4), and none of
// them is wide by the IPv6 rule (/48), because netip's Is4 is false for them. istiod passes the
// 16 bytes through unchanged (pilot/pkg/serviceregistry/ambient/authorization.go, stringToIP:
// ipAddr.AsSlice(), Length 96/104/128), and ztunnel compares them with the connection's source
// address, which it sees as plain IPv4 for IPv4 clients: so such an entry either admits nothing
// (the Prometheus the admin meant stays denied, silently) or, on a data plane that maps IPv4
// sources into IPv6, every IPv4 client. Either way the admin is not told. Suggested fix: refuse
// Is4In6 addresses and ranges with a message that gives the IPv4 form (p.Addr().Unmap(), bits-96).
func TestIPBlocksAttackIPv4MappedRangesAreAcceptedSilently(t *testing.T) {
	for _, b := range []string{"'::ffff:0.0.0.0/96'", "'::ffff:10.0.0.0/104'", "'::ffff:10.8.3.4'", "'0:0:0:0:0:ffff:0:0/96'"} {
		c, err := parseIPBlocks(b)
		if err == nil {
			assert.Fail(t, "an IPv4-mapped range is accepted", "%s: no error, warnings %q", b, c.Warnings())
			continue
		}
		assert.Contains(t, err.Error(), "authorization.l4Exceptions[0].ipBlocks[0]", b)
	}
}

// FINDING (silent-bad-config). A /0 is refused, but the same range split in two halves is accepted
// (with two "very wide" warnings, which cmd/profile-plugins-controller never logs: only render
// prints Config.Warnings). Every address then reaches every pod of every user namespace past the
// waypoint, the ingress gateway's and the Pipelines UI's pods included, so each forwards any user's
// request without the header check. Suggested fix: refuse when the union of the ipBlocks (of one
// exception and across exceptions) covers all of IPv4 or all of IPv6, or refuse ranges wider than
// some bound outright; and log Config.Warnings at controller start.
func TestIPBlocksAttackHalvesMakeASlashZero(t *testing.T) {
	for name, body := range map[string]string{
		"one exception IPv4":   "authorization: {l4Exceptions: [{ipBlocks: [0.0.0.0/1, 128.0.0.0/1]}]}\n",
		"two exceptions IPv4":  "authorization: {l4Exceptions: [{ipBlocks: [0.0.0.0/1]}, {ipBlocks: [128.0.0.0/1]}]}\n",
		"one exception IPv6":   "authorization: {l4Exceptions: [{ipBlocks: ['::/1', '8000::/1']}]}\n",
		"four quarters, ports": "authorization: {l4Exceptions: [{ipBlocks: [0.0.0.0/2, 64.0.0.0/2, 128.0.0.0/2, 192.0.0.0/2], ports: [8080]}]}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.Parse([]byte(header + body))
			assert.Error(t, err, "ipBlocks whose union is every address are accepted")
		})
	}
}

// PROPERTY (passes): malformed entries that istiod's conversion would skip (leaving a rule with
// no source, which admits everyone) are refused: leading zeros, white space, zero-padded bits.
func TestIPBlocksAttackMalformedEntriesAreRefused(t *testing.T) {
	for _, b := range []string{"'010.8.0.0/24'", "'10.8.0.0/024'", "' 10.8.0.0/24'", "'10.8.0.0/24 '", "'10.8.0.0/ 24'", "'10.8.3.04'", "'10.8.0.0/-1'", "'10.8.0.0/'"} {
		_, err := parseIPBlocks(b)
		if assert.Error(t, err, b) {
			assert.Contains(t, err.Error(), "authorization.l4Exceptions[0].ipBlocks[0]", b)
		}
	}
}

// FINDING (silent-bad-config, defence in depth). mesh.istiodNamespace is where istiod reads the
// waypoint class defaults, which patch every waypoint Deployment of the cluster; the README says
// "Only admins write there". When it differs from mesh.rootNamespace it is not among the reserved
// namespaces, so a Profile named like it is not refused by name: if that namespace does not exist
// yet (istiod installed later, or renamed), the reference controller creates it for the Profile
// and its owner can write class defaults for every waypoint. Suggested fix: reserve
// mesh.istiodNamespace like mesh.rootNamespace.
func TestAttackIstiodNamespaceIsNotReserved(t *testing.T) {
	c, err := config.Parse([]byte(header + "mesh: {istiodNamespace: istio-control}\n"))
	require.NoError(t, err)
	assert.Contains(t, c.ReservedNamespaces(), "istio-control")
}

// PROPERTY (passes): a caller on behalf of users is refused on the sidecar data plane in ambient
// mode, and a sidecar-mode configuration that has one cannot be switched to ambient without
// validation refusing it.
func TestAttackOnBehalfOfUserSidecarCallerThroughAModeSwitch(t *testing.T) {
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

// PROPERTY (passes): a caller that is not on behalf of users may not use the ingress gateway's
// or an on-behalf caller's principal, on either data plane, and names are DNS labels (so no two
// differ by case only).
func TestAttackCallerPrincipalOverlapsAHeaderOnlyPrincipal(t *testing.T) {
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
