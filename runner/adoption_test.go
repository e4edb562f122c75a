package runner_test

// Adoption (Desired.Adopt): an object another writer made under a wanted name that the plugin may
// take over protects only once the takeover has restored it as desired.

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// Adopting a legacy owner policy fails: it is not the plugin's, so nothing is routed to the waypoint.
func TestFailedAdoptionWithholdsUseWaypoint(t *testing.T) {
	legacy := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ownerName, Namespace: ns}}
	m := newMesh(t, legacy)
	m.cfg.Authorization.AdoptOwnerPolicy = true
	m.fail = func(verb string, obj any) error {
		if describe(obj) == "AuthorizationPolicy/"+ownerName {
			return apierrors.NewServiceUnavailable("injected")
		}
		return nil
	}
	require.Error(t, m.apply().Err())
	res := m.apply()
	require.Error(t, res.Err())
	assert.NotContains(t, m.labels(), useWaypoint)
	assert.Contains(t, res.Waiting(), "waypoint: waiting for waypoint: Gateway "+ns+"/waypoint is not made until AuthorizationPolicy "+ownerName+
		" is attached to it, so that it never serves without its owner policy")
	assert.Equal(t, "ambient", m.labels()[dataplaneMode])

	m.fail = nil
	res = m.apply()
	require.NoError(t, res.Err())
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "adopted AuthorizationPolicy.security.istio.io/"+ownerName)
	require.NoError(t, m.apply().Err(), "the Gateway is made once the adopted owner policy is attached to it")
	m.program()
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
}

// Adoption restores the legacy policy to exactly the desired spec and marks it as the plugin's in
// one Update; when only the apply after it fails, the policy already protects. Routing, which the
// legacy policy's content reached until istiod has the adopted one, waits for the next call.
func TestAdoptionRestoredButNotReowned(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ownerName)))
	m.cfg.Authorization.AdoptOwnerPolicy = true
	legacy := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ownerName, Namespace: ns},
		Spec: securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{}}}}
	require.NoError(t, m.c.Create(context.Background(), legacy, client.FieldOwner("kfam")))
	m.fail = failVerb("apply", "AuthorizationPolicy/"+ownerName)
	res := m.apply()
	require.Error(t, res.Err())
	warnings := strings.Join(res.Warnings(), "\n")
	assert.Contains(t, warnings, "adopted AuthorizationPolicy.security.istio.io/"+ownerName)
	assert.NotContains(t, warnings, "changed by another writer", "adoption is not drift")
	got := m.policy(ownerName)
	assert.True(t, plugin.IsManagedBy(got.Labels, "authz"))
	assert.NotEmpty(t, got.Spec.TargetRefs, "the desired spec")
	restoredNotRouted(t, m.labels())
	m.fail = nil
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
}

// Found by the property test: a namespace not routed yet, whose Programmed waypoint exists, meets
// another writer's owner policy without targetRefs while its ztunnel policy is drifted. With
// adoptOwnerPolicy the access plugin takes the policy over in its sidecar form (the ztunnel
// policy is not intact), and the requirement check after that write finds it "as wanted": the
// waypoint plugin must not route through a waypoint no owner policy is attached to.
func TestAdoptedDetachedOwnerPolicyIsNotRoutedTo(t *testing.T) {
	t.Parallel()
	m := newMesh(t)
	require.NoError(t, m.apply().Err())
	m.program()
	require.NoError(t, m.c.Delete(context.Background(), m.policy(ownerName)))
	legacy := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ownerName, Namespace: ns},
		Spec: securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{}}}}
	require.NoError(t, m.c.Create(context.Background(), legacy, client.FieldOwner("kfam")))
	m.setAction(ztunnelName, securityv1beta1.AuthorizationPolicy_AUDIT, "kubectl-edit")
	m.cfg.Authorization.AdoptOwnerPolicy = true
	m.configure(config.ModeAmbient)

	for i := range 4 {
		m.apply()
		m.program()
		if m.labels()[useWaypoint] != "" || m.labels()[ingressUseWaypoint] != "" {
			assert.NotEmpty(t, m.policy(ownerName).Spec.TargetRefs, "call %d routed to a waypoint no owner policy is attached to", i+1)
		}
	}
	enrolled(t, m.labels())
	assert.NotEmpty(t, m.policy(ownerName).Spec.TargetRefs)
}
