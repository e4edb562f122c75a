package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// istiod reads the waypoint class defaults, which patch every waypoint of the cluster, from
// mesh.istiodNamespace: it is reserved even when it is not the root namespace, so no Profile gets
// it while it does not exist yet (finding 7 of internal/safety/FINDINGS-2.md).
func TestReservedNamespacesIncludeIstiodsNamespace(t *testing.T) {
	c, err := config.Parse([]byte(header + "mesh: {istiodNamespace: istio-control}\n"))
	require.NoError(t, err)
	assert.Contains(t, c.ReservedNamespaces(), "istio-control")
}

// A reserved pattern whose ranges run forward is accepted, negated or not: Validate refuses only
// the reversed ones (review A5-5), whose RE2 form in the guard does not compile.
func TestReservedPatternsWithForwardRangesAreAccepted(t *testing.T) {
	c, err := config.Parse([]byte(header + "namespaces: {reserved: ['team-[a-c]', 'lab-[^0-9]x', 'x[a-a]']}\n"))
	require.NoError(t, err)
	assert.Subset(t, c.ReservedNamespaces(), []string{"team-[a-c]", "lab-[^0-9]x", "x[a-a]"})
}
