package guard_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// Several paths of the trust model (docs/security/threat-model.md) are accepted because
// Kubeflow's roles do not grant the right they need: evicting the waypoint's pods, impersonating
// its ServiceAccount or another user, requesting a token, adding an ephemeral container, binding a
// pod to a node, writing a pod's status, or writing the namespace itself. Each is asked of the
// API server's authorizer (a SubjectAccessReview) for the owner (kubeflow-admin) and a
// contributor (kubeflow-edit), bound as kfam binds them; a Kubeflow release that grants one of
// them makes the path open and fails this test.
func TestKubeflowRolesGrantNoneOfTheRightsTheAcceptedPathsNeed(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ns := s.namespace(t, "accepted")
	for _, a := range []authorizationv1.ResourceAttributes{
		{Verb: "create", Resource: "pods", Subresource: "eviction", Name: "waypoint-5d8f9-x7k2p"},
		{Verb: "impersonate", Resource: "serviceaccounts", Name: "waypoint"},
		{Verb: "impersonate", Resource: "users", Name: "alice@example.com"},
		{Verb: "impersonate", Resource: "groups", Name: "system:masters"},
		{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: "waypoint"},
		{Verb: "patch", Resource: "pods", Subresource: "ephemeralcontainers", Name: "waypoint-5d8f9-x7k2p"},
		{Verb: "create", Resource: "pods", Subresource: "binding", Name: "waypoint-5d8f9-x7k2p"},
		{Verb: "patch", Resource: "pods", Subresource: "status", Name: "waypoint-5d8f9-x7k2p"},
		{Verb: "update", Resource: "namespaces", Name: ns},
		{Verb: "create", Group: "security.istio.io", Resource: "authorizationpolicies"},
		{Verb: "create", Group: "networking.istio.io", Resource: "envoyfilters"},
		{Verb: "create", Group: "gateway.networking.k8s.io", Resource: "gateways"},
	} {
		for _, user := range []string{editor, admin} {
			a.Namespace = ns
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:authenticated"}, ResourceAttributes: &a}}
			require.NoError(t, s.env.Client.Create(context.Background(), review))
			assert.False(t, review.Status.Allowed, "%s may %s %s/%s %s in a user namespace: the trust model accepts the path that needs it because Kubeflow's roles do not grant it",
				user, a.Verb, a.Resource, a.Subresource, a.Name)
		}
	}
}
