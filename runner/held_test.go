package runner_test

import (
	"strings"
	"testing"

	"context"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// A wanted ztunnel policy an admin deletes stays in force under plugin.ProtectionFinalizer for as
// long as the plugin wants it, also in a namespace without pods, so `kubectl delete` waits. Like
// Kubernetes' PVC protection, the Profile's condition says so, and why: not only a warning event.
func TestAHeldZtunnelPolicyIsSaidInTheCondition(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	m.controlledByProfile()
	m.enrol()
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ztunnelName)))

	res := m.apply()
	require.NoError(t, res.Err())
	ready, msg := res.Summary()
	assert.True(t, ready, "the policy still applies: nothing failed")
	for _, want := range []string{
		"AuthorizationPolicy.security.istio.io/" + ztunnelName + " is held",
		"finalizer " + plugin.ProtectionFinalizer,
		"istio.io/dataplane-mode=ambient requires it",
		"a delete of it waits",
	} {
		assert.Contains(t, msg, want)
	}
	assert.True(t, strings.Contains(strings.Join(res.Warnings(), "\n"), "is being deleted although plugin authz wants it"), "and a warning, for the event")
}
