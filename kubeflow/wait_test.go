package kubeflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// gitOpsStricter sets, as a GitOps tool would, a stricter enforce level on alice's namespace than
// the configured one: the pss plugin keeps it and warns on every call.
func gitOpsStricter(t *testing.T, c client.Client) {
	t.Helper()
	ns := &corev1.Namespace{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: "alice"}, ns))
	ns.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
	require.NoError(t, c.Update(context.Background(), ns, client.FieldOwner("gitops")))
}

// programAlice writes the status istiod writes once alice's waypoint is ready.
func programAlice(t *testing.T, c client.Client) {
	t.Helper()
	gw := &gatewayv1.Gateway{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "alice", Name: "waypoint"}, gw))
	ip := gatewayv1.IPAddressType
	gw.Status.Conditions = []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed",
		ObservedGeneration: gw.Generation, LastTransitionTime: metav1.Now()}}
	gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: &ip, Value: "10.96.10.10"}}
	require.NoError(t, c.Update(context.Background(), gw))
}

// A namespace whose waypoint is not Programmed (istiod down) waits for an event the controller
// watches (the Gateway's status): the requeue is a fallback, so it backs off exponentially to
// MaxWaitRequeue instead of polling every 15 seconds, and each warning is logged once, not on
// every pass. (Seen before: the Pod Security warning of a GitOps-made namespace 20 times in five
// minutes.)
func TestAWaitingNamespaceBacksOffAndSaysEachWarningOnce(t *testing.T) {
	in, c := newIntegration(t)
	in.MaxWaitRequeue = 10 * time.Minute
	gitOpsStricter(t, c)

	var lines []string
	var delays []time.Duration
	for range 9 {
		res, err := in.Apply(logged(&lines), aliceProfile("alice@example.com"))
		require.NoError(t, err)
		delays = append(delays, res.RequeueAfter)
	}
	s := time.Second
	assert.Equal(t, []time.Duration{15 * s, 30 * s, 60 * s, 120 * s, 240 * s, 480 * s, 600 * s, 600 * s, 600 * s}, delays)
	assert.Len(t, containing(lines, "never loosened"), 1, "said once, not on every pass: %v", lines)

	programAlice(t, c)
	res, err := in.Apply(logged(&lines), aliceProfile("alice@example.com"))
	require.NoError(t, err)
	assert.Zero(t, res, "routed through the waypoint: done")
	assert.Len(t, containing(lines, "never loosened"), 1, "the warning has not changed")
}

// Without MaxWaitRequeue every wait comes back after the Runner's WaitRequeue, as before; a
// warning is still said once per change.
func TestWithoutMaxWaitRequeueAWaitComesBackAfterWaitRequeue(t *testing.T) {
	in, c := newIntegration(t)
	gitOpsStricter(t, c)
	var lines []string
	for range 3 {
		res, err := in.Apply(logged(&lines), aliceProfile("alice@example.com"))
		require.NoError(t, err)
		assert.Equal(t, 15*time.Second, res.RequeueAfter)
	}
	assert.Len(t, containing(lines, "never loosened"), 1, "%v", lines)
}

// A Profile's backoff ends with its Revoke: the Profile re-created under the same name waits
// WaitRequeue first again.
func TestRevokeEndsAProfilesBackoff(t *testing.T) {
	in, _ := newIntegration(t)
	in.MaxWaitRequeue = 10 * time.Minute
	for range 3 {
		_, err := in.Apply(context.Background(), aliceProfile("alice@example.com"))
		require.NoError(t, err)
	}
	_, err := in.Revoke(context.Background(), aliceProfile("alice@example.com"))
	require.NoError(t, err)
	res, err := in.Apply(context.Background(), aliceProfile("alice@example.com"))
	require.NoError(t, err)
	assert.Equal(t, 15*time.Second, res.RequeueAfter, "Revoke forgets the Profile")
}
