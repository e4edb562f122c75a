package runner_test

// A plugin whose generation fails, or a write that fails, never takes protection down ahead of
// the labels that need it, and never leaves a label on objects that do not protect: the failure
// rules of the safety model in the package doc.

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// A plugin whose generation fails touches nothing of its own. Its policies still stand, so
// nothing is withdrawn and nothing is written; before the fix the namespace left ambient and the
// waypoint.
func TestFailedPluginKeepsEnrolment(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.failAuthz()
	res := m.apply()
	require.ErrorContains(t, res.Err(), "plugin authz")
	enrolled(t, m.labels())
	assert.Empty(t, m.writes, "a failed plugin must not unlabel, prune or rewrite")
	assert.NotNil(t, m.policy(ztunnelName))
	assert.NotNil(t, m.policy(ownerName))
}

// An invalid Profile edit (the owner "alice@example.com " with a trailing space) keeps the
// namespace enrolled and protected, and leaves access with nobody: the owner policy loses the
// old owner's rule, and only that policy is written.
func TestInvalidOwnerKeepsProtectionAndAdmitsNoUser(t *testing.T) {
	m := newMesh(t)
	m.controlledByProfile() // so an owner edit does not make the namespace someone else's
	m.enrol()
	p := testProfile()
	p.Spec.Owner.Name = "alice@example.com "
	res := m.runner.Apply(context.Background(), p)
	require.ErrorContains(t, res.Err(), "spec.owner.name")
	assert.False(t, res.Retryable(), "an input error")
	enrolled(t, m.labels())
	assert.Equal(t, []string{"apply AuthorizationPolicy/" + ownerName}, m.writes)
	owner := m.policy(ownerName)
	require.NotNil(t, owner)
	assert.NotEmpty(t, owner.Spec.TargetRefs)
	for _, r := range owner.Spec.Rules {
		for _, c := range r.When {
			assert.NotContains(t, c.Key, "request.headers", "no user rule while the owner is refused")
		}
	}
	assert.NotNil(t, m.policy(ztunnelName))
}

// A failed plugin's object counts as what it is: once another writer changed its spec (or it is
// gone), the routing labels that require it come off; a failed plugin cannot restore it.
func TestFailedPluginsDamagedObjectDoesNotKeepRouting(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.setAction(ownerName, securityv1beta1.AuthorizationPolicy_AUDIT, "kubectl-edit")

	m.failAuthz()
	res := m.apply()
	require.Error(t, res.Err())
	labels := m.labels()
	assert.NotContains(t, labels, useWaypoint)
	assert.NotContains(t, labels, ingressUseWaypoint)
	assert.Equal(t, "ambient", labels[dataplaneMode], "the ztunnel policy is intact")
	assert.Contains(t, strings.Join(res.Waiting(), "\n"), "AuthorizationPolicy.security.istio.io/"+ownerName+" was changed by another writer (kubectl-edit set spec.action)")

	// Gone altogether: the same.
	m2 := newMesh(t)
	m2.enrol()
	require.NoError(t, m2.c.Delete(context.Background(), m2.policy(ownerName)))
	m2.failAuthz()
	require.Error(t, m2.apply().Err())
	assert.NotContains(t, m2.labels(), useWaypoint)
	assert.Equal(t, "ambient", m2.labels()[dataplaneMode])
}

// The ztunnel policy is deleted and re-creating it fails. Pods in ambient stay there (mTLS and
// the waypoint's owner policy still apply); once writes succeed, one Apply restores everything.
func TestFailedRecreateOfADeletedZtunnelPolicy(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.addPod("app", nil)
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ztunnelName)))
	m.fail = failPolicyWrites(ztunnelName)
	res := m.apply()
	require.ErrorContains(t, res.Err(), "applying AuthorizationPolicy.security.istio.io/"+ztunnelName)
	assert.True(t, res.Retryable())
	labels := m.labels()
	assert.Equal(t, "ambient", labels[dataplaneMode], "pods must not leave the mesh because a write failed")
	assert.NotContains(t, labels, useWaypoint, "the waypoint requires the ztunnel policy")
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "does not exist and creating it failed")

	m.fail = nil
	require.NoError(t, m.apply().Err())
	assert.NotNil(t, m.policy(ztunnelName))
	enrolled(t, m.labels())
}

// Without pods the label follows its requirement: no ztunnel policy, no enrolment.
func TestFailedRecreateWithoutPodsUnenrols(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ztunnelName)))
	m.fail = failPolicyWrites(ztunnelName)
	require.Error(t, m.apply().Err())
	assert.NotContains(t, m.labels(), dataplaneMode)
	m.fail = nil
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
}

// A failed update of a policy that stands keeps every label: the earlier version still protects.
func TestFailedUpdateOfAStandingPolicyKeepsLabels(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.cfg.Authorization.L4Exceptions = []config.L4Exception{{Namespaces: []string{"monitoring"}}}
	m.fail = failPolicyWrites(ztunnelName)
	require.Error(t, m.apply().Err())
	enrolled(t, m.labels())
}
