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
