package runner_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A namespace already routed through the waypoint whose owner policy lost its targetRefs to
// another writer, while the ztunnel policy is damaged too, gets the owner policy back on the
// waypoint in the same call, and routing returns on the next: it is never routed to a waypoint
// without its owner policy
// (found by the property test at 10,000 sequences).
func TestRoutedNamespaceGetsItsOwnerPolicyBackOnTheWaypointAtOnce(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	owner := m.policy(ownerName)
	owner.Spec.TargetRefs = nil
	require.NoError(t, m.c.Update(context.Background(), owner, client.FieldOwner("kubectl-edit")))
	z := m.policy(ztunnelName)
	z.Spec.Action = securityv1beta1.AuthorizationPolicy_CUSTOM
	z.Spec.ActionDetail = &securityv1beta1.AuthorizationPolicy_Provider{Provider: &securityv1beta1.AuthorizationPolicy_ExtensionProvider{Name: "x"}}
	require.NoError(t, m.c.Update(context.Background(), z, client.FieldOwner("kubectl-edit")))
	require.NoError(t, m.apply().Err())
	assert.NotEmpty(t, m.policy(ownerName).Spec.TargetRefs, "attached to the waypoint again")
	assert.NotContains(t, m.labels(), useWaypoint, "not routed while the observed policy was detached")
	assert.Equal(t, "ambient", m.labels()[dataplaneMode])
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
	assert.Equal(t, securityv1beta1.AuthorizationPolicy_ALLOW, m.policy(ztunnelName).Spec.Action)
}
